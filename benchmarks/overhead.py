"""Plugin overhead per call: a tiny compiled model through ``compiled_model`` versus the raw ``torch.compile``
result (CPU, default template, CUDA graphs off). Target: ratio <= 1.02.

Runs a real pytest session whose test interleaves blocks of calls of both (so drift hits both alike) and
prints the medians, the ratio, and the same for the path bench items time (``CompiledModel.steady()``).
Usage: python benchmarks/overhead.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

TEST = """
import copy
import statistics
import sys
import time

import torch

CALLS, BLOCKS = 2000, 41


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.relu(self.fc(x)) + 1


def per_call(fn, x):
    start = time.perf_counter()
    for _ in range(CALLS):
        fn(x)
    return (time.perf_counter() - start) / CALLS


def test_overhead(compiled_model):
    torch.manual_seed(0)
    model, x = Tiny().eval(), torch.randn(4, 16)
    ours = compiled_model(copy.deepcopy(model))
    raw = torch.compile(copy.deepcopy(model))
    with torch.no_grad():
        ours(x), raw(x)
        steady = ours.steady()
        paths = {"compiled_model": ours, "raw torch.compile": raw, "steady (timed path)": steady}
        for fn in paths.values():
            per_call(fn, x)
        times = {name: [] for name in paths}
        for _ in range(BLOCKS):
            for name, fn in paths.items():
                times[name].append(per_call(fn, x))
    medians = {name: statistics.median(values) for name, values in times.items()}
    out = sys.stdout
    for name, median in medians.items():
        print(f"{name:22} {median * 1e6:8.2f} us per call (median of {BLOCKS} blocks of {CALLS})", file=out)
    raw_median = medians["raw torch.compile"]
    print(f"ratio compiled_model / raw: {medians['compiled_model'] / raw_median:.4f} (target <= 1.02)", file=out)
    print(f"ratio steady / raw:         {medians['steady (timed path)'] / raw_median:.4f}", file=out)
"""


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_overhead.py").write_text(TEST)
        return int(
            pytest.main(
                [
                    tmp,
                    "-q",
                    "-s",
                    "-p",
                    "no:cacheprovider",
                    "--inductor-template=default",
                    "--inductor-devices=cpu",
                    "-W",
                    "ignore::DeprecationWarning",
                    "-c",
                    "/dev/null",
                ]
            )
        )


if __name__ == "__main__":
    sys.exit(main())
