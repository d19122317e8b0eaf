"""The fastest CPU-speed probe the session's timings have seen on this host: full speed's mark for the next timing.

The lent H200 hosts' vCPUs run at two speeds about 1.7-2x apart and stay at one for seconds, longer than one
process's share of an item's paired rounds: a timing that met only the slow speed cannot tell from its own probes.
So each timing starts from the mark the host's earlier timings left and offers its own after (``PairedTiming.mark``:
its probes' lower decile, so that one lucky probe does not make every later round look slow). The mark lives in a
file of the session's shared lock folder (``host_lock``: under pytest-xdist, or where repeats run in other worker
processes), so every process of the session on the host reads the same one; a process sharing no folder keeps none
(each timing judges its own probes alone).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from . import host_lock

FILE = "fastest-probe"


def _path() -> Path | None:
    sharing = host_lock.sharing()
    return Path(sharing.folder) / FILE if sharing is not None else None


def fastest() -> float | None:
    """The fastest probe (ms) the session's timings on this host have offered, or None (none yet, or no folder)."""
    path = _path()
    if path is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        return float(path.read_text())
    return None


def offer(probe: float | None) -> None:
    """Keep ``probe`` (ms) as the mark where it is faster than the one kept: compared and written under a lock
    (timings on different devices end at once), written whole (a reader sees the old mark or the new)."""
    path = _path()
    if path is None or probe is None or probe <= 0:
        return
    import fcntl  # (a shared folder exists only where flock does: host_lock.available)

    with contextlib.suppress(OSError), open(path.with_name(f"{FILE}.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        known = fastest()
        if known is not None and known <= probe:
            return
        partial = path.with_name(f"{FILE}.{os.getpid()}")
        try:
            partial.write_text(repr(probe))
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
