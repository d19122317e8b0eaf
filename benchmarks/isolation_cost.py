"""What process isolation costs: the same sample run with --inductor-isolation=none and =process, alternated.

    python benchmarks/isolation_cost.py CORPUS [--repeats 3] [--templates default] [--devices cpu] [--limit N]
        [-- PYTEST ARGS]

Each repeat runs both modes back to back in fresh pytest processes (alternating which goes first), with a
cold Inductor cache each time (its own TORCHINDUCTOR_CACHE_DIR), checks only (--benchmark-skip) unless
PYTEST ARGS say otherwise; --limit N takes the first N samples. Prints each wall time, the median and
range per mode, the ratio of medians and the per-repeat ratios, and writes the same to
$OUT/isolation_cost.txt when OUT is set. The target: isolated <= 1.25x in-process.
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

MODES = ("none", "process")


def run_once(corpus: str, mode: str, templates: str, devices: str, extra: list[str]) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "no_tests").mkdir()
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=f"{tmp}/inductor", TRITON_CACHE_DIR=f"{tmp}/triton")
        command = [
            sys.executable, "-m", "pytest", f"{tmp}/no_tests", "-c", "/dev/null", "-q", "-p", "no:cacheprovider",
            "-W", "ignore", f"--inductor-samples={corpus}", f"--inductor-template={templates}",
            f"--inductor-devices={devices}", f"--inductor-isolation={mode}", *(extra or ["--benchmark-skip"]),
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        wall = time.perf_counter() - start
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
    return wall, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--templates", default="default")
    parser.add_argument("--devices", default="cpu")
    parser.add_argument("--limit", type=int, default=None)
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    if args.limit is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from pytest_inductor_templates.samples.graphnet import discover

        listed = Path(tempfile.mkdtemp()) / "samples.txt"
        listed.write_text("\n".join(discover(Path(args.corpus))[: args.limit]) + "\n")
        extra = [*(extra or ["--benchmark-skip"]), f"--inductor-sample-list={listed}"]
    walls: dict[str, list[float]] = {mode: [] for mode in MODES}
    lines = [
        f"isolation cost: {args.corpus}, templates {args.templates}, devices {args.devices}, {args.repeats} repeats"
    ]
    for repeat in range(args.repeats):
        order = MODES if repeat % 2 == 0 else MODES[::-1]
        for mode in order:
            wall, summary = run_once(args.corpus, mode, args.templates, args.devices, extra)
            walls[mode].append(wall)
            lines.append(f"repeat {repeat + 1} isolation={mode:7} {wall:7.1f} s   {summary}")
            print(lines[-1], flush=True)
    for mode in MODES:
        w = walls[mode]
        lines.append(f"isolation={mode:7} median {statistics.median(w):7.1f} s  (min {min(w):.1f}, max {max(w):.1f})")
    ratios = [p / n for p, n in zip(walls["process"], walls["none"], strict=True)]
    lines.append(
        f"process / none: ratio of medians {statistics.median(walls['process']) / statistics.median(walls['none']):.3f}"
        f"; per repeat {', '.join(f'{r:.3f}' for r in ratios)} (target <= 1.25)"
    )
    print("\n".join(lines[-3:]))
    if out := os.environ.get("OUT"):
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "isolation_cost.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
