"""A speedup over several timings (loads and processes): the band from the spread between them.

A timing carries an offset that more rounds inside it do not shrink: a load's (which CPU state it met, where its
memory landed) and, shared by every load of it, a process's (on an H100 two processes' means differed by a median
1.3%, as much as a repeat of the run moved, while each one's loads agreed within a few tenths). A compiled item's
paired timing is therefore repeated: in the same process, compiled again from the compile cache (a Dynamo reset and
a fresh copy of the model: a load), and in other worker processes (the same code and autotune choices): on CUDA in
eight. Its speedup is the geometric mean of the processes' geometric means, with a 95% band of Student's t over
those means (in one process, over its loads); from six on, their 20%-trimmed mean with Yuen's band, so that one
process far from the others sets neither. By default on CUDA each process times its first load only: on an H100 a
later load's speedup differed from the same process's first, and from a fresh process's, by 20-50% on 3 of 18
samples in two runs, in every process, so by default loads fill in only where fewer than four processes time the
item. Each timing's median carries its own rounds' noise, so that spread already holds it; the timings' own
intervals, combined, set no floor under it (from about ten rounds each they overstate their medians' noise).

The processes' rounds are judged against the fastest mark of full speed any of them left. A timing whose CPU ran
slow throughout (its median CPU-speed probe over ``SLOW_TIMING`` times that mark) is left out of the band where the
timings at full speed are more than half: on an H100 a timing's median probe fell at 1.0-1.45 times the mark or at
1.6-2.7 times (288 timings, one between), and a launch-bound compiled call slowed with the CPU while a GPU-bound
eager one did not (``PoolFormer_s12`` 1.43x and 1.47x in its two slow processes, 2.13-2.35x in six at full speed;
counted, its repeat moved 12.5%; left out, 3.3%). With fewer at full speed every timing counts (leaving them out then
left bands over one or two processes on the H200, and repeats moved more). On CUDA a band is never narrower than
``BAND_FLOOR`` (``LAUNCH_BOUND_BAND_FLOOR`` where the host's CPU speed is in the figure): a band over five to eight
processes knows its spread only roughly, and on an H100 some came out at ±0.1-0.6% where a repeat of the run moved
the speedup by 1.4-2.3%.

Pure functions: no torch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..option_table import CPU_LOADS, CPU_PROCESSES, CUDA_PROCESSES, CUDA_TIMINGS
from ..student import t_975, trimmed
from .paired import Interval, PairedTiming

SLOW_TIMING = 1.5  # a timing whose median CPU-speed probe is this many times the mark ran on a slow CPU throughout


@dataclass(frozen=True)
class Repeat:
    """A compiled item's paired timing repeated: in process ``pid``, its ``load``-th compile there (0: the model
    the process compiled first; 1 and on: compiled again from the cache)."""

    paired: PairedTiming
    pid: int
    load: int = 0


def processes_for(chosen: tuple[int, int] | None, device_type: str) -> int:
    """Processes a compiled item's paired timing runs in first: ``chosen``'s first (``--inductor-timing-processes``),
    else the default of the device type (8 on CUDA, 1 on the CPU)."""
    return _per_device(chosen[0] if chosen else None, device_type, CUDA_PROCESSES, CPU_PROCESSES)


def most_processes_for(chosen: tuple[int, int] | None, device_type: str) -> int:
    """Processes a compiled item's paired timing may run in, more after the first while its band is wider than its
    target: ``chosen``'s most (``--inductor-timing-processes``), else the first's default (8 on CUDA, 1 on the
    CPU)."""
    return _per_device(chosen[1] if chosen else None, device_type, CUDA_PROCESSES, CPU_PROCESSES)


def loads_for(chosen: int | None, device_type: str, processes: int | None = None) -> int:
    """Loads each of ``processes`` (the processes timing the item; None: the device type's default) times a compiled
    item in: ``chosen`` (``--inductor-timing-loads``), else on CUDA at least four timings shared among the
    processes (1 in each of 4 or more, 2 in each of 3 or 2; 4 in one, as with ``--inductor-isolation=none``), on
    the CPU 1."""
    count = processes if processes is not None else processes_for(None, device_type)
    return _per_device(chosen, device_type, -(-CUDA_TIMINGS // count), CPU_LOADS)


def _per_device(chosen: int | None, device_type: str, cuda: int, cpu: int) -> int:
    if chosen is not None:
        return chosen
    return cuda if device_type == "cuda" else cpu


def judged_together(timings: Sequence[PairedTiming]) -> list[PairedTiming]:
    """The processes' paired timings, each round's full speed judged against the fastest mark of any of them."""
    reference = min((t.mark for t in timings if t.mark is not None), default=None)
    return [timing.judged_against(reference) for timing in timings]


def at_full_speed(
    probes: Sequence[float | None], mark: float | None, processes: Sequence[int], launch_bound: bool | None
) -> list[bool]:
    """Which timings the band is over, from each one's median CPU-speed probe (ms; None: not probed), the fastest
    mark of full speed any of them left and the process each ran in: on CUDA (``launch_bound`` known) and over
    several processes, those within ``SLOW_TIMING`` times the mark, where they are more than half; else all of them
    (one process's loads all count: leaving its slow ones out narrowed its band but held fewer repeats; and all
    where a timing was not probed)."""
    every = [True] * len(probes)
    if launch_bound is None or len(set(processes)) < 2 or mark is None or any(p is None for p in probes):
        return every
    fast = [probe <= SLOW_TIMING * mark for probe in probes]  # type: ignore[operator]
    return fast if 2 * sum(fast) > len(probes) else every


def spread_band(intervals: Sequence[Interval], processes: Sequence[int], counted: Sequence[bool]) -> Interval:
    """The speedup over the timings that gave ``intervals`` (``processes``: the process each ran in) that are
    ``counted`` (``at_full_speed``), by ``across_processes``: the spread alone, before ``band_floor``."""
    kept = [(interval, process) for interval, process, c in zip(intervals, processes, counted, strict=True) if c]
    return across_processes([interval for interval, _ in kept], [process for _, process in kept])


def widened(band: Interval, floor: float) -> Interval:
    """``band``, each side widened on the log scale to at least ``floor``."""
    if band.median <= 0 or band.low <= 0:
        return band
    low, high = band.median * math.exp(-floor), band.median * math.exp(floor)
    return Interval(band.median, min(band.low, low), max(band.high, high))


def across_processes(intervals: Sequence[Interval], processes: Sequence[int] | None = None) -> Interval:
    """The speedup over the timings that gave ``intervals`` (each a median and its 95% interval), ``processes``
    naming the process each ran in (None: each its own): over the processes' geometric means, their 20%-trimmed
    mean with Yuen's 95% band (Student's t over the winsorized spread; up to five values, the mean and its t band).
    Loads of one process share its offset, which their spread does not show (on an H100 two processes' four loads
    each differed by a median of 1.3%, as much as a repeat of the run moved, while each process's loads agreed
    within it): so over several processes the band comes from the spread between them; in one process, from the
    spread between its loads; with one timing, its own interval."""
    if not intervals:
        raise ValueError("no intervals")
    if len(intervals) == 1:
        return intervals[0]
    by_process: dict[int, list[float]] = {}
    for key, interval in zip(processes if processes is not None else range(len(intervals)), intervals, strict=True):
        by_process.setdefault(key, []).append(math.log(interval.median))
    logs = [statistics.fmean(loads) for loads in by_process.values()]
    if len(logs) == 1:  # one process: its loads
        logs = next(iter(by_process.values()))
    centre, between = trimmed_band(logs)
    return Interval(math.exp(centre), math.exp(centre - between), math.exp(centre + between))


def trimmed_band(values: Sequence[float]) -> tuple[float, float]:
    """The 20%-trimmed mean of ``values`` (two or more; from six on, rounded down) and its 95% half-width by
    Yuen's standard error (as scipy's trimmed t-test): the values left out at each end are, for the spread, set to
    the nearest one kept (winsorized), and Student's t is over those kept. One process far from the others (on an
    H100, one of four a third slower where the others agreed within 2%) then widens the band over eight no more
    than the others' spread does. With nothing left out: the mean and its t band."""
    ordered = sorted(values)
    count, cut = len(ordered), trimmed(len(ordered))
    kept = ordered[cut : count - cut]
    winsorized = [kept[0]] * cut + kept + [kept[-1]] * cut
    centre = statistics.fmean(winsorized)
    squares = sum((value - centre) ** 2 for value in winsorized)
    error = math.sqrt(squares / (len(kept) * (len(kept) - 1)))
    return statistics.fmean(kept), t_975(len(kept)) * error
