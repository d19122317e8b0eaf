"""The host's CPUs split between timings and the work beside them (``--inductor-compile-beside-timing``).

With compiles let on beside CUDA timings, a timing must not share its CPUs with them: a launch-bound timing is the
Python and driver time of its launches. So the session's CPUs are split once: a few, whole cores (a core's hardware
threads together, as Linux lists them in ``thread_siblings_list``), for the process that times, and the rest for
every process's work (its compile pool included: it inherits them, and Inductor sizes it by them). A timing process
moves all its threads onto the timing CPUs while it times and back after.

Linux only (``os.sched_setaffinity``); elsewhere nothing moves.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TIMING_SHARE = 4  # a quarter of the CPUs (whole cores, at least one; two CPUs a GPU) time; the rest work


def siblings(cpu: int) -> frozenset[int]:
    """The hardware threads of ``cpu``'s core (itself alone where Linux does not say)."""
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        return frozenset(_parsed_cpu_list(path.read_text())) | {cpu}
    except (OSError, ValueError):
        return frozenset({cpu})


def _parsed_cpu_list(text: str) -> list[int]:
    """``0-3,8`` as [0, 1, 2, 3, 8]."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if part:
            first, _, last = part.partition("-")
            cpus += range(int(first), int(last or first) + 1)
    return cpus


@dataclass(frozen=True)
class Split:
    """The CPUs timings move onto, and those every process works on."""

    timing: tuple[int, ...]
    work: tuple[int, ...]


def split(usable: list[int], cores: dict[int, frozenset[int]], gpus: int = 1) -> Split:
    """``usable`` split: whole cores (``cores`` gives each CPU's hardware threads) from the last for timings, until
    they hold a quarter of the CPUs and two for each GPU (timings on different GPUs run at once), at least one core
    and never more than half of the CPUs; no timing CPUs on a single core."""
    groups: list[tuple[int, ...]] = []
    for cpu in sorted(usable):
        group = tuple(sorted(cores.get(cpu, frozenset({cpu})) & set(usable)))
        if group not in groups:
            groups.append(group)
    wanted = min(max(len(usable) // TIMING_SHARE, 2 * gpus), len(usable) // 2)
    timing: list[int] = []
    while len(groups) > 1 and (not timing or len(timing) + len(groups[-1]) <= wanted):
        timing += groups.pop()
    return Split(tuple(sorted(timing)), tuple(sorted(cpu for group in groups for cpu in group)))


def host_split(gpus: int = 1) -> Split:
    """This process's usable CPUs split for ``gpus`` GPUs' timings (``split``); no timing CPUs where affinity
    cannot be set."""
    if not hasattr(os, "sched_getaffinity"):
        return Split((), ())
    usable = sorted(os.sched_getaffinity(0))
    return split(usable, {cpu: siblings(cpu) for cpu in usable}, gpus)


def cpu_list(cpus: tuple[int, ...]) -> str:
    """``0-5,8-13``: the CPUs as Linux lists them."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return ",".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def _threads() -> list[int]:
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return [0]


def move_to(cpus: tuple[int, ...]) -> None:
    """Every thread of this process (and those it starts afterwards) onto ``cpus``."""
    for tid in _threads():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(tid, cpus)


def _affinities() -> dict[int, set[int]]:
    """Each thread's CPUs now (a thread that ended meanwhile left out)."""
    found: dict[int, set[int]] = {}
    for tid in _threads():
        with contextlib.suppress(OSError):
            found[tid] = os.sched_getaffinity(tid)
    return found


@contextlib.contextmanager
def moved_to(cpus: tuple[int, ...]) -> Iterator[None]:
    """Every thread of this process on ``cpus`` for the block, then back where it was (a thread started during the
    block: where the main thread was)."""
    before = _affinities()
    main = before.get(os.getpid(), os.sched_getaffinity(0))
    move_to(cpus)
    try:
        yield
    finally:
        for tid in _threads():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, before.get(tid, main))
