"""Following the full speed: before each paired round, the timing thread moves to a CPU that runs at full speed.

Some virtual machines run each vCPU at one of two speeds about 1.6-2x apart, each vCPU switching every few seconds
and not together with the others, so at most moments some vCPU of the process runs at full speed. A launch-bound
speedup moves with the speed its rounds meet, and which speed one process's short span meets is chance. So a
timing goes where the full speed is: before each round it probes the CPU it is on (``PROBE_LOOP``); where that reads
slower than ``SLOW`` times the timing's mark of full speed (``paired.mark_of``: its probes' lower decile, or the
host's mark), it probes each CPU it may run on once and stays on the fastest for the round (the thread pinned to
it). Afterwards the thread may run on all its CPUs again.

Only the calling thread moves (``sched_setaffinity`` of thread 0): torch's intra-op threads stay where they were; a
thread or process the timing thread starts while pinned (none after the warm-up, as a rule) would inherit its one CPU.
Linux only; elsewhere there is nothing to follow with and the rounds stay where the scheduler puts them. It does not
remove the offset each process carries apart from the CPU's speed (measured on a steady host: rounds that followed
and rounds that stayed agreed within a process, and processes differed by up to 4.5%): that is the band's to cover.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence

from ..cpu_speed import SLOW


class FastCpu:
    """Before each round, the probe of a CPU at full speed: the current one if it is, else the fastest of all.

    ``probe``: milliseconds of the fixed probe loop on the CPU the thread is on; ``move``: pin the thread to a CPU;
    ``cpus``: the CPUs it may use; ``current``: the CPU it is on at the start (None: not pinned yet)."""

    def __init__(
        self,
        probe: Callable[[], float],
        move: Callable[[int], None],
        cpus: Sequence[int],
        current: int | None = None,
    ) -> None:
        self.probe, self.move, self.cpus = probe, move, list(cpus)
        self.current = current
        self.moves = 0  # rounds that moved to another CPU
        self.surveys = 0  # rounds that probed every CPU

    def settle(self, known: float | None) -> float:
        """The probe of the CPU this round runs on: this one where it runs within ``SLOW`` of the full speed known
        (``known``: the timing's mark, a speed the CPUs held, not one lucky probe), else the fastest of every CPU,
        moved to."""
        here = self.probe()
        best = min(x for x in (known, here) if x is not None)
        if self.current is not None and here <= SLOW * best:
            return here
        self.surveys += 1
        found: list[tuple[float, int]] = []
        for cpu in self.cpus:
            try:
                self.move(cpu)
            except OSError:  # gone offline, or taken from the process's set since: not a place to time
                continue
            found.append((self.probe(), cpu))
        pinned = self._pin_fastest(found)
        if pinned is None:
            return here
        fastest, cpu = pinned
        if cpu != self.current:
            self.moves += int(self.current is not None)
            self.current = cpu
        return fastest

    def _pin_fastest(self, found: list[tuple[float, int]]) -> tuple[float, int] | None:
        """Pin the thread to the fastest surveyed CPU that still takes it; its probe and number (None: none did)."""
        for probe_ms, cpu in sorted(found):
            try:
                self.move(cpu)
            except OSError:
                continue
            return probe_ms, cpu
        return None


def _pin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


@contextlib.contextmanager
def following(probe: Callable[[], float]) -> Iterator[FastCpu | None]:
    """A ``FastCpu`` over the CPUs this thread may use, their affinity given back at the end; None where the
    system cannot pin a thread or there is only one CPU to go to."""
    if not hasattr(os, "sched_setaffinity"):
        yield None
        return
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        yield None
        return
    try:
        yield FastCpu(probe, _pin, sorted(allowed))
    finally:
        os.sched_setaffinity(0, allowed)
