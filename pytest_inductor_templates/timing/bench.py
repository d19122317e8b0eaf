"""Timing one model through pytest-benchmark (warm-up, the timed rounds, device time), then paired with eager."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..outcomes import Outcome
from ..record import ItemRecord
from . import host_lock
from .paired import DEFAULT_PRECISION, PairedPlan, time_paired
from .timers import CUDA_MIN_ROUND_SECONDS, block_timer, cuda_synchronized_perf_counter, device_time_ms, warm_up

BENCHMARK_MARKER = "benchmark"  # pytest-benchmark's own marker
UNTIMED_KEY = pytest.StashKey[bool]()
PYTEST_BENCHMARK_MIN_TIME = 0.000005  # --benchmark-min-time's default
PAIRED_MIN_ROUNDS = 10  # fewer rounds make a bootstrap interval of the median meaningless
CPU_BLOCK_SECONDS = 0.001  # a paired block on the CPU lasts this long at least: well above the timer's resolution


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


def mark_timing(item: pytest.Item, device_type: str, paired: bool) -> None:
    """Set the item's timing through pytest-benchmark's marker, keeping its other settings.

    On CUDA: the synchronizing timer and rounds of at least 5 ms. Rounds of many calls (as
    ``torch.utils.benchmark.Timer`` times blocks) amortize the synchronization at their ends and let the CPU queue
    launches ahead of the GPU. A timer or minimum round time the user chose (on the marker, or with
    ``--benchmark-timer`` / ``--benchmark-min-time``) is left alone.

    ``paired`` (a compiled model, timed in pairs with eager once it passes): the item's max time (the marker's, else
    ``--benchmark-max-time``) is its whole budget, half for pytest-benchmark's rounds and half for the paired rounds.
    """
    marker = item.get_closest_marker(BENCHMARK_MARKER)
    chosen = dict(marker.kwargs) if marker else {}
    added: dict[str, Any] = {}
    if device_type == "cuda" and "timer" not in chosen and not user_chose_timer(item.config):
        added["timer"] = cuda_synchronized_perf_counter
    if device_type == "cuda" and "min_time" not in chosen and not user_chose_min_time(item.config):
        added["min_time"] = CUDA_MIN_ROUND_SECONDS
    if paired:
        chosen["max_time"] = float(chosen.get("max_time", item.config.getoption("benchmark_max_time", 1.0))) / 2
    if added or paired:
        item.add_marker(getattr(pytest.mark, BENCHMARK_MARKER)(**chosen, **added), append=False)


def _setting(item: pytest.Item, name: str) -> Any:
    """A pytest-benchmark setting as the item's ``benchmark`` fixture sees it: its marker, else the option."""
    marker = item.get_closest_marker(BENCHMARK_MARKER)
    if marker is not None and name in marker.kwargs:
        return marker.kwargs[name]
    value = item.config.getoption(f"benchmark_{name}")
    if name == "timer":
        from pytest_benchmark.utils import load_timer

        return load_timer(value).target
    return value


def timer_name(timer: Callable[[], float]) -> str:
    return f"{getattr(timer, '__module__', '?')}.{getattr(timer, '__qualname__', '?')}"


def time_into(
    record: ItemRecord,
    benchmark: Any,
    item: pytest.Item,
    run: Callable[[], Any],
    device_type: str,
    eager_run: Callable[[], Any] | None = None,
    precision: float = DEFAULT_PRECISION,
) -> None:
    """Time ``run`` through pytest-benchmark after an untimed warm-up, and write the figures into ``record``.

    On CUDA, device time from CUDA events goes beside pytest-benchmark's (synchronized) wall time. When
    ``eager_run`` is given and the item passed its check, eager and ``run`` are then timed in pairs (see
    ``paired``) with the same timer, until the interval is within ``precision`` or the item's max time (half of
    its budget: ``mark_timing``) is spent: the speedup, its interval and eager's time per call. With benchmarks
    disabled (``--benchmark-disable``, pytest-xdist), ``run`` is called once and nothing is timed.
    """
    if benchmark.disabled:
        benchmark(run)
        return
    with host_lock.timing():  # in a sample worker under pytest-xdist: no other worker compiles meanwhile
        _time_into(record, benchmark, item, run, device_type, eager_run, precision)


def _time_into(
    record: ItemRecord,
    benchmark: Any,
    item: pytest.Item,
    run: Callable[[], Any],
    device_type: str,
    eager_run: Callable[[], Any] | None,
    precision: float,
) -> None:
    import torch

    cuda = device_type == "cuda"
    synchronize = torch.cuda.synchronize if cuda else None
    record.threads = torch.get_num_threads()
    record.warmup_calls = warm_up(run, synchronize)
    benchmark(run)
    record.median = benchmark.stats.stats.median
    timer = _setting(item, "timer")
    record.timer = timer_name(timer)
    if synchronize is not None:
        record.device_time_ms = device_time_ms(run)
    if eager_run is None or record.outcome is not Outcome.PASS:
        return
    warm_up(eager_run, synchronize)
    plan = PairedPlan(
        block_seconds=max(float(_setting(item, "min_time")), CUDA_MIN_ROUND_SECONDS if cuda else CPU_BLOCK_SECONDS),
        min_rounds=max(int(_setting(item, "min_rounds")), PAIRED_MIN_ROUNDS),
        max_seconds=float(_setting(item, "max_time")),
        target=precision,
    )
    paired = time_paired(eager_run, run, block_timer(timer, cuda), plan)
    record.eager_median, record.compiled_median = paired.eager_median, paired.compiled_median
    record.paired_rounds = paired.rounds
    record.speedup, record.speedup_low, record.speedup_high = (
        paired.speedup.median,
        paired.speedup.low,
        paired.speedup.high,
    )
    record.unstable, record.device_speedup = paired.unstable, paired.device_speedup
    if synchronize is not None:
        record.eager_device_time_ms = device_time_ms(eager_run)
