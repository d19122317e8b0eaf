"""On a CUDA device: the timer waits for the GPU, and device time is recorded beside wall time.

Run on a GPU machine with ``pytest -m gpu -s``; skipped without CUDA.
"""

from __future__ import annotations

import json

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

BIG_MATMUL = """
import torch


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def test_matmul_speed(inductor_benchmark):
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    inductor_benchmark(MatMul(), a, b)
"""


def test_the_timer_waits_for_the_gpu(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_big=BIG_MATMUL)
    result = pytester.runpytest_subprocess(
        "--inductor-template=default",
        "--inductor-devices=cuda",
        "--inductor-tolerance=1e-2,1e-2",  # TF32 may be on; this test is about time
        "--benchmark-json=run.json",
        "--benchmark-max-time=0.5",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::DeprecationWarning",
    )
    result.assert_outcomes(passed=1)
    (entry,) = json.loads(pytester.path.joinpath("run.json").read_text())["benchmarks"]
    info, median = entry["extra_info"], entry["stats"]["median"]
    assert info["timer"] == "pytest_inductor_templates.timing.timers.cuda_synchronized_perf_counter"
    device_seconds = info["device_time_ms"] / 1000
    eager_ms = info["eager_median"] * 1e3
    print(f"\nmedian wall {median * 1e3:.3f} ms, device {info['device_time_ms']:.3f} ms, eager {eager_ms:.3f} ms")
    assert device_seconds > 1e-4  # a real GEMM: far above launch cost
    assert 0.9 * device_seconds < median < 2 * device_seconds  # an unsynchronized timer reports ~1% of it
    assert 0.9 * info["eager_device_time_ms"] / 1000 < info["eager_median"]
