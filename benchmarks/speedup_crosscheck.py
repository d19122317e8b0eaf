"""An independent check of the plugin's speedup table: built-in samples timed with plain ``torch.compile`` and
``torch.utils.benchmark.Timer`` (no plugin code in the timed path).

Usage (GPU machine): python benchmarks/speedup_crosscheck.py [SAMPLE ...]   (default: a few built-ins)
Prints, per sample, eager and compiled medians under default and CUDA graphs, and the speedups over eager.
"""

from __future__ import annotations

import sys

import torch
from torch.utils.benchmark import Timer

from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES

OPTIONS = {"default": None, "cudagraphs": {"triton.cudagraphs": True}}


def median_us(model: torch.nn.Module, args: tuple) -> float:
    with torch.no_grad():
        for _ in range(10):
            model(*args)
        timer = Timer("model(*args)", globals={"model": model, "args": args})
        return timer.blocked_autorange(min_run_time=1).median * 1e6


def main(names: list[str]) -> int:
    device = torch.device("cuda")
    for name in names:
        sample = next(s for s in BUILTIN_SAMPLES if s.name == name)
        args = sample.make_inputs(device)[0].args
        eager = median_us(sample.make_model(device), args)
        line = [f"{sample.id} ({sample.dtype}): eager {eager:.1f} us"]
        for label, options in OPTIONS.items():
            torch._dynamo.reset()
            compiled = median_us(torch.compile(sample.make_model(device), options=options), args)
            line.append(f"{label} {compiled:.1f} us ({eager / compiled:.2f}x)")
        print("; ".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["launch_bound", "gemm_fp16", "gemm_bf16", "attention"]))
