"""Work and timings kept apart across the processes of one session on one host (the sample workers of pytest-xdist's
workers).

Each process builds, compiles, checks and releases its samples' triples (its *work*) and times them. Work
disturbs a timing beside it: Inductor's pool of compile processes takes every core, and the timed program's
Python side (launching kernels) slows, eager's more than a compiled or CUDA-graph program's. On two H200s, the run
whose other worker compiled cold read CUDA-graph speedups up to 1.4x higher than the runs after it (though later
one process alone showed much the same, so that was not the only cause). So:

- any number of processes work at once, but none while a timing runs anywhere on the host;
- one timing at a time per device (its *slot*: a GPU, or the CPU); timings on different GPUs may run together.

Group mutual exclusion with ``flock`` on files in a folder the session shares: work holds ``work`` shared once no timing
holds ``timing``; a timing first holds its slot's file exclusively, then ``timing`` shared once no work holds ``work``;
whoever waits for the other group holds ``turnstile`` meanwhile, so that neither group starves the other. Timings that
wait go together: a timing holds ``pending`` shared from its request to its end, and work waits until nobody holds
``pending`` before it enters the turnstile. So once the work in progress has drained for one timing, the timings asked
meanwhile (the workers whose work ended during the drain) run one after another, and work resumes after the last of
them, instead of each timing after the first waiting for a fresh round of work to drain (on one H200, 4 workers sharing
the GPU so each waited for about half of the run). Before it leaves the work group a process settles what its work
started in the background (Inductor's compile pool: ``compile.pool``), so that it does not run on beside a timing. Locks
held by a process that dies are released by the kernel. Where ``fcntl`` does not exist (Windows), nothing is kept apart.

With ``--inductor-compile-beside-timing=on`` (CUDA timings only) the host's CPUs are split (``timing.cores``): a few
whole cores for timings, the rest for work. Every process that shares the lock works on the work CPUs, and a timing
moves onto the timing CPUs while it times; a compile that does not touch the GPU (Inductor's code generation and its
Triton compiles, without autotuning or freezing) then leaves the work group for its duration (``beside_timings``):
timings go on beside it, on CPUs it does not use, and it joins the work group again, as any work asks, before the
compiled code first runs.

With ``--inductor-lock-log`` each hold appends a line ``PID GROUP DETAIL START END`` (wall-clock seconds; GROUP
``work``, ``timing`` with its slot as DETAIL, ``compile`` for a compile beside timings, or ``pool`` with the compile
pool's process id, started and ready within the work that started it): what ran beside what, for debugging and for
the tests.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import phases
from . import cores

TURNSTILE, TIMING, WORK, POOL, PENDING, COMPILE = "turnstile", "timing", "work", "pool", "pending", "compile"
CPU_SLOT = "cpu"
_held_fds: set[int] = set()  # this process's locked descriptors, which a forked child must not keep

# what work started in the background, settled before it leaves the work group: (what, start, end) to log, or None
Settle = Callable[[], tuple[str, float, float] | None]


@dataclass(frozen=True)
class Sharing:
    """How one process shares the host with the session's others: the lock folder, the slot its CUDA timings take
    (its GPU: ``gpu1``), the lock log (``--inductor-lock-log``), if any, and the CPUs split between timings and
    work, where compiles go on beside timings."""

    folder: str
    gpu_slot: str = "gpu"
    log: str | None = None
    split: cores.Split | None = None  # with --inductor-compile-beside-timing: the CPUs of timings and of work

    def slot(self, device_type: str) -> str:
        """The timing slot of a device type: this process's GPU, or the CPU."""
        return self.gpu_slot if device_type == "cuda" else CPU_SLOT


class _Held:
    """One flock on one file, released when closed."""

    def __init__(self, path: Path, operation: int) -> None:
        import fcntl

        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, operation)
        except BaseException:
            os.close(self.fd)
            raise
        _held_fds.add(self.fd)

    def close(self) -> None:
        _held_fds.discard(self.fd)
        os.close(self.fd)  # the last descriptor of the open file closed releases its lock


