"""Compiles and timings kept apart across the processes of one session on one host (pytest-xdist, a GPU each).

Under ``-n`` with one GPU per xdist worker, each worker times its own GPU while the others go on. A compile in
another worker disturbs that: Inductor's pool of compile processes takes every core, and the timed program's
Python side (launching kernels) slows, eager's more than a compiled or CUDA-graph program's. On two H200s, the run
whose other worker compiled cold read CUDA-graph speedups up to 1.4x higher than the runs after it (though later
one process alone showed much the same, so that was not the only cause). So any number of compiles may run at
once, and any number of timings, but never a compile and a timing together.

Group mutual exclusion with ``flock`` on three files in a folder the session shares: a compile holds
``compiling`` shared once no timing holds ``timing``; a timing holds ``timing`` shared once no compile holds
``compiling``; whoever waits for the other group holds ``turnstile`` meanwhile, so that neither group starves
the other. Locks held by a process that dies are released by the kernel. Where ``fcntl`` does not exist
(Windows), nothing is kept apart.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from .. import phases

TURNSTILE, TIMING, COMPILING = "turnstile", "timing", "compiling"
_held_fds: set[int] = set()  # this process's locked descriptors, which a forked child must not keep


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
    of the descriptors, so that the lock ends with the parent's hold, not with the child."""
    for fd in list(_held_fds):
        with contextlib.suppress(OSError):
            os.close(fd)
    _held_fds.clear()
    if _active is not None:
        _active._held = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


class HostLock:
    """The session's compile/timing exclusion, from the folder holding its lock files."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._held: str | None = None  # the group this process is in: a nested request joins it

    @contextlib.contextmanager
    def _group(self, mine: str, other: str) -> Iterator[None]:
        import fcntl

        if self._held is not None:  # already in a group (a compile within a compile, or during its own timing)
            yield
            return
        before = phases.current()
        phases.enter(phases.WAITING)  # a timeout meanwhile says so
        turnstile = _Held(self.folder / TURNSTILE, fcntl.LOCK_EX)
        try:
            _Held(self.folder / other, fcntl.LOCK_EX).close()  # wait until the other group has left
            held = _Held(self.folder / mine, fcntl.LOCK_SH)
        finally:
            turnstile.close()
        if before is not None:
            phases.enter(before)
        self._held = mine
        try:
            yield
        finally:
            self._held = None
            held.close()

    def compiling(self) -> contextlib.AbstractContextManager[None]:
        """Held while this process compiles: waits for every timing in progress to end."""
        return self._group(COMPILING, TIMING)

    def timing(self) -> contextlib.AbstractContextManager[None]:
        """Held while this process times: waits for every compile in progress to end."""
        return self._group(TIMING, COMPILING)


_active: HostLock | None = None


def use(folder: str | None) -> None:
    """Keep this process's compiles and timings apart from those of the other processes sharing ``folder``
    (None: from nobody's). Set once, in a sample worker process, from what its pytest-xdist worker was given."""
    global _active
    _active = HostLock(folder) if folder is not None and available() else None


def available() -> bool:
    """Whether this platform can keep processes apart (``fcntl.flock``: not on Windows)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return True


def compiling() -> contextlib.AbstractContextManager[None]:
    """Around a compile: held apart from the other processes' timings, when this process shares a lock."""
    return _active.compiling() if _active is not None else contextlib.nullcontext()


def timing() -> contextlib.AbstractContextManager[None]:
    """Around a timing: held apart from the other processes' compiles, when this process shares a lock."""
    return _active.timing() if _active is not None else contextlib.nullcontext()
