"""Peak memory of building a GraphNet sample's inputs: drawn in chunks (the plugin) vs one float64 draw (before).

    python benchmarks/input_memory.py [--mib 512] [--repeats 3] [--dtype float32]

Each build runs in a fresh process, which reports its peak resident memory (ru_maxrss) above what it
held before building and the build's wall time; printed per repeat with the median and range, as a
multiple of the tensor's size, and written to $OUT/input_memory.txt when OUT is set.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHILD = """
import resource, sys, time, torch
from pytest_inductor_templates.samples.graphnet_meta import TensorMeta, rebuild
numel, dtype, how = int(sys.argv[1]), sys.argv[2], sys.argv[3]
meta = TensorMeta("x", (numel,), f"torch.{dtype}", mean=0.5, std=1.0, min_val=-3.0, max_val=3.0)
torch.empty(1)  # torch's own start-up memory counts in the baseline
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
generator = torch.Generator().manual_seed(0)
if how == "chunked":
    tensor = rebuild(meta, generator)
else:  # what rebuild did before: one float64 draw over the whole tensor, then its arithmetic
    values = torch.randn(meta.shape, generator=generator, dtype=torch.float64) * 1.0 * 0.2 + 0.5
    values = values.clamp(min=-3.0).clamp(max=3.0)
    values = torch.nan_to_num(values, nan=0.5, posinf=100.0, neginf=-100.0).clamp(-100.0, 100.0)
    tensor = values.to(getattr(torch, dtype))
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((peak - before) * 1024 / (tensor.numel() * tensor.element_size()), seconds)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=512, help="the tensor's size in MiB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    itemsize = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}[args.dtype]
    numel = args.mib * 1024 * 1024 // itemsize
    lines = [f"building one {args.mib} MiB {args.dtype} input ({numel} elements); peak above baseline / tensor size"]
    results: dict[str, list[tuple[float, float]]] = {"chunked": [], "one draw": []}
    for repeat in range(args.repeats):
        for how in results:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(numel), args.dtype, how.replace("one draw", "one")],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            ratio, seconds = (float(v) for v in done.stdout.split())
            results[how].append((ratio, seconds))
            lines.append(f"repeat {repeat + 1} {how:9} peak {ratio:5.2f}x the tensor, {seconds:6.2f} s")
            print(lines[-1], flush=True)
    for how, values in results.items():
        ratios, seconds = [v[0] for v in values], [v[1] for v in values]
        lines.append(
            f"{how:9} peak median {statistics.median(ratios):.2f}x (min {min(ratios):.2f}, max {max(ratios):.2f}); "
            f"time median {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f})"
        )
    print("\n".join(lines[-2:]))
    if out := os.environ.get("OUT"):
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "input_memory.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
