"""CPU threads: how many intra-op threads, set around an item; Inductor's compile threads under pytest-xdist; and
whether the machine is busy."""

from __future__ import annotations

import os

COMPILE_THREADS = "TORCHINDUCTOR_COMPILE_THREADS"  # Inductor's own variable for the size of its compile pool


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity), not every CPU of the machine."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def xdist_workers() -> int:
    """How many pytest-xdist workers this process is one of (1 outside pytest-xdist)."""
    return max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))


SMALL_SHARE = 2  # a process's share of at most this many CPUs is a small, shared CPU: one thread times there


def cpu_share(workers: int | None = None) -> int:
    """The usable CPUs shared among pytest-xdist's workers (``workers`` of them, else as many as this process is one
    of): this process's share, at least 1."""
    return max(1, usable_cpus() // (workers or xdist_workers()))


def default_threads(workers: int | None = None) -> int:
    """Intra-op threads that do not oversubscribe: this process's share of the usable CPUs, or one thread where the
    share is small (at most 2 CPUs: a CI runner, a laptop), so that a CPU timing is one thread's work."""
    share = cpu_share(workers)
    return 1 if share <= SMALL_SHARE else share


def compile_threads_share(workers: int, cpus: int | None = None) -> int | None:
    """Inductor's compile threads for each of ``workers`` pytest-xdist workers: the usable CPUs (or ``cpus``: those
    work may use) shared among them (Inductor's default takes them all in every process); None for one worker, or
    when the user set ``TORCHINDUCTOR_COMPILE_THREADS`` (their count stands)."""
    if workers <= 1 or COMPILE_THREADS in os.environ:
        return None
    return max(1, (cpus if cpus is not None else usable_cpus()) // workers)


class ThreadScope:
    """torch's intra-op thread count held at ``threads`` over a run of consecutive items, and the count in force
    before restored when the run ends.

    Inductor bakes the thread count in force at compile time into the C++ kernels it generates for the CPU, so
    the count holds around everything an item does (building, compiling, checking, timing). It is not switched
    back and forth between items: with libgomp, changing the count can leave every later parallel region
    waiting milliseconds for its threads on a loaded machine.
    """

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._before: int | None = None

    def enter(self) -> None:
        import torch

        if self._before is None:
            self._before = torch.get_num_threads()
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    def leave(self) -> None:
        if self._before is None:
            return
        import torch

        if torch.get_num_threads() != self._before:
            torch.set_num_threads(self._before)
        self._before = None


def load_average() -> float | None:
    """The 1-minute load average, where the system has one."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def load_warning(threads: int, load: float | None, cpus: int, cpu_time: bool = False) -> str | None:
    """A line to warn with when other work already keeps at least one CPU busy and, with the timing threads
    added, the usable CPUs are oversubscribed; None on a quiet machine. ``cpu_time``: CPU items are timed by the
    process's CPU time (the waits stay out of them)."""
    if load is None or load < 1 or load + threads <= cpus:
        return None
    seen = f"the machine is already loaded (load average {load:.1f} over the last minute, {cpus} usable CPU(s), "
    if cpu_time:
        return seen + f"{threads} timing thread(s)): CPU items are timed by CPU time; wall-clock timings are noisy"
    return seen + (
        f"{threads} timing thread(s)): wall-clock timings will be noisy; --inductor-timing-threads=1 "
        "times the CPU work itself (time.process_time)"
    )
