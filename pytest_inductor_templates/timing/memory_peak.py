"""Peak device memory of a steady call, eager's and compiled's, read as PyTorch's dynamo benchmark harness reads it:
``torch.cuda.reset_peak_memory_stats()``, the call, ``torch.cuda.max_memory_allocated()``; their ratio is the
harness's compression ratio (eager peak / compiled peak).

Unlike the harness, which reads the peak over warm-up iterations that include compiling, each peak is of a call
after warm-up (compiling, autotuning and CUDA-graph recording behind it). ``max_memory_allocated`` counts every
tensor resident on the device during the call: the model's weights, its inputs, the copies of the weights a frozen
model keeps beside the originals, the live buffers of CUDA-graph pools, and what the call itself allocates. On the
CPU there is no allocator peak to read: nothing is measured there. Plain data in, plain data out: no pytest.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..machine import Device
from ..memory import MiB

PEAK_CALLS = 2  # measured calls of each model, after one more warm call; the lower peak counts


@dataclass(frozen=True)
class PeakMemory:
    """The peak CUDA memory (bytes) during one steady call of eager and of the compiled model."""

    eager_bytes: int
    compiled_bytes: int
    seconds: float = 0.0  # wall time the measurement held the GPU's timing slot

    @property
    def eager_mib(self) -> float:
        return round(self.eager_bytes / MiB, 1)

    @property
    def compiled_mib(self) -> float:
        return round(self.compiled_bytes / MiB, 1)

    @property
    def ratio(self) -> float | None:
        """eager peak / compiled peak (above 1: the compiled model needs less memory than eager); None when the
        compiled call's peak is nothing."""
        return self.eager_bytes / self.compiled_bytes if self.compiled_bytes else None


def steady_peak(run: Callable[[], Any], device: str) -> int:
    """Bytes: the peak CUDA memory allocated on ``device`` during a call of ``run``, the lower of ``PEAK_CALLS``
    calls, each with the device synchronized and its peak reset before and synchronized after (one unmeasured
    call before them). Each call's outputs are freed before the next call."""
    import torch

    run()
    peaks = []
    for _ in range(PEAK_CALLS):
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        run()
        torch.cuda.synchronize(device)
        peaks.append(torch.cuda.max_memory_allocated(device))
    return min(peaks)


def peak_memory(eager_run: Callable[[], Any], compiled_run: Callable[[], Any], device: Device) -> PeakMemory | None:
    """Eager's and the compiled model's steady peaks on ``device``, both with the same memory resident (unreachable
    tensors gathered first); None off CUDA."""
    if device.type != "cuda":
        return None
    gc.collect()
    return PeakMemory(steady_peak(eager_run, device.name), steady_peak(compiled_run, device.name))
