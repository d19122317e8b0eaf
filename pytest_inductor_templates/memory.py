"""Memory sizes: parsing ``8GiB``, a process's resident memory, the host's available memory, a device's allocated
CUDA memory, the bytes a set of tensors holds."""

from __future__ import annotations

import os
import re
from typing import Any

MiB = 1024 * 1024
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3}
_UNITS.update({"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "t": 1000**4, "tb": 1000**4})
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*")


def parse_size(text: str) -> int:
    """Bytes from ``512MiB``, ``8GiB``, ``1.5GB`` or a plain number of bytes; ValueError otherwise."""
    match = _SIZE.fullmatch(text)
    unit = match[2].lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"expected a size such as 512MiB or 8GiB, got {text!r}")
    return int(float(match[1]) * _UNITS[unit])


def format_size(size: float) -> str:
    """``1.49 GiB``, ``312.0 MiB``."""
    return f"{size / 1024**3:.2f} GiB" if size >= 1024**3 else f"{size / MiB:.1f} MiB"


def rss_bytes(pid: int | None = None) -> int | None:
    """Resident memory of process ``pid`` (default: this one), or None where ``/proc`` does not tell (not Linux)."""
    try:
        with open(f"/proc/{pid or os.getpid()}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def available_memory() -> int | None:
    """The host's memory available to new work without swapping (Linux: ``MemAvailable``), or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # in kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def cuda_allocated(device: Any) -> int | None:
    """Bytes the CUDA caching allocator has handed out on ``device`` (a ``machine.Device``); None off CUDA."""
    if device.type != "cuda":
        return None
    import torch

    return int(torch.cuda.memory_allocated(torch.device(device.name)))


def storage_bytes(tensors: list[Any]) -> int:
    """The bytes these tensors hold, each storage once (views and expanded tensors share one)."""
    import torch

    sizes = {}
    for t in tensors:
        if t.layout == torch.strided:
            sizes[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        else:  # sparse and other layouts have no single storage
            sizes[id(t)] = t.numel() * t.element_size()
    return sum(sizes.values())