def _forget_in_child() -> None:
    """In a child forked while a lock was held (Inductor's compile pool, a sample's own processes): drop its copies
    of the descriptors, so that the lock ends with the parent's hold, not with the child; and take no part in the
    lock (the child's work is its parent's: asking for a hold of its own beside the parent's could wait for a timing
    that waits for the parent)."""
    global _active
    for fd in list(_held_fds):
        with contextlib.suppress(OSError):
            os.close(fd)
    _held_fds.clear()
    _active = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


@dataclass
class _Hold:
    """A hold of one group: its locks, and when it began."""

    group: str
    detail: str
    locks: list[_Held]  # the group's own lock first, then the slot's and ``pending``, where taken
    start: float


class HostLock:
    """The session's work/timing exclusion, from the folder holding its lock files."""

    def __init__(self, sharing: Sharing | str | Path, settle: Settle | None = None) -> None:
        self.sharing = sharing if isinstance(sharing, Sharing) else Sharing(str(sharing))
        self.folder = Path(self.sharing.folder)
        self.settle = settle  # called before leaving the work group
        self._held: _Hold | None = None  # the group this process is in: a nested request joins it
        self.rejoin_seconds = 0.0  # waited, in all, to join work again after compiles beside timings

    def _enter(self, mine: str, other: str, slot: str | None = None) -> _Hold:
        """Wait for ``mine``'s turn (``phases.WAITING`` meanwhile) and hold it."""
        import fcntl

        before = phases.current()
        phases.enter(phases.WAITING)  # a timeout meanwhile says so
        if mine == WORK:
            _Held(self.folder / PENDING, fcntl.LOCK_EX).close()  # wait until no timing waits or runs
        pending = _Held(self.folder / PENDING, fcntl.LOCK_SH) if mine == TIMING else None
        own: _Held | None = None
        try:
            own = _Held(self.folder / f"slot-{slot}", fcntl.LOCK_EX) if slot is not None else None  # one per device
            turnstile = _Held(self.folder / TURNSTILE, fcntl.LOCK_EX)
            try:
                _Held(self.folder / other, fcntl.LOCK_EX).close()  # wait until the other group has left
                held = _Held(self.folder / mine, fcntl.LOCK_SH)
            finally:
                turnstile.close()
        except BaseException:
            for taken in (own, pending):
                if taken is not None:
                    taken.close()
            raise
        if before is not None:
            phases.enter(before)
        return _Hold(mine, slot or "-", [held, *(t for t in (own, pending) if t is not None)], time.time())

    def _leave(self, hold: _Hold, settle: bool = True) -> None:
        """Let go of ``hold`` (work settles what it started in the background first, unless ``settle`` is off) and
        log it."""
        settled = self.settle() if hold.group == WORK and settle and self.settle is not None else None
        end = time.time()
        for lock in hold.locks:
            lock.close()
        self._log(hold.group, hold.detail, hold.start, end)
        if settled is not None:
            self._log(POOL, *settled)

    @contextlib.contextmanager
    def _group(self, mine: str, other: str, slot: str | None = None) -> Iterator[None]:
        if self._held is not None:  # already in a group: a compile within the check's work, or during a timing
            if self._held.group != TIMING and mine == TIMING:
                raise RuntimeError("a timing was asked for within work: it would run beside the others' work")
            if self._held.group == COMPILE:  # a compile beside timings that needs the GPU after all
                self._rejoin()
            yield
            return
        self._held = self._enter(mine, other, slot)
        split = self.sharing.split if mine == TIMING else None
        try:
            with cores.moved_to(split.timing) if split is not None else contextlib.nullcontext():
                yield
        finally:
            hold, self._held = self._held, None
            if hold is not None:  # None: joining work again after a compile beside timings was interrupted
                self._leave(hold)

    @contextlib.contextmanager
    def beside_timings(self) -> Iterator[None]:
        """Around a compile that does not touch the GPU, within work: where the session splits its CPUs, the work
        group is left for the block (timings go on beside it, on their own CPUs; nothing is settled: the compile
        uses its pool) and joined again after it, as any work joins, or as soon as something in it asks for work
        (the GPU after all: ``work()`` within the block); elsewhere the work goes on as it was."""
        if self.sharing.split is None or self._held is None or self._held.group != WORK:
            yield
            return
        self._leave(self._held, settle=False)
        self._held = _Hold(COMPILE, "-", [], time.time())
        try:
            yield
        finally:
            if self._held is not None and self._held.group == COMPILE:
                self._rejoin()

    def _rejoin(self) -> None:
        """From a compile beside timings back into the work group, waiting as any work waits (the seconds waited
        are added to ``rejoin_seconds``)."""
        assert self._held is not None and self._held.group == COMPILE
        self._log(COMPILE, "-", self._held.start, time.time())
        self._held, asked = None, time.perf_counter()  # None while waiting: an interruption leaves nothing held
        self._held = self._enter(WORK, TIMING)
        self.rejoin_seconds += time.perf_counter() - asked

    def _log(self, group: str, detail: str, start: float, end: float) -> None:
        if self.sharing.log is None:
            return
        line = f"{os.getpid()} {group} {detail} {start:.6f} {end:.6f}\n".encode()
        fd = os.open(self.sharing.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write of a short line: whole, among the other processes' lines
        finally:
            os.close(fd)

    def work(self) -> contextlib.AbstractContextManager[None]:
        """Held while this process builds, compiles, checks or releases: waits for every timing in progress."""
        return self._group(WORK, TIMING)

    def timing(self, device_type: str = CPU_SLOT) -> contextlib.AbstractContextManager[None]:
        """Held while this process times on a device: waits for the device's other timing, then for all work."""
        return self._group(TIMING, WORK, self.sharing.slot(device_type))


_active: HostLock | None = None


def use(sharing: Sharing | None, settle: Settle | None = None) -> None:
    """Keep this process's work and timings apart from those of the other processes sharing ``sharing.folder``
    (None: from nobody's), settling what work started in the background with ``settle``; where the session splits
    the host's CPUs, this process moves onto the work CPUs. Set once, in a sample worker process, from what its
    pytest-xdist worker was given."""
    global _active
    _active = HostLock(sharing, settle) if sharing is not None and available() else None
    if _active is not None and _active.sharing.split is not None:
        cores.move_to(_active.sharing.split.work)  # its compile pool, started later, inherits them


def new_log(path: str | os.PathLike[str] | None) -> str | None:
    """The lock log at ``path`` (``--inductor-lock-log``), emptied for this session's holds; None without one."""
    if path is None:
        return None
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text("")
    return str(path)


def available() -> bool:
    """Whether this platform can keep processes apart (``fcntl.flock``: not on Windows)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return True


def work() -> contextlib.AbstractContextManager[None]:
    """Around building, compiling, checking, releasing: held apart from the other processes' timings, when this
    process shares a lock."""
    return _active.work() if _active is not None else contextlib.nullcontext()


def timing(device_type: str) -> contextlib.AbstractContextManager[None]:
    """Around a timing on ``device_type`` (``cpu``, ``cuda``): alone on its device and beside no work, when this
    process shares a lock."""
    return _active.timing(device_type) if _active is not None else contextlib.nullcontext()


def splits_host() -> bool:
    """Whether this process shares a host whose CPUs are split between timings and work: its compiles that leave
    the GPU alone may go on beside timings."""
    return _active is not None and _active.sharing.split is not None


def beside_timings() -> contextlib.AbstractContextManager[None]:
    """Around a compile that leaves the GPU alone (no autotuning, no freezing: code generation): beside the other
    processes' timings, on the work CPUs, where the session splits the host's CPUs; otherwise it stays work."""
    return _active.beside_timings() if _active is not None else contextlib.nullcontext()


def _rejoin_seconds() -> float:
    return _active.rejoin_seconds if _active is not None else 0.0


class Stopwatch:
    """The seconds since it was made, less those this process waited meanwhile to join work again after compiles
    beside timings (no compile's time)."""

    def __init__(self) -> None:
        self.start, self.waited = time.perf_counter(), _rejoin_seconds()

    def seconds(self) -> float:
        return time.perf_counter() - self.start - (_rejoin_seconds() - self.waited)


def sharing() -> Sharing | None:
    """How this process shares the host (None: with nobody), to hand to a process it starts for its work."""
    return _active.sharing if _active is not None else None
