"""Everything that touches pytest-benchmark: the item's timing settings (through its marker), the plan read from
its fixture, the rounds timed elsewhere fed back into its statistics, and its JSON and compare hooks.

pytest-benchmark has no public way to accept rounds timed elsewhere; the private attributes this needs are read
here alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ..report.book import RecordBook
from ..runs.files import write_records
from ..timing.measure import Timing, TimingPlan
from ..timing.policy import TimingPolicy
from ..timing.rounds import RoundsPlan
from ..timing.timers import CUDA_MIN_ROUND_SECONDS, cuda_synchronized_perf_counter

BENCHMARK_MARKER = "benchmark"  # pytest-benchmark's own marker
UNTIMED_KEY = pytest.StashKey[bool]()
PYTEST_BENCHMARK_MIN_TIME = 0.000005  # --benchmark-min-time's default


def mark_untimed(item: pytest.Item) -> None:
    """Tell pytest-benchmark that this item's fixture goes unused on purpose: its model failed, there is
    nothing to time (see ``quiet_unused_fixture``)."""
    item.stash[UNTIMED_KEY] = True


def quiet_unused_fixture(item: pytest.Item) -> None:
    """After pytest-benchmark's makereport: an untimed item's fixture counts as skipped, so pytest-benchmark
    does not warn that it was "not used at all"; the item keeps its own outcome."""
    if item.stash.get(UNTIMED_KEY, False):
        fixture = getattr(item, "funcargs", {}).get("benchmark")
        if fixture is not None:
            fixture.skipped = True


def user_chose_timer(config: pytest.Config) -> bool:
    """Whether ``--benchmark-timer`` names a timer other than pytest-benchmark's default."""
    from pytest_benchmark.timers import default_timer
    from pytest_benchmark.utils import NameWrapper

    return config.getoption("benchmark_timer", None) not in (None, str(NameWrapper(default_timer)))


def user_chose_min_time(config: pytest.Config) -> bool:
    """Whether ``--benchmark-min-time`` differs from pytest-benchmark's default (5 us)."""
    return float(config.getoption("benchmark_min_time", PYTEST_BENCHMARK_MIN_TIME)) != PYTEST_BENCHMARK_MIN_TIME


def mark_timing(item: pytest.Item, device_type: str, cpu_time: bool = False) -> None:
    """Set the item's timing through pytest-benchmark's marker, keeping its other settings, so that its fixture
    (and the JSON's ``options``) hold what the item is timed with.

    On CUDA: the synchronizing timer and rounds of at least 5 ms. Rounds of many calls (as
    ``torch.utils.benchmark.Timer`` times blocks) amortize the synchronization at their ends and let the CPU queue
    launches ahead of the GPU. On the CPU with ``cpu_time`` (the session times with one thread): the process's CPU
    time, which leaves out the time the timed thread waited for a CPU on a shared machine. A timer or minimum round
    time the user chose (on the marker, or with ``--benchmark-timer`` / ``--benchmark-min-time``) is left alone.

    A compiled model that passes is timed in pairs with eager for its whole max time (the marker's, else
    ``--benchmark-max-time``): its compiled blocks are its pytest-benchmark rounds.
    """
    marker = item.get_closest_marker(BENCHMARK_MARKER)
    chosen = dict(marker.kwargs) if marker else {}
    added: dict[str, Any] = {}
    if "timer" not in chosen and not user_chose_timer(item.config):
        if device_type == "cuda":
            added["timer"] = cuda_synchronized_perf_counter
        elif cpu_time:
            added["timer"] = time.process_time
    if device_type == "cuda" and "min_time" not in chosen and not user_chose_min_time(item.config):
        added["min_time"] = CUDA_MIN_ROUND_SECONDS
    if added:
        item.add_marker(getattr(pytest.mark, BENCHMARK_MARKER)(**chosen, **added), append=False)


def timing_switched_off_by(config: pytest.Config) -> str | None:
    """The option with which the user turned pytest-benchmark's timing off (``--benchmark-skip`` without
    ``--benchmark-only``, or ``--benchmark-disable`` without ``--benchmark-enable``, as pytest-benchmark reads them),
    or None; its own switch-off under pytest-xdist does not count (a worker owning a GPU times its CUDA items
    regardless)."""
    if config.getoption("benchmark_skip", False) and not config.getoption("benchmark_only", False):
        return "--benchmark-skip"
    if config.getoption("benchmark_disable", False) and not config.getoption("benchmark_enable", False):
        return "--benchmark-disable"
    return None


