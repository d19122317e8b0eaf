"""The fastest CPU-speed probe the session's timings have seen on this host: full speed's mark for the next timing.

The lent H200 hosts' vCPUs run at two speeds about 1.7-2x apart and stay at one for seconds, longer than one
process's share of an item's paired rounds: a timing that met only the slow speed cannot tell from its own probes.
So each timing starts from the fastest probe the host's earlier timings saw and offers its own fastest after. The
mark lives in a file of the session's shared lock folder (``host_lock``), so every process of the session on the host
reads the same one; a process sharing no folder keeps none (each timing judges its own probes alone).
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
    """Keep ``probe`` (ms) as the mark where it is faster than the one kept (written whole: a reader sees the old
    mark or the new)."""
    path = _path()
    if path is None or probe is None or probe <= 0:
        return
    known = fastest()
    if known is not None and known <= probe:
        return
    partial = path.with_name(f"{FILE}.{os.getpid()}")
    with contextlib.suppress(OSError):
        partial.write_text(repr(probe))
        os.replace(partial, path)
