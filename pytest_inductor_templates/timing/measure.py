"""Timing one model: warm-up, pytest-benchmark's rounds, device time, then paired rounds with eager.

Plain data in (two callables and a ``TimingPlan``), plain data out (``Timing``): no pytest, so the pytest process
and the sample worker time alike.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import host_lock
from .paired import DEFAULT_PRECISION, PairedPlan, PairedTiming, time_paired
from .rounds import Rounds, RoundsPlan, time_rounds
from .timers import CUDA_MIN_ROUND_SECONDS, block_timer, device_time_ms, warm_up

PAIRED_MIN_ROUNDS = 10  # fewer rounds make a bootstrap interval of the median meaningless
CPU_BLOCK_SECONDS = 0.001  # a paired block on the CPU lasts this long at least: well above the timer's resolution


@dataclass(frozen=True)
class TimingPlan:
    """How one model is timed: pytest-benchmark's rounds (``rounds``; None: benchmarks are off, the model is
    called once), and the paired rounds' target half-width. Paired rounds get the rounds' time budget again."""

    rounds: RoundsPlan | None
    precision: float = DEFAULT_PRECISION
    min_seconds: float = 0.0  # paired rounds span at least this long (--inductor-timing-min-seconds)

    def paired(self, cuda: bool) -> PairedPlan:
        """The paired rounds' plan: blocks at least as long as a round (5 ms on CUDA, 1 ms on the CPU)."""
        assert self.rounds is not None
        floor = CUDA_MIN_ROUND_SECONDS if cuda else CPU_BLOCK_SECONDS
        return PairedPlan(
            block_seconds=max(self.rounds.min_time, floor),
            min_rounds=max(self.rounds.min_rounds, PAIRED_MIN_ROUNDS),
            max_seconds=self.rounds.max_time,
            target=self.precision,
            min_seconds=self.min_seconds,
        )


@dataclass
class Timing:
    """What timing one model measured (``rounds`` None: it was called once, untimed)."""

    rounds: Rounds | None = None
    timer: str | None = None  # the timer's dotted name
    threads: int | None = None  # torch's intra-op threads
    warmup_calls: int | None = None
    device_time_ms: float | None = None
    paired: PairedTiming | None = None
    eager_device_time_ms: float | None = None

    @property
    def median(self) -> float | None:
        """Seconds per call, the median of the rounds (pytest-benchmark's median)."""
        return statistics.median(self.rounds.per_call) if self.rounds is not None else None


def timer_name(timer: Callable[[], float]) -> str:
    return f"{getattr(timer, '__module__', '?')}.{getattr(timer, '__qualname__', '?')}"


def measure(run: Callable[[], Any], eager_run: Callable[[], Any] | None, cuda: bool, plan: TimingPlan) -> Timing:
    """Time ``run`` after an untimed warm-up; with ``eager_run``, then time the two in pairs. On CUDA, device time
    from CUDA events goes beside the (synchronizing) timer's wall time. No other process of the session times on the
    device meanwhile, nor builds, compiles, checks or releases anything (``host_lock``)."""
    if plan.rounds is None:
        run()
        return Timing()
    with host_lock.timing("cuda" if cuda else "cpu"):
        return _measure(run, eager_run, cuda, plan.rounds, plan)


def _measure(
    run: Callable[[], Any], eager_run: Callable[[], Any] | None, cuda: bool, rounds: RoundsPlan, plan: TimingPlan
) -> Timing:
    import torch

    synchronize = torch.cuda.synchronize if cuda else None
    timing = Timing(timer=timer_name(rounds.timer), threads=torch.get_num_threads())
    timing.warmup_calls = warm_up(run, synchronize)
    timing.rounds = time_rounds(run, rounds)
    if cuda:
        timing.device_time_ms = device_time_ms(run)
    if eager_run is None:
        return timing
    warm_up(eager_run, synchronize)
    timing.paired = time_paired(eager_run, run, block_timer(rounds.timer, cuda), plan.paired(cuda))
    if cuda:
        timing.eager_device_time_ms = device_time_ms(eager_run)
    return timing
