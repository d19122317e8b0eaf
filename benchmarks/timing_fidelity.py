"""Timing fidelity on a GPU: the plugin's medians against the references (DESIGN.md section 6).

- GEMM-bound: a bf16 4096x4096x4096 matmul under the default template, timed by the plugin
  (``inductor_benchmark``), against ``triton.testing.do_bench`` on the same compiled function, run right
  after the plugin's timing (the GPU's clock falls under sustained load: the same reference after 5 s idle
  is printed beside). Target: within 5%.
- Launch-bound: the built-in ``launch_bound`` sample under the cudagraphs template, timed by the plugin
  (a bench item), against ``torch.utils.benchmark.Timer.blocked_autorange``. Target: within 10%.
Usage (GPU machine): python benchmarks/timing_fidelity.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

GEMM_TEST = """
import torch


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def test_gemm(inductor_benchmark):
    torch.manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    inductor_benchmark(MatMul(), a, b)
"""
COMMON = ("--inductor-devices=cuda", "-p", "no:cacheprovider", "-q", "-W", "ignore", "-c", "/dev/null")


def plugin_run(tmp: str, name: str, *args: str) -> list[dict]:
    """A real pytest session, in this process, so the references below run in the GPU's state right after it."""
    out = Path(tmp, f"{name}.json")
    code = pytest.main([*args, *COMMON, f"--rootdir={tmp}", f"--benchmark-json={out}"])
    if code != 0:
        raise SystemExit(f"the {name} run failed with exit code {code}")
    return json.loads(out.read_text())["benchmarks"]


def report(what: str, plugin_s: float, reference_s: float, reference: str, target: float) -> bool:
    ratio = plugin_s / reference_s
    ok = abs(ratio - 1) <= target
    print(
        f"{what}: plugin median {plugin_s * 1e6:.2f} us, {reference} {reference_s * 1e6:.2f} us, "
        f"ratio {ratio:.4f} (target within {target:.0%}): {'OK' if ok else 'MISSED'}"
    )
    return ok


def sm_clock() -> str:
    query = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader"]
    return subprocess.run(query, capture_output=True, text=True, check=False).stdout.strip()


def main() -> int:
    from torch.utils.benchmark import Timer
    from triton.testing import do_bench

    from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES

    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}")
    torch.manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    matmul = torch.compile(lambda a, b: a @ b)  # compiled before the run: measured right after it
    matmul(a, b)
    sample = next(s for s in BUILTIN_SAMPLES if s.id == "builtin/launch_bound")
    device = torch.device("cuda")
    model, (inputs, *_) = sample.make_model(device), sample.make_inputs(device)
    launch_bound = torch.compile(model, options={"triton.cudagraphs": True})
    with torch.no_grad():
        for _ in range(5):
            launch_bound(*inputs.args)

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_gemm.py").write_text(GEMM_TEST)
        (gemm,) = plugin_run(tmp, "gemm", str(Path(tmp, "test_gemm.py")), "--inductor-template=default")
        print(f"SM clock and power right after the plugin's timing: {sm_clock()}")
        matched = do_bench(lambda: matmul(a, b), return_mode="median") / 1e3
        time.sleep(5)
        cold = do_bench(lambda: matmul(a, b), return_mode="median") / 1e3
        print(f"SM clock and power after 5 s idle: {sm_clock()}")
        ok = report("GEMM-bound (default)", gemm["stats"]["median"], matched, "do_bench right after", 0.05)
        report("GEMM-bound (default)", gemm["stats"]["median"], cold, "do_bench after 5 s idle", 0.05)
        print(f"  plugin device time (CUDA events) {gemm['extra_info']['device_time_ms'] * 1e3:.2f} us")

        launch = plugin_run(tmp, "launch", "--inductor-samples", "--inductor-template=cudagraphs", "-k", "launch_bound")
        with torch.no_grad():
            timer = Timer("compiled(*args)", globals={"compiled": launch_bound, "args": inputs.args})
            reference = timer.blocked_autorange(min_run_time=2).median
    entry = next(e for e in launch if e["extra_info"]["template"] == "cudagraphs")
    eager = next(e for e in launch if e["extra_info"]["template"] == "eager")
    ok &= report("launch-bound (cudagraphs)", entry["stats"]["median"], reference, "Timer.blocked_autorange", 0.10)
    print(
        f"  plugin device time {entry['extra_info']['device_time_ms'] * 1e3:.2f} us; eager median "
        f"{eager['stats']['median'] * 1e6:.2f} us; speedup {entry['extra_info']['speedup']:.2f}x"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
