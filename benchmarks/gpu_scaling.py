"""Wall time of one corpus run on 1, 2, ... GPUs: one pytest-xdist worker per GPU, each GPU pinned to its worker.

    OUT=/tmp/scaling python benchmarks/gpu_scaling.py CORPUS [--gpus 1,2] [--templates default] [--repeats 1]
        [--limit N] [-- PYTEST ARGS]

For each GPU count G: ``pytest -n G`` with CUDA_VISIBLE_DEVICES set to the first G GPUs, so that each xdist
worker owns one GPU and the samples are shared out among them (every item names ``cuda:0``, its worker's
GPU). Every run starts from a cold Inductor and Triton cache of its own. Checks only (--benchmark-skip)
unless PYTEST ARGS say otherwise. --limit N takes the first N samples. Prints the wall time per run, the
median per GPU count and the speedup over one GPU; writes the same to $OUT/gpu_scaling.txt.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pytest_inductor_templates.samples.graphnet import discover


def run_once(corpus: str, gpus: int, templates: str, samples: list[str], extra: list[str]) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "no_tests").mkdir()
        listed = Path(tmp) / "samples.txt"
        listed.write_text("\n".join(samples) + "\n")
        env = dict(
            os.environ,
            CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(gpus)),
            TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor",
            TRITON_CACHE_DIR=f"{tmp}/triton",
        )
        command = [
            sys.executable, "-m", "pytest", f"{tmp}/no_tests", "-c", "/dev/null", "-q", "-p", "no:cacheprovider",
            "-W", "ignore", "-n", str(gpus), f"--inductor-samples={corpus}", f"--inductor-sample-list={listed}",
            f"--inductor-template={templates}", *(extra or ["--benchmark-skip"]),
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        wall = time.perf_counter() - start
    return wall, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--gpus", default="1,2")
    parser.add_argument("--templates", default="default")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None)
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    samples = discover(Path(args.corpus))[: args.limit]
    counts = [int(g) for g in args.gpus.split(",")]
    lines = [
        f"{len(samples)} samples of {args.corpus}, templates {args.templates}, cold caches, {args.repeats} repeats"
    ]
    walls: dict[int, list[float]] = {g: [] for g in counts}
    for repeat in range(args.repeats):
        for gpus in counts:
            wall, summary = run_once(args.corpus, gpus, args.templates, samples, extra)
            walls[gpus].append(wall)
            lines.append(f"repeat {repeat + 1}: {gpus} GPU(s) {wall:7.1f} s   {summary}")
            print(lines[-1], flush=True)
    base = statistics.median(walls[counts[0]])
    for gpus in counts:
        w = walls[gpus]
        lines.append(
            f"{gpus} GPU(s): median {statistics.median(w):.1f} s (min {min(w):.1f}, max {max(w):.1f}); "
            f"{base / statistics.median(w):.2f}x the speed of {counts[0]} GPU(s)"
        )
    print("\n".join(lines[-len(counts) :]))
    if out := os.environ.get("OUT"):
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "gpu_scaling.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
