"""``-n auto`` for a run of samples: as many pytest-xdist workers as the host's CPUs, memory and GPUs fit.

Each worker is an xdist worker and its sample worker, both with torch loaded, one sample's model built twice (the
model under test and a fresh eager one, with their inputs) and, on a GPU, a CUDA context; on shared GPUs also the
processes its compiled items' timings are repeated in (``--inductor-timing-processes``: torch loaded, the sample's
copy as built in host memory, its model and an eager one on the GPU). The count is the least of what the CPUs (those
work runs on, where compiles go on beside timings), the host memory and the GPUs' memory allow, and never fewer than
one worker per GPU (so that the workers share the GPUs and time there). pytest-xdist's own count stands when no sample
runs, under ``-n logical`` and when ``PYTEST_XDIST_AUTO_NUM_WORKERS`` is set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pytest

from ..machine import gpu_free_memory
from ..memory import available_memory, format_size
from ..settings import Settings
from ..timing.cores import host_split
from ..timing.processes import most_processes_for, processes_for
from ..timing.threads import usable_cpus

GiB = 1024**3
CPUS_PER_WORKER = 2  # one for the worker's own Python (building, checking, launching), one for its compiles
WORKER_MEMORY = 2 * GiB  # an xdist worker and its sample worker, torch and Inductor loaded
GPU_WORKER_MEMORY = 1 * GiB  # a CUDA context and the libraries' workspaces
SAMPLE_MEMORY = 1 * GiB  # one sample's tensors, unless --inductor-memory-budget bounds them
REPEATER_MEMORY = 1 * GiB  # a process a compiled item's timing is repeated in: torch and Inductor loaded


@dataclass(frozen=True)
class AutoWorkers:
    """What ``-n auto`` was sized from, and the count."""

    cpus: int  # usable CPUs (this process's affinity), or the work CPUs of them where compiles go on beside timings
    memory: int | None  # host memory available (bytes), None where unknown
    gpus: int  # the GPUs the workers share (0: none)
    gpu_free: int | None  # the least free memory of those GPUs (bytes), None where unknown
    sample_bytes: int = SAMPLE_MEMORY  # one sample's tensors at most
    repeaters: int = 0  # the processes each worker repeats its compiled items' timings in
    more_repeaters: int = 0  # ... and those it adds where a band is wide (counted for their CUDA context and torch)
    work_cpus: bool = False  # cpus counts only the CPUs work runs on (--inductor-compile-beside-timing=on)

    @property
    def worker_memory(self) -> int:
        repeaters = self.repeaters * (REPEATER_MEMORY + self.sample_bytes) + self.more_repeaters * REPEATER_MEMORY
        return WORKER_MEMORY + 2 * self.sample_bytes + repeaters

    @property
    def gpu_worker_memory(self) -> int:
        return (1 + self.repeaters) * (
            GPU_WORKER_MEMORY + 2 * self.sample_bytes
        ) + self.more_repeaters * GPU_WORKER_MEMORY

    @property
    def by_memory(self) -> int | None:
        return max(1, self.memory // self.worker_memory) if self.memory is not None else None

    @property
    def by_gpu_memory(self) -> int | None:
        if not self.gpus or self.gpu_free is None:
            return None
        return self.gpus * max(1, self.gpu_free // self.gpu_worker_memory)

    @property
    def fitting(self) -> int:
        """The least of what the CPUs, the memory and the GPUs' memory allow."""
        bounds = [max(1, self.cpus // CPUS_PER_WORKER), self.by_memory, self.by_gpu_memory]
        return min(bound for bound in bounds if bound is not None)

    @property
    def count(self) -> int:
        return max(self.fitting, self.gpus, 1)

    def line(self) -> str:
        """``-n auto: 6 workers (16 CPUs / 2 a worker; memory allows 11: ...; 1 GPU, ...)``, for the header."""
        parts = [f"{self.cpus} {'work CPUs' if self.work_cpus else 'CPUs'} / {CPUS_PER_WORKER} a worker"]
        if self.memory is None:
            parts.append("memory unknown")
        else:
            parts.append(
                f"memory allows {self.by_memory}: {format_size(self.memory)} available / "
                f"{format_size(self.worker_memory)} a worker"
            )
        gpus = f"{self.gpus} GPU{'s' if self.gpus != 1 else ''}"
        if not self.gpus:
            parts.append("no GPU")
        elif self.gpu_free is None:
            parts.append(f"{gpus}, their memory unknown")
        else:
            parts.append(
                f"{gpus}, whose memory allows {self.by_gpu_memory}: {format_size(self.gpu_free)} free on the fullest "
                f"/ {format_size(self.gpu_worker_memory)} a worker"
            )
        if self.count > self.fitting:
            parts.append("at least one a GPU")
        plural = "s" if self.count != 1 else ""
        more = f" (and {self.more_repeaters} more where a band is wide)" if self.more_repeaters else ""
        repeating = f", each with {self.repeaters} timing repeater(s){more}" if self.repeaters else ""
        return f"-n auto: {self.count} worker{plural}{repeating} ({'; '.join(parts)})"


def auto_workers(config: pytest.Config, settings: Settings) -> AutoWorkers | None:
    """How many workers ``-n auto`` starts for this run of samples, and why; None to leave it to pytest-xdist."""
    if config.getoption("numprocesses", None) != "auto" or not settings.all("inductor_samples"):
        return None
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    import torch  # the session imports it next; device_count makes no CUDA context

    devices = settings.get("inductor_devices")
    shared = devices is None or str(devices.value).strip() == "cuda"  # the workers then share the GPUs
    gpus = torch.cuda.device_count() if shared else 0
    free = gpu_free_memory(gpus) if gpus else None
    repeaters = more = 0  # the processes each worker repeats timings in, and those it adds where a band is wide
    if gpus and settings.isolated:
        first = processes_for(settings.timing_processes, "cuda")
        repeaters, more = first - 1, most_processes_for(settings.timing_processes, "cuda") - first
    work = host_split(gpus).work if gpus and settings.isolated and settings.compile_beside_timing else ()
    return AutoWorkers(len(work) or usable_cpus(), available_memory(), gpus, min(free) if free else None,
                       settings.memory_budget or SAMPLE_MEMORY, repeaters, more, bool(work))  # fmt: skip