def timing_plan(
    benchmark: Any, policy: TimingPolicy, time_anyway: bool = False, processes: int = 1, loads: int = 1
) -> TimingPlan:
    """The item's timing as its ``benchmark`` fixture was built (its session's options, then the item's marker)
    under the session's timing ``policy``, its paired timing spread over ``processes`` of ``loads`` each; nothing
    timed where benchmarks are off, unless ``time_anyway`` (a pytest-xdist worker that owns its GPU)."""
    if benchmark.disabled and not time_anyway:
        return TimingPlan(None, policy.precision)
    rounds = RoundsPlan(
        timer=benchmark._timer,
        min_time=benchmark._min_time,
        max_time=benchmark._max_time,
        min_rounds=benchmark._min_rounds,
        calibration_precision=benchmark._calibration_precision,
        disable_gc=benchmark._disable_gc,
    )
    return TimingPlan(rounds, policy.precision, policy.min_seconds, processes, policy.follow_cpu, loads)


def feed(benchmark: Any, timing: Timing | None, where: str) -> None:
    """Give the item's fixture the rounds timed ``where`` (in this process, in the sample worker), as if it had
    timed them itself: its JSON, comparison and histogram options then apply unchanged. Without rounds (nothing
    timed, or benchmarks off) the fixture counts as used."""
    if timing is not None and timing.rounds is not None and not benchmark.disabled:
        metadata = benchmark._make_stats(timing.rounds.iterations)
        for seconds in timing.rounds.per_call:
            metadata.stats.update(seconds)
        benchmark._mode = f"benchmark(...) {where}"
    else:
        benchmark._mode = f"called once {where}"


def name_benchmark(benchmark: Any, group: str, callspec: Any = None) -> None:
    """The benchmark's group (unless the test chose one), and its parameters as the JSON shows them: the matrix's
    by name, not as ``UNSERIALIZABLE[Selection(...)]``."""
    if benchmark.group is None:
        benchmark.group = group
    if callspec is not None:
        readable = {"inductor_selection": lambda selection: selection.label, "inductor_device": str}
        benchmark.params = {k: readable[k](v) if k in readable else v for k, v in callspec.params.items()}


GPU_FIELDS = ("gpu", "gpu_compute_capability")


class BenchmarkJson:
    """Registered only when pytest-benchmark is active (its hookspecs exist only then). The JSON hooks act only
    in a session that used the plugin (a plain benchmark run's JSON stays as pytest-benchmark writes it, and
    torch is not imported for it); the compare guard, whenever the saved run is one of the plugin's."""

    def __init__(
        self,
        book: RecordBook,
        used: Callable[[], bool],
        left_out: Callable[[], list[tuple[str, str]]],
        machine_info: Callable[[], dict[str, Any]],
    ) -> None:
        self.book = book
        self.used = used  # whether this session used the plugin (an option, a fixture, a sample item)
        self.left_out = left_out  # the templates --inductor-template=all left out, with why
        self.machine_info = machine_info  # GPU, torch, Triton, timing threads, ... (the results file's too)

    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        if self.used():
            machine_info.update(self.machine_info())

    def pytest_benchmark_update_json(
        self, config: pytest.Config, benchmarks: list[Any], output_json: dict[str, Any]
    ) -> None:
        """Each timed entry's ``extra_info`` gets its item's record; ``inductor_templates`` gets every item's
        record (pytest-benchmark stores only what it timed: a compile failure must still show)."""
        if not self.used():
            return
        write_records(output_json, self.book.records, self.left_out())
        if self.book.interrupted:
            output_json["inductor_templates"]["partial"] = self.book.interrupted

    def pytest_benchmark_compare_machine_info(
        self, config: pytest.Config, benchmarksession: Any, machine_info: dict[str, Any], compared_benchmark: Any
    ) -> None:
        saved = compared_benchmark.get("machine_info", {})
        if not all(field in saved for field in GPU_FIELDS):  # (a saved run of the plugin's, used or not here)
            return  # not saved by this plugin: pytest-benchmark's own warning covers it
        here = self.machine_info()
        if any(saved.get(field) != here.get(field) for field in GPU_FIELDS):
            raise pytest.UsageError(
                f"--benchmark-compare: the saved run was timed on {_describe(saved)}, this one runs on "
                f"{_describe(here)}; compare runs of the same GPU (keep them apart with --benchmark-storage), "
                "or compare speedups with `pytest-inductor-templates compare`"
            )


def _describe(info: dict[str, Any]) -> str:
    if not info.get("gpu"):
        return "no GPU"
    return f"{info['gpu']} (sm {info.get('gpu_compute_capability')})"


def quiet_xdist_warning(config: pytest.Config, items: list[pytest.Item], timed: Callable[[pytest.Item], bool]) -> None:
    """pytest-benchmark warns at the end of a pytest-xdist run that benchmarks were disabled, once any item uses its
    fixture. Where every such item is one the plugin times itself (``timed``: a sample item of the device type the
    worker times), that misleads: the warning is dropped. Any other benchmark item keeps it (that one is untimed)."""
    session = getattr(config, "_benchmarksession", None)
    if session is None or not getattr(session, "xdist_benchmark_found", False):
        return
    if all(timed(item) for item in items if "benchmark" in getattr(item, "fixturenames", ())):
        session.xdist_benchmark_found = False
