"""On a CUDA device: the timer waits for the GPU, and device time is recorded beside wall time.

Run on a GPU machine with ``pytest -m gpu -s``; skipped without CUDA.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from pytest_inductor_templates.runs.files import load

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
    print(
        f"paired: speedup {info['speedup']:.3f} [{info['speedup_low']:.3f}, {info['speedup_high']:.3f}] over "
        f"{info['paired_rounds']} rounds, device speedup {info['device_speedup']:.3f}"
    )
    assert device_seconds > 1e-4  # a real GEMM: far above launch cost
    assert 0.9 * device_seconds < median < 2 * device_seconds  # an unsynchronized timer reports ~1% of it
    assert 0.9 * info["eager_device_time_ms"] / 1000 < info["eager_median"]
    assert info["paired_rounds"] >= 10 and info["speedup_low"] <= info["speedup"] <= info["speedup_high"]
    assert 0.8 < info["speedup"] < 1.25 and 0.8 < info["device_speedup"] < 1.25  # the same cuBLAS GEMM both ways


def test_gpu_sized_samples_run_at_full_size_with_a_paired_speedup(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--inductor-samples", "--inductor-template=default", "--inductor-devices=cuda", "-k",
        "gemm_chain or transformer_block", "--benchmark-json=run.json", "-p", "no:cacheprovider", "-W", "ignore",
    )  # fmt: skip
    result.assert_outcomes(passed=8 * torch.cuda.device_count())  # every visible GPU: 2 samples x 4 items each
    data = json.loads(pytester.path.joinpath("run.json").read_text())
    for entry in data["benchmarks"]:
        info = entry["extra_info"]
        if info["template"] == "eager":
            continue
        half_width = (info["speedup_high"] - info["speedup_low"]) / 2 / info["speedup"]
        eager_ms = info["eager_median"] * 1e3
        print(f"\n{info['sample']}: {info['speedup']:.3f}x ±{half_width:.1%}, eager {eager_ms:.3f} ms a call")
        assert eager_ms > 0.2  # GPU-sized: far above launch overhead (tens of us)
        assert info["device_speedup"] > 0 and info["paired_rounds"] >= 10


def test_rounds_that_follow_the_full_speed_say_how_often_they_moved(pytester: pytest.Pytester) -> None:
    """--inductor-timing-follow-cpu=on: each process's paired rounds, the item's worker's and its repeat's, count
    their moves to a CPU at full speed in the record (with the option off the field is absent)."""
    result = pytester.runpytest_subprocess(
        "--inductor-samples", "--inductor-template=default", "--inductor-devices=cuda:0", "-k", "launch_bound",
        "--inductor-timing-follow-cpu=on", "--inductor-timing-processes=2", "--inductor-timing-loads=1",
        "--inductor-results=run.jsonl",
        "-p", "no:cacheprovider", "-W", "ignore",
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    records = load(str(pytester.path / "run.jsonl")).records
    (record,) = [r for r in records if r.kind == "bench" and r.template == "default"]
    print(f"\ncpu_moves {record.cpu_moves}, probes {record.process_probe_ms}, speedup {record.speedup:.3f}")
    assert record.cpu_moves is not None and len(record.cpu_moves) == 2
    assert all(isinstance(moves, int) for moves in record.cpu_moves)


def test_a_compiled_cuda_item_is_timed_in_eight_processes_by_default(pytester: pytest.Pytester) -> None:
    """With no timing flags a compiled CUDA item is timed eight times: in its own worker (the check's compile) and
    in seven more worker processes, the first load of each; the band is over the timings whose CPU ran at full
    speed where they are more than half (``process_counted``; Student's t over those kept), at least ±2%
    launch-bound (±1% bound by the GPU)."""
    from pytest_inductor_templates.student import band_units, t_975

    result = pytester.runpytest_subprocess(
        "--inductor-samples", "--inductor-template=default", "--inductor-devices=cuda:0", "-k", "launch_bound",
        "--inductor-results=run.jsonl", "-p", "no:cacheprovider", "-W", "ignore",
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    records = load(str(pytester.path / "run.jsonl")).records
    (record,) = [r for r in records if r.kind == "bench" and r.template == "default"]
    print(f"\ntimings {record.process_speedups}, counted {record.process_counted}, probes {record.process_probe_ms}")
    assert (record.timing_processes, record.timing_loads) == (8, 1)
    assert record.process_loads == [0] * 8 and record.process_pids is not None
    pids = record.process_pids
    assert pids[0] == record.pid and len(set(pids)) == 8, pids
    counted = record.process_counted
    assert counted is not None and len(counted) == 8 and (all(counted) or 2 * sum(counted) > 8), counted
    kept = [s for s, c in zip(record.process_speedups or [], counted, strict=True) if c]
    assert min(kept) <= record.speedup <= max(kept)
    assert record.band_quantile == pytest.approx(t_975(band_units(len(kept), 1)))
    floor = 0.02 if record.launch_bound else 0.01
    assert math.log(record.speedup_high / record.speedup) >= floor - 1e-9
    result.stdout.fnmatch_lines(["*timed in 8 processes (--inductor-timing-loads, --inductor-timing-processes)*"])
