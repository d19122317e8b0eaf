"""Timing one model: warm-up, then either pytest-benchmark's rounds (a model timed alone: the eager row, a compiled
model that failed its check) or paired rounds with eager (a compiled model that passed), whose compiled blocks are
also the item's pytest-benchmark rounds: one measurement behind the speedup and the JSON.

Plain data in (two callables and a ``TimingPlan``), plain data out (``Timing``): no pytest, so the pytest process
and the sample worker time alike.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from ..cpu_speed import loop_ms
from ..student import Z_975, band_floor, band_units, t_975
from . import host_lock, probe_reference
from .fast_cpu import following
from .paired import (
    ALL_ROUNDS,
    DEFAULT_PRECISION,
    FULL_SPEED_ROUNDS,
    PROBE_LOOP,
    SLOW_CPU_ROUNDS,
    Interval,
    PairedPlan,
    PairedTiming,
    time_paired,
)
from .processes import Repeat, at_full_speed, judged_together, spread_band, widened
from .rounds import Rounds, RoundsPlan, time_rounds
from .timers import CUDA_MIN_ROUND_SECONDS, LAUNCH_BOUND_SHARE, block_timer, device_time_ms, host_share, warm_up

PAIRED_MIN_ROUNDS = 10  # fewer rounds make a bootstrap interval of the median meaningless
CPU_BLOCK_SECONDS = 0.001  # a paired block on the CPU lasts this long at least: well above the timer's resolution
CUDA_MIN_SECONDS = 2.0  # paired rounds on CUDA span at least this long by default: several of the CPU's speed states
CUDA_MAX_SECONDS = 4.0  # ... and at most this long (or the item's max time, if longer) while the band is wider
CPU_MAX_SECONDS = 2.0  # on the CPU, up to this long (or the max time, if longer) while the band is wider
LAUNCH_BOUND_PRECISION = 0.04  # the default target where the host's CPU speed is in the figure (launch-bound)


@dataclass(frozen=True)
class TimingPlan:
    """How one model is timed: pytest-benchmark's rounds (``rounds``; None: benchmarks are off, the model is
    called once), the paired rounds' target half-width (None: the default, 2%, or 4% for a launch-bound item), the
    least span of the paired rounds (None: the device's default, 2 s on CUDA, none on the CPU), and the processes
    the paired timing is spread over and the loads each of them times (``timing.processes``): each timing gets its
    share of the spans; ``follow_cpu``: on CUDA, each paired round first moves to a CPU at full speed
    (``fast_cpu``)."""

    rounds: RoundsPlan | None
    precision: float | None = None
    min_seconds: float | None = None
    processes: int = 1
    follow_cpu: bool = False
    loads: int = 1

    @property
    def timings(self) -> int:
        """The paired timings the item's spans are shared among: every load of every process."""
        return self.processes * self.loads

    @property
    def _band_factor(self) -> float:
        """The normal's 97.5th percentile over Student's t of the band over the timings: t over the processes'
        means where several processes time, else over one process's loads, less those a trimmed mean leaves out (1
        with one timing)."""
        kept = band_units(self.processes, self.loads)
        return Z_975 / t_975(kept) if kept > 1 else 1.0

    def target(self, launch_bound: bool = False) -> float:
        """The half-width the item's speedup aims for, over all its processes."""
        if self.precision is not None:
            return self.precision
        return LAUNCH_BOUND_PRECISION if launch_bound else DEFAULT_PRECISION

    def paired(self, cuda: bool, launch_bound: bool = False, reference_probe: float | None = None) -> PairedPlan:
        """One process's paired rounds: blocks at least as long as a round (5 ms on CUDA, 1 ms on the CPU), for the
        item's whole max time; on CUDA at least 2 s and, while the band is wider than its target, up to 4 s (up to
        2 s on the CPU); with ``min_seconds`` set, from that span to the max time. Over several timings (loads,
        processes) each gets its share of those spans and stops at the target times the root of their number,
        times the normal's 1.96 over the Student's t the band will take (of the processes' means, or of one
        process's loads): were they to share no offset, the band over them would then be within the target.
        ``reference_probe``: the host's mark of full speed so far."""
        assert self.rounds is not None
        floor = CUDA_MIN_ROUND_SECONDS if cuda else CPU_BLOCK_SECONDS
        min_seconds = self.min_seconds if self.min_seconds is not None else (CUDA_MIN_SECONDS if cuda else 0.0)
        longest = (CUDA_MAX_SECONDS if cuda else CPU_MAX_SECONDS) if self.min_seconds is None else 0.0
        max_seconds = max(self.rounds.max_time, longest)
        return PairedPlan(
            block_seconds=max(self.rounds.min_time, floor),
            min_rounds=max(self.rounds.min_rounds, PAIRED_MIN_ROUNDS),
            max_seconds=max_seconds / self.timings,
            target=self.target(launch_bound) * math.sqrt(self.timings) * self._band_factor,
            min_seconds=min_seconds / self.timings,
            reference_probe=reference_probe,
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
    host_shares: tuple[float, float] | None = None  # CUDA: eager's and compiled's share of a call spent launching it
    seconds: float | None = None  # wall time the timing held its device (warm-up included)
    repeats: tuple[Repeat, ...] = ()  # the same compiled code's paired timings: later loads, other processes
    target: float | None = None  # the half-width the speedup aims for over all its processes (paired only)

    @property
    def processes(self) -> list[PairedTiming]:
        """This timing and its repeats' (loads, processes), judged against the fastest mark of full speed of any of
        them (empty unpaired)."""
        if self.paired is None:
            return []
        return judged_together([self.paired, *(repeat.paired for repeat in self.repeats)])

    @property
    def in_band(self) -> list[bool]:
        """Which of ``processes`` the band is over (``at_full_speed``): on CUDA, over several processes, those whose
        CPU ran at full speed, where they are more than half; else all."""
        processes = self.processes
        marks = [timing.mark for timing in processes if timing.mark is not None]
        probes = [statistics.median(timing.probes) if timing.probes else None for timing in processes]
        return at_full_speed(probes, min(marks, default=None), self.process_of, self.launch_bound)

    @property
    def spread(self) -> Interval | None:
        """The speedup and its 95% band from the spread of the timings in the band alone (one: that timing's
        interval); None unpaired."""
        processes = self.processes
        return spread_band([t.speedup for t in processes], self.process_of, self.in_band) if processes else None

    @property
    def speedup(self) -> Interval | None:
        """``spread``, on CUDA at least ``band_floor`` wide each side; None unpaired."""
        spread = self.spread
        return widened(spread, band_floor(self.launch_bound)) if spread is not None else None

    @property
    def process_of(self) -> list[int]:
        """The process each of ``processes`` ran in, numbered from 0 (this one): each process's loads follow its
        first (load 0)."""
        numbers = [0]
        for repeat in self.repeats:
            numbers.append(numbers[-1] + (repeat.load == 0))
        return numbers

    @property
    def slow_cpu_processes(self) -> int:
        """How many of the processes met too few full-speed rounds (each counted with all its rounds)."""
        return sum(timing.speedup_of == SLOW_CPU_ROUNDS for timing in self.processes)

    @property
    def speedup_of(self) -> str | None:
        """Which rounds the speedup is over: ``full-speed rounds`` where a process kept only those, ``all rounds``
        where every process counted every round, else ``slow-CPU rounds``; None unpaired."""
        kinds = {timing.speedup_of for timing in self.processes}
        if not kinds:
            return None
        return next(kind for kind in (FULL_SPEED_ROUNDS, ALL_ROUNDS, SLOW_CPU_ROUNDS) if kind in kinds)

    @property
    def unstable(self) -> bool | None:
        """Whether the speedup's band from the spread (``spread``: the floor is no measurement) is wider than its
        target; None unpaired."""
        spread = self.spread
        return None if spread is None or self.target is None else spread.half_width > self.target

    @property
    def median(self) -> float | None:
        """Seconds per call, the median of the rounds (pytest-benchmark's median)."""
        return statistics.median(self.rounds.per_call) if self.rounds is not None else None

    @property
    def launch_bound(self) -> bool | None:
        """Whether the host's CPU speed is in the figure: on CUDA, eager or compiled spent at least half of a call
        launching it (the GPU then waits on the host); None off CUDA or unpaired."""
        return max(self.host_shares) >= LAUNCH_BOUND_SHARE if self.host_shares is not None else None


def timer_name(timer: Callable[[], float]) -> str:
    return f"{getattr(timer, '__module__', '?')}.{getattr(timer, '__qualname__', '?')}"


def measure(run: Callable[[], Any], eager_run: Callable[[], Any] | None, cuda: bool, plan: TimingPlan) -> Timing:
    """Time ``run`` after an untimed warm-up: alone in pytest-benchmark's rounds, or with ``eager_run`` in pairs
    (the compiled blocks are then ``run``'s rounds). On CUDA, device time from CUDA events goes beside the
    (synchronizing) timer's wall time. No other process of the session times on the device meanwhile, nor builds,
    compiles, checks or releases anything (``host_lock``)."""
    if plan.rounds is None:
        run()
        return Timing()
    with host_lock.timing("cuda" if cuda else "cpu"):
        start = time.perf_counter()
        timing = _measure(run, eager_run, cuda, plan.rounds, plan)
        timing.seconds = round(time.perf_counter() - start, 3)
        return timing


def _measure(
    run: Callable[[], Any], eager_run: Callable[[], Any] | None, cuda: bool, rounds: RoundsPlan, plan: TimingPlan
) -> Timing:
    import torch

    synchronize = torch.cuda.synchronize if cuda else None
    timing = Timing(timer=timer_name(rounds.timer), threads=torch.get_num_threads())
    timing.warmup_calls = warm_up(run, synchronize)
    if eager_run is None:
        timing.rounds = time_rounds(run, rounds)
        if cuda:
            timing.device_time_ms = device_time_ms(run)
        return timing
    warm_up(eager_run, synchronize)
    if cuda:
        timing.host_shares = (host_share(eager_run), host_share(run))
    launch_bound = bool(timing.launch_bound)
    paired_plan = plan.paired(cuda, launch_bound, probe_reference.fastest())
    with following(functools.partial(loop_ms, PROBE_LOOP)) if cuda and plan.follow_cpu else nullcontext() as follow:
        paired = time_paired(eager_run, run, block_timer(rounds.timer, cuda), paired_plan, follow=follow)
    probe_reference.offer(paired.mark)
    timing.paired, timing.target = paired, plan.target(launch_bound)
    timing.rounds = Rounds(paired.iterations[1], list(paired.compiled))
    if paired.eager_device and paired.compiled_device:
        timing.eager_device_time_ms = 1e3 * statistics.median(paired.eager_device)
        timing.device_time_ms = 1e3 * statistics.median(paired.compiled_device)
    return timing
