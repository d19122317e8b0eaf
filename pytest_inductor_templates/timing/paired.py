"""Paired timing: eager and compiled timed alternately, round by round, with one clock.

Each round times a block of eager calls and a block of compiled calls back to back (the order alternates
from round to round), so drift in clock, load and temperature lands on both sides of the round's ratio.
Each block starts with one untimed call: the other side's block has just filled the caches with its own
weights and code, and a block timed cold would charge that to whichever side comes second.
The speedup is the median of the per-round ratios, with a 95% confidence interval spanning two: a bootstrap of the
rounds and a batch-means interval over contiguous segments of them (the state of the machine drifts, so rounds
next to each other are alike and resampling single rounds alone claims too much). A short CPU-speed probe before
each round tells the rounds the CPU ran at full speed from those it ran slow (some VMs switch a CPU between two
speeds for seconds at a time): where at least 10 rounds ran at full speed and some did not, the speedup is theirs (a
launch-bound side moves with the CPU's speed, so the share of slow rounds, which differs from process to process,
would move an all-rounds median), and the all-rounds figure stays beside it. Full speed is judged against the mark
the host's earlier timings left (``PairedPlan.reference_probe``) as well as the timing's own fastest probe: a timing
whose rounds ran mostly slow, too few of them at full speed, says so (``slow-CPU rounds``) and goes on to its
longest span, waiting for the full speed; or, following the full speed (``fast_cpu``), each round first moves to a
CPU that runs at it. Rounds go on until the interval is narrow enough or the time budget is
spent. Python's cyclic garbage collector is held off meanwhile (as ``timeit`` holds it off), so that no collection
of a heap full of compiled graphs lands in one block and not in its pair.

Pure functions of the callables and a block timer: no pytest, no torch (numpy for the bootstrap), so that
any runner (a pytest item, a worker process) can call them unchanged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import math
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..cpu_speed import SLOW, loop_ms
from ..student import t_975
from .fast_cpu import FastCpu

BlockTimer = Callable[[Callable[[], Any], int], tuple[float, float | None]]
"""Times ``iterations`` back-to-back calls of a callable: (wall seconds, device seconds or None)."""

CONFIDENCE = 0.95
RESAMPLES = 1000  # bootstrap resamples
CHECK_GROWTH = 1.5  # the stop rule looks again once the rounds have grown by half (a bootstrap costs O(rounds))
MAX_ROUNDS = 2_000  # the bootstrap costs O(rounds x resamples)
MAX_ITERATIONS = 1_000_000
DEFAULT_PRECISION = 0.02  # the stop rule's default target half-width (--inductor-speedup-precision)
SEGMENTS = 8  # at most this many contiguous segments of the rounds for the batch-means interval
PROBE_LOOP = 3_000  # iterations of the CPU-speed probe timed before each round (about 0.1-0.3 ms)
FULL_SPEED_MIN_ROUNDS = 10  # fewer full-speed rounds than this give no full-speed speedup
FULL_SPEED_ROUNDS, ALL_ROUNDS = "full-speed rounds", "all rounds"  # what a speedup is the median of ...
SLOW_CPU_ROUNDS = "slow-CPU rounds"  # ... every round, most of them slow and too few at full speed


@dataclass(frozen=True)
class PairedPlan:
    """How long to time: blocks of at least ``block_seconds``; at least ``min_rounds`` rounds over at least
    ``min_seconds``; then until the interval's relative half-width is at most ``target`` or ``max_seconds`` (at
    least ``min_seconds``) have passed. ``reference_probe``: the mark of full speed (ms) the host's earlier timings
    left, if any: a round is at full speed within ``SLOW`` of it (or of the timing's own fastest probe)."""

    block_seconds: float
    min_rounds: int
    max_seconds: float
    target: float
    min_seconds: float = 0.0
    reference_probe: float | None = None


@dataclass(frozen=True)
class Interval:
    """A median and its 95% confidence interval."""

    median: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        """Half the interval's width, relative to the median (0.02 reads ``±2%``)."""
        return (self.high - self.low) / 2 / self.median if self.median > 0 else math.inf


@dataclass(frozen=True)
class PairedTiming:
    """The rounds of one paired timing and what follows from them."""

    eager: list[float]  # seconds per call in each round's eager block
    compiled: list[float]  # ... compiled block
    eager_device: list[float] | None  # device seconds per call, when the block timer reports device time
    compiled_device: list[float] | None
    iterations: tuple[int, int]  # calls per block: eager, compiled
    all_rounds: Interval  # the speedup over every round
    target: float
    seconds: float  # wall time spent, calibration included
    probes: list[float] = dataclasses.field(default_factory=list)  # ms of the CPU-speed probe before each round
    reference_probe: float | None = None  # the mark of full speed known besides these probes (ms): the host's, others'
    cpu_moves: int | None = None  # rounds that moved to a CPU at full speed (None: the rounds did not follow it)

    @property
    def rounds(self) -> int:
        return len(self.eager)

    @cached_property
    def _kept(self) -> tuple[str, list[float]]:
        return kept_rounds(self.eager, self.compiled, self.probes, self.reference_probe)

    @cached_property
    def speedup(self) -> Interval:
        """The speedup and its interval: over the full-speed rounds where ``speedup_of`` says so, else every round."""
        kind, kept = self._kept
        return speedup_interval(kept) if kind == FULL_SPEED_ROUNDS else self.all_rounds

    @property
    def speedup_of(self) -> str:
        """Which rounds the speedup is the median of: ``full-speed rounds``, ``all rounds`` or ``slow-CPU rounds``
        (every round: too few ran at full speed)."""
        return self._kept[0]

    @property
    def fastest_probe(self) -> float | None:
        """The fastest CPU-speed probe these rounds and the host's reference saw (ms), None without probes."""
        known = [*self.probes, *([self.reference_probe] if self.reference_probe is not None else [])]
        return min(known, default=None)

    @property
    def mark(self) -> float | None:
        """The mark of full speed these rounds leave for other timings (ms): their probes' lower decile (one lucky
        probe is no speed the CPU holds), or the host's reference where that is faster; None without probes."""
        return mark_of(self.probes, self.reference_probe)

    def judged_against(self, reference: float | None) -> PairedTiming:
        """These rounds with full speed judged against ``reference`` too (another timing's mark)."""
        fastest = self.fastest_probe
        if reference is None or (fastest is not None and fastest <= reference):
            return self
        return dataclasses.replace(self, reference_probe=reference)

    @property
    def unstable(self) -> bool:
        """Whether the interval stayed wider than the target."""
        return self.speedup.half_width > self.target

    @property
    def eager_median(self) -> float:
        return statistics.median(self.eager)

    @property
    def compiled_median(self) -> float:
        return statistics.median(self.compiled)

    @property
    def full_speed(self) -> list[bool]:
        """Per round: whether the CPU-speed probe before it ran within ``SLOW`` of the fastest probe known."""
        return full_speed_flags(self.probes, self.reference_probe)

    @property
    def slow_share(self) -> float | None:
        """The share of rounds whose probe ran slow (None without probes)."""
        return 1 - sum(self.full_speed) / len(self.probes) if self.probes else None

    @property
    def full_speed_speedup(self) -> float | None:
        """The median of the per-round ratios over the full-speed rounds, where at least
        ``FULL_SPEED_MIN_ROUNDS`` of them ran (None otherwise)."""
        if len(self.probes) != len(self.eager):
            return None
        rounds = zip(self.eager, self.compiled, self.full_speed, strict=True)
        kept = [(e, c) for e, c, fast in rounds if fast]
        if len(kept) < FULL_SPEED_MIN_ROUNDS:
            return None
        return statistics.median(ratios([e for e, _ in kept], [c for _, c in kept]))

    @property
    def device_speedup(self) -> float | None:
        """The median of the per-round ratios of device time, when there is device time."""
        if not self.eager_device or not self.compiled_device:
            return None
        return statistics.median(ratios(self.eager_device, self.compiled_device))


def mark_of(probes: Sequence[float], reference: float | None) -> float | None:
    """The mark of full speed: the probes' lower decile (one lucky probe is no speed the CPU holds), or
    ``reference`` where that is faster; None without either."""
    if not probes:
        return reference
    decile = sorted(probes)[len(probes) // 10]
    return min(decile, reference) if reference is not None else decile


def full_speed_flags(probes: Sequence[float], reference: float | None = None) -> list[bool]:
    """Per round: whether its CPU-speed probe ran within ``SLOW`` of the fastest probe (of ``probes`` and
    ``reference``)."""
    fastest = min([*probes, *([reference] if reference is not None else [])], default=0.0)
    return [probe <= SLOW * fastest for probe in probes]


def kept_rounds(
    eager: Sequence[float], compiled: Sequence[float], probes: Sequence[float], reference: float | None = None
) -> tuple[str, list[float]]:
    """Which rounds a speedup is the median of, and their per-round ratios: the rounds whose probe ran within
    ``SLOW`` of the fastest known (``full-speed rounds``) where some ran slow and at least ``FULL_SPEED_MIN_ROUNDS``
    did not; else every round: ``slow-CPU rounds`` where most of them ran slow, ``all rounds`` otherwise (every
    round at full speed, too few rounds, or no probes)."""
    every = ratios(eager, compiled)
    if len(probes) != len(eager) or not probes:
        return ALL_ROUNDS, every
    fast = full_speed_flags(probes, reference)
    if sum(fast) < FULL_SPEED_MIN_ROUNDS:
        return (SLOW_CPU_ROUNDS if 2 * sum(fast) < len(fast) else ALL_ROUNDS), every
    if all(fast):
        return ALL_ROUNDS, every
    kept = [(e, c) for e, c, f in zip(eager, compiled, fast, strict=True) if f]
    return FULL_SPEED_ROUNDS, ratios([e for e, _ in kept], [c for _, c in kept])


def ratios(eager: Sequence[float], compiled: Sequence[float]) -> list[float]:
    """Per-round speedups: eager time / compiled time (rounds with a zero compiled time are left out)."""
    return [e / c for e, c in zip(eager, compiled, strict=True) if c > 0]


def bootstrap_median(values: Sequence[float], resamples: int = RESAMPLES, seed: int = 0) -> Interval:
    """The median of ``values`` and its percentile-bootstrap 95% interval (``resamples`` resamples, seeded:
    the same values give the same interval)."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("no values")
    median = float(np.median(data))
    if data.size == 1:
        return Interval(median, median, median)
    picks = np.random.default_rng(seed).integers(0, data.size, size=(resamples, data.size))
    medians = np.median(data[picks], axis=1)
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(medians, [tail, 1 - tail])
    return Interval(median, float(low), float(high))


def segment_interval(values: Sequence[float]) -> Interval:
    """The median of ``values`` (positive: ratios) and a batch-means 95% interval around it: the values (in the
    order they were timed, every one of them) cut into up to 8 contiguous segments of near-equal length (at least
    2); the interval is the median times and divided by exp(t * sd / sqrt(k)) of the segments' log medians, so it
    stays above 0.

    A drift in the machine's state over the rounds (clock, placement, other load) moves whole segments; resampling
    single rounds does not see it. With fewer than 4 values the interval is the median alone.
    """
    median = statistics.median(values)
    segments = min(SEGMENTS, len(values) // 2)
    bounds = [round(i * len(values) / segments) for i in range(segments + 1)] if segments >= 2 else []
    medians = [statistics.median(values[a:b]) for a, b in itertools.pairwise(bounds)]
    if not medians or min(medians) <= 0:  # too few values, or a ratio of 0 (a coarse timer): the median alone
        return Interval(median, median, median)
    logs = [math.log(m) for m in medians]
    factor = math.exp(t_975(segments) * statistics.stdev(logs) / math.sqrt(segments))
    return Interval(median, median / factor, median * factor)


def speedup_interval(values: Sequence[float]) -> Interval:
    """The median of the per-round ratios and one 95% interval spanning its two (bootstrap, batch means)."""
    boot, segments = bootstrap_median(values), segment_interval(values)
    return Interval(boot.median, min(boot.low, segments.low), max(boot.high, segments.high))


@contextlib.contextmanager
def without_gc() -> Iterator[None]:
    """Python's cyclic garbage collector run once, then held off for the block; on again after, if it was on."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def calibrate(run: Callable[[], Any], time_block: BlockTimer, block_seconds: float) -> int:
    """Calls per block so that a block lasts at least ``block_seconds`` (as pytest-benchmark calibrates)."""
    iterations = 1
    while iterations < MAX_ITERATIONS:
        duration, _ = time_block(run, iterations)
        if duration >= block_seconds:
            break
        estimate = iterations * 10 if duration <= 0 else math.ceil(block_seconds * iterations / duration)
        iterations = min(MAX_ITERATIONS, max(estimate, iterations + 1))
    return iterations


def time_paired(
    eager: Callable[[], Any],
    compiled: Callable[[], Any],
    time_block: BlockTimer,
    plan: PairedPlan,
    clock: Callable[[], float] = time.perf_counter,
    follow: FastCpu | None = None,
) -> PairedTiming:
    """Time ``eager`` and ``compiled`` (both warmed up already) in alternating blocks, round by round, with the
    garbage collector held off (its collection first counts towards ``plan.max_seconds``).

    Stop rule: after ``plan.min_rounds`` rounds and ``plan.min_seconds``, stop once the speedup's interval is
    within ``plan.target`` (looked at each time the rounds have grown by half; never while the rounds are
    ``slow-CPU rounds``) or once ``plan.max_seconds`` have passed. Before each round a short CPU-speed probe is
    timed with ``clock``, to tell full-speed rounds after; with ``follow``, the round first moves to a CPU at full
    speed (``fast_cpu``), and the probe is that CPU's.
    """
    start = clock()
    with without_gc():
        return _time_paired(eager, compiled, time_block, plan, clock, start, follow)


def _time_paired(
    eager: Callable[[], Any],
    compiled: Callable[[], Any],
    time_block: BlockTimer,
    plan: PairedPlan,
    clock: Callable[[], float],
    start: float,
    follow: FastCpu | None,
) -> PairedTiming:
    iterations = (calibrate(eager, time_block, plan.block_seconds), calibrate(compiled, time_block, plan.block_seconds))
    sides: tuple[Callable[[], Any], Callable[[], Any]] = (eager, compiled)
    walls: tuple[list[float], list[float]] = ([], [])
    devices: tuple[list[float], list[float]] = ([], [])
    next_check = plan.min_rounds
    probes: list[float] = []
    max_seconds = max(plan.max_seconds, plan.min_seconds)
    while True:
        if follow is None:
            probes.append(loop_ms(PROBE_LOOP, clock))
        else:
            probes.append(follow.settle(mark_of(probes, plan.reference_probe)))
        order = (0, 1) if len(walls[0]) % 2 == 0 else (1, 0)
        for side in order:
            sides[side]()  # untimed: the block is timed warm (the other side's block left the caches cold)
            wall, device = time_block(sides[side], iterations[side])
            walls[side].append(wall / iterations[side])
            if device is not None:
                devices[side].append(device / iterations[side])
        rounds = len(walls[0])
        if rounds >= MAX_ROUNDS or (rounds >= plan.min_rounds and clock() - start >= max_seconds):
            break
        if rounds >= next_check and clock() - start >= plan.min_seconds:
            kind, kept = kept_rounds(*walls, probes, plan.reference_probe)
            if kind != SLOW_CPU_ROUNDS and speedup_interval(kept).half_width <= plan.target:
                break  # (rounds at the slow CPU speed go on, waiting for the full speed)
            next_check = max(rounds + 1, math.ceil(rounds * CHECK_GROWTH))
    with_device = len(devices[0]) == len(walls[0])
    return PairedTiming(
        eager=walls[0],
        compiled=walls[1],
        eager_device=devices[0] if with_device else None,
        compiled_device=devices[1] if with_device else None,
        iterations=iterations,
        all_rounds=speedup_interval(ratios(*walls)),
        target=plan.target,
        seconds=clock() - start,
        probes=probes,
        reference_probe=plan.reference_probe,
        cpu_moves=follow.moves if follow is not None else None,
    )
