"""Timing one model through pytest-benchmark: warm-up, the timed rounds, device time, the eager baseline."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..record import ItemRecord
from .timers import CUDA_MIN_ROUND_SECONDS, cuda_synchronized_perf_counter, device_time_ms, median_per_call, warm_up

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


def use_synchronizing_timer(item: pytest.Item, device_type: str) -> None:
    """On CUDA, give the item the synchronizing timer and rounds of at least 5 ms through pytest-benchmark's
    marker, keeping its other settings.

    Rounds of many calls (as ``torch.utils.benchmark.Timer`` times blocks) amortize the synchronization at
    their ends and let the CPU queue launches ahead of the GPU. A timer or minimum round time the user
    chose (on the marker, or with ``--benchmark-timer`` / ``--benchmark-min-time``) is left alone.
    """
    if device_type != "cuda":
        return
    marker = item.get_closest_marker(BENCHMARK_MARKER)
    chosen = dict(marker.kwargs) if marker else {}
    added: dict[str, Any] = {}
    if "timer" not in chosen and not user_chose_timer(item.config):
        added["timer"] = cuda_synchronized_perf_counter
    if "min_time" not in chosen and not user_chose_min_time(item.config):
        added["min_time"] = CUDA_MIN_ROUND_SECONDS
    if added:
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
) -> None:
    """Time ``run`` through pytest-benchmark after an untimed warm-up, and write the figures into ``record``.

    On CUDA, device time from CUDA events goes beside pytest-benchmark's (synchronized) wall time.
    ``eager_run``, when given, is warmed up and timed the same way in the same test: its median is the
    baseline of the speedup. With benchmarks disabled (``--benchmark-disable``, pytest-xdist), ``run``
    is called once and nothing is timed.
    """
    if benchmark.disabled:
        benchmark(run)
        return
    import torch

    synchronize = torch.cuda.synchronize if device_type == "cuda" else None
    record.warmup_calls = warm_up(run, synchronize)
    benchmark(run)
    record.median = benchmark.stats.stats.median
    timer = _setting(item, "timer")
    record.timer = timer_name(timer)
    if synchronize is not None:
        record.device_time_ms = device_time_ms(run)
    if eager_run is not None:
        warm_up(eager_run, synchronize)
        record.eager_median, record.eager_rounds = median_per_call(
            eager_run,
            timer,
            float(_setting(item, "min_time")),
            float(_setting(item, "max_time")),
            int(_setting(item, "min_rounds")),
        )
        if synchronize is not None:
            record.eager_device_time_ms = device_time_ms(eager_run)
