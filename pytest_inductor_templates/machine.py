"""The machine as the plugin sees it: devices, compute capabilities, optional libraries."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Device:
    """One device a compiled model can run on."""

    name: str  # "cpu", "cuda:0"
    type: str  # "cpu", "cuda"
    description: str = ""
    capability: tuple[int, int] | None = None  # CUDA compute capability

    def __str__(self) -> str:
        return self.name


CPU = Device("cpu", "cpu", "CPU")


@contextlib.contextmanager
def device_scope(device: Device) -> Iterator[None]:
    """Make ``device`` the current CUDA device while the block runs (nothing for the CPU).

    Work queued without a device of its own (Triton launches, CUDA-graph trees, synchronize, events,
    ``empty_cache``) goes to the current device: for an item on ``cuda:1`` that must be ``cuda:1``.
    """
    if device.type != "cuda":
        yield
        return
    import torch

    with torch.cuda.device(torch.device(device.name)):
        yield


def visible_devices() -> list[Device]:
    """The CPU and every CUDA device torch can see."""
    import torch

    devices = [CPU]
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            devices.append(
                Device(
                    f"cuda:{index}",
                    "cuda",
                    torch.cuda.get_device_name(index),
                    tuple(torch.cuda.get_device_capability(index)),  # type: ignore[arg-type]
                )
            )
    return devices


def _cutlass_section() -> str | None:
    """The config section whose ``cutlass_dir`` this torch's Inductor reads (it moved from cuda to cutlass)."""
    from torch._inductor import config

    for section in ("cutlass", "cuda"):
        if isinstance(getattr(getattr(config, section, None), "cutlass_dir", None), str):
            return section
    return None


def cutlass_dir() -> str | None:
    """The CUTLASS checkout Inductor is configured with: ``cutlass.cutlass_dir`` (newer torch) or
    ``cuda.cutlass_dir`` (older), both defaulting to ``TORCHINDUCTOR_CUTLASS_DIR``."""
    from torch._inductor import config

    section = _cutlass_section()
    if section is not None:
        return str(getattr(config, section).cutlass_dir)
    return os.environ.get("TORCHINDUCTOR_CUTLASS_DIR")


def cutlass_problem() -> str | None:
    """Why Inductor cannot use CUTLASS here, or None. Inductor imports CUTLASS's Python packages from the
    ``python/`` folder of the configured checkout (a pip-installed ``cutlass_library`` is not used), and
    compiles the kernels with nvcc."""
    path = cutlass_dir()
    needed = ["cutlass_library"] + (["cutlass_cppgen", "pycute"] if _cutlass_section() == "cutlass" else [])
    missing = [name for name in needed if not path or not os.path.isdir(os.path.join(path, "python", name))]
    if missing:
        return (
            f"the CUTLASS Python library (cutlass_library) is not installed: {path!r} has no "
            f"python/{', python/'.join(missing)} (set TORCHINDUCTOR_CUTLASS_DIR to a CUTLASS checkout)"
        )
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or ""
    if not shutil.which("nvcc") and not os.path.isfile(os.path.join(cuda_home, "bin", "nvcc")):
        return "nvcc is not found (on PATH or in CUDA_HOME/bin): Inductor compiles CUTLASS kernels with it"
    return None


@cache
def package_missing(name: str) -> str | None:
    """Why the Python package ``name`` cannot be used here, or None when it can."""
    if name == "cutlass_library":
        return cutlass_problem()
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else f"the Python package {name!r} is not installed"


def _nvidia_smi(fields: str) -> list[list[str]] | None:
    """``nvidia-smi --query-gpu=FIELDS``: one row of values per GPU (all of the host's, in its own order), or None
    where it cannot tell. It makes no CUDA context."""
    import subprocess

    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [[value.strip() for value in line.split(",")] for line in out.stdout.strip().splitlines()]
    return rows if out.returncode == 0 and rows else None


def _nvidia_driver() -> str | None:
    rows = _nvidia_smi("driver_version")
    return rows[0][0] if rows else None


def gpu_free_memory(count: int) -> list[int] | None:
    """Free memory (bytes) of each of the first ``count`` GPUs this process sees (``CUDA_VISIBLE_DEVICES``, by
    index or UUID), from nvidia-smi: no CUDA context is made for it. None where unknown."""
    rows = _nvidia_smi("index,uuid,memory.free")
    if rows is None or any(len(row) != 3 for row in rows):
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    tokens = [t.strip() for t in visible.split(",") if t.strip()] if visible is not None else [r[0] for r in rows]
    found = []
    for token in tokens[:count]:
        row = next((r for r in rows if token == r[0] or (not token.isdigit() and r[1].startswith(token))), None)
        if row is None or not row[2].replace(".", "", 1).isdigit():
            return None
        found.append(int(float(row[2]) * 1024 * 1024))  # MiB
    return found if len(found) == count else None


def installed_version(distribution: str) -> str | None:
    """The installed version of ``distribution``; None where it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


@cache
def machine_info(tf32: str | None = None) -> dict[str, object]:
    """What a timing depends on beyond the CPU: GPU, compute capability, driver, CUDA, torch, Triton; and the run's
    TF32 mode (``--inductor-tf32``: ``on``, ``off``, or None where torch's flags were left as they were)."""
    import torch

    gpus = [d for d in visible_devices() if d.type == "cuda"]
    names = sorted({d.description for d in gpus})
    capabilities = sorted({f"{d.capability[0]}.{d.capability[1]}" for d in gpus if d.capability})
    return {
        "gpu": ", ".join(names) or None,
        "gpu_count": len(gpus),
        "gpu_compute_capability": ", ".join(capabilities) or None,
        "gpu_driver": _nvidia_driver() if gpus else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": installed_version("triton") or installed_version("pytorch-triton"),
        "tf32": tf32,
    }
