"""Timing fidelity on a GPU: the plugin's medians against the references (DESIGN.md section 6).

- GEMM-bound: a bf16 4096x4096x4096 matmul under the default template, timed by the plugin
  (``inductor_benchmark``), against ``triton.testing.do_bench`` on the same compiled computation. Target: 5%.
- Launch-bound: the built-in ``launch_bound`` model under the cudagraphs template, timed by the plugin, against
  ``torch.utils.benchmark.Timer.blocked_autorange``. Target: 10%.
Each reference runs inside the same test, right after the plugin's timing, so both see the GPU in the same state
(its clock falls under sustained load). Usage (GPU machine): python benchmarks/timing_fidelity.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

TESTS = """
import json
import os

import pytest
import torch
from torch.utils.benchmark import Timer
from triton.testing import do_bench

from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES


def record(name, seconds):
    with open(os.environ["FIDELITY_REFERENCES"], "a") as out:
        out.write(json.dumps({"name": name, "seconds": seconds}) + "\\n")


class MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


@pytest.mark.inductor_templates("default")
def test_gemm(inductor_benchmark):
    torch.manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    reference = torch.compile(MatMul())
    reference(a, b)
    inductor_benchmark(MatMul(), a, b)
    record("gemm", do_bench(lambda: reference(a, b), return_mode="median") / 1e3)


@pytest.mark.inductor_templates("cudagraphs")
def test_launch_bound(inductor_benchmark):
    sample = next(s for s in BUILTIN_SAMPLES if s.id == "builtin/launch_bound")
    device = torch.device("cuda")
    args = sample.make_inputs(device)[0].args
    reference = torch.compile(sample.make_model(device), options={"triton.cudagraphs": True})
    with torch.no_grad():
        for _ in range(5):
            reference(*args)
        inductor_benchmark(sample.make_model(device), *args)
        timer = Timer("reference(*args)", globals={"reference": reference, "args": args})
        record("launch_bound", timer.blocked_autorange(min_run_time=1).median)
"""


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
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}; SM clock, power now: {sm_clock()}")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_fidelity.py").write_text(TESTS)
        references = Path(tmp, "references.jsonl")
        out = Path(tmp, "run.json")
        os.environ["FIDELITY_REFERENCES"] = str(references)
        code = pytest.main(
            [tmp, "-q", "-p", "no:cacheprovider", "-W", "ignore", "-c", "/dev/null", f"--rootdir={tmp}",
             "--inductor-devices=cuda", f"--benchmark-json={out}"]
        )  # fmt: skip
        if code != 0:
            print(f"the plugin's run failed (exit code {code})")
            return 1
        entries = {b["name"]: b for b in json.loads(out.read_text())["benchmarks"]}
        measured = {r["name"]: r["seconds"] for r in map(json.loads, references.read_text().splitlines())}
    print(f"SM clock, power after the run: {sm_clock()}")
    gemm = next(e for n, e in entries.items() if n.startswith("test_gemm"))
    launch = next(e for n, e in entries.items() if n.startswith("test_launch_bound"))
    ok = report("GEMM-bound (default)", gemm["stats"]["median"], measured["gemm"], "do_bench", 0.05)
    print(f"  plugin device time (CUDA events) {gemm['extra_info']['device_time_ms'] * 1e3:.2f} us")
    ok &= report("launch-bound (cudagraphs)", launch["stats"]["median"], measured["launch_bound"], "Timer", 0.10)
    info = launch["extra_info"]
    print(
        f"  plugin device time {info['device_time_ms'] * 1e3:.2f} us; eager median {info['eager_median'] * 1e6:.2f} us;"
        f" speedup {info['speedup']:.2f}x; effect: {info.get('effect_evidence')}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
