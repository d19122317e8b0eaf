"""Wall time of one corpus run on 1, 2, ... GPUs: one pytest-xdist worker per GPU, each GPU pinned to its worker.

    OUT=/tmp/scaling python benchmarks/gpu_scaling.py CORPUS [--gpus 1,2] [--templates default,cudagraphs]
        [--repeats 1] [--limit N] [-- PYTEST ARGS]

For each GPU count G: ``pytest -n G`` with CUDA_VISIBLE_DEVICES set to the first G GPUs, so that each xdist
worker owns one GPU and the samples are shared out among them (every item names ``cuda:0``, its worker's
GPU), under eager and the templates, checked and timed in pairs (``--benchmark-max-time=0.25`` unless
PYTEST ARGS say otherwise). Every run starts from a cold Inductor and Triton cache of its own and writes a
results file ($OUT/scaling-Ggpu-rR.jsonl). --limit N takes N samples spread evenly over the corpus.

Prints, and writes to $OUT/gpu_scaling.md: the wall time per GPU count, the speedup over the first count and
the scaling efficiency (T1 / (G x TG)); how many items ended with an outcome; and whether each speedup
measured with G workers agrees with the first count's (their 95% intervals overlap), with the outliers.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.runs.files import Run, RunError, load
from pytest_inductor_templates.samples.graphnet import discover
from pytest_inductor_templates.tables import render, speedup_text

DEFAULT_TIMING = ["--benchmark-max-time=0.25"]


def spread(samples: list[str], limit: int | None) -> list[str]:
    """``limit`` samples spread evenly over ``samples`` (all of them without a limit)."""
    if limit is None or limit >= len(samples):
        return samples
    step = len(samples) / limit
    return [samples[int(i * step)] for i in range(limit)]


def run_once(
    corpus: str, gpus: int, templates: str, samples: list[str], extra: list[str], results: Path
) -> tuple[float, str]:
    """One pytest run on the first ``gpus`` GPUs: its wall time and pytest's last line."""
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
            f"--inductor-template={templates}", f"--inductor-results={results}", *(extra or DEFAULT_TIMING),
        ]  # fmt: skip
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        wall = time.perf_counter() - start
        (results.parent / f"{results.stem}.txt").write_text(done.stdout + done.stderr)
    return wall, done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]


def overlap(a: ItemRecord, b: ItemRecord) -> bool:
    """Whether the speedups' 95% intervals overlap."""
    assert a.speedup is not None and b.speedup is not None
    low_a, high_a = a.speedup_low or a.speedup, a.speedup_high or a.speedup
    low_b, high_b = b.speedup_low or b.speedup, b.speedup_high or b.speedup
    return low_a <= high_b and low_b <= high_a


def agreement(base: Run, other: Run) -> tuple[int, int, list[list[str]]]:
    """(speedups whose intervals overlap, speedups in both runs, a row for each that does not)."""
    timed = {r.key: r for r in base.records if r.kind == "bench" and r.speedup is not None}
    agree, both, rows = 0, 0, []
    for record in other.records:
        first = timed.get(record.key)
        if record.kind != "bench" or record.speedup is None or first is None:
            continue
        both += 1
        if overlap(first, record):
            agree += 1
        else:
            rows.append(["/".join(record.key), speedup_text(first), speedup_text(record)])
    return agree, both, rows


def ended(run: Run) -> tuple[int, int]:
    """(items with an outcome, items) of a run."""
    return sum(1 for r in run.records if r.outcome is not None), len(run.records)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--gpus", default="1,2")
    parser.add_argument("--templates", default="default,cudagraphs")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None)
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    out = Path(os.environ.get("OUT", tempfile.mkdtemp(prefix="gpu-scaling-")))
    out.mkdir(parents=True, exist_ok=True)
    samples = spread(discover(Path(args.corpus)), args.limit)
    counts = [int(g) for g in args.gpus.split(",")]
    walls: dict[int, list[float]] = {g: [] for g in counts}
    runs: dict[int, list[Run]] = {g: [] for g in counts}
    log = []
    for repeat in range(args.repeats):
        for gpus in counts:
            results = out / f"scaling-{gpus}gpu-r{repeat + 1}.jsonl"
            wall, summary = run_once(args.corpus, gpus, args.templates, samples, extra, results)
            walls[gpus].append(wall)
            try:
                runs[gpus].append(load(str(results)))
            except RunError as error:
                summary += f" (no results: {error})"
            log.append(f"repeat {repeat + 1}: {gpus} GPU(s) {wall:7.1f} s   {summary}")
            print(log[-1], flush=True)
    import torch

    base = statistics.median(walls[counts[0]])
    rows = []
    for gpus in counts:
        median = statistics.median(walls[gpus])
        done = [ended(run) for run in runs[gpus]]
        agree = [agreement(runs[counts[0]][0], run) for run in runs[gpus]] if runs[counts[0]] else []
        rows.append(
            [
                str(gpus),
                f"{median:.0f} s" + (f" ({min(walls[gpus]):.0f}-{max(walls[gpus]):.0f})" if args.repeats > 1 else ""),
                f"{base / median:.2f}x",
                f"{base * counts[0] / (gpus * median):.2f}",
                ", ".join(f"{a} of {n}" for a, n in done) or "no results file",
                "-" if gpus == counts[0] else ", ".join(f"{a} of {n}" for a, n, _ in agree) or "-",
            ]
        )
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "CPU"
    lines = [  # the table first, then what ran
        *render(
            ["GPUs", "wall time", "speed", "efficiency", "items with an outcome", "speedups agreeing with 1 GPU"],
            rows,
            markdown=True,
        ),
        "",
        f"{len(samples)} samples of the corpus spread evenly over it, eager + {args.templates}, checked and timed in "
        f"pairs ({' '.join(extra or DEFAULT_TIMING)}), one xdist worker per GPU, cold caches, {args.repeats} "
        f"repeat(s); {name}, {os.cpu_count()} CPUs, torch {torch.__version__}, {date.today()}.",
    ]
    for gpus in counts[1:]:
        for run in runs[gpus]:
            _, _, differ = agreement(runs[counts[0]][0], run) if runs[counts[0]] else (0, 0, [])
            if differ:
                lines += ["", f"Speedups whose intervals do not overlap ({counts[0]} vs {gpus} GPUs):", ""]
                lines += render(["item", f"{counts[0]} GPU(s)", f"{gpus} GPUs"], differ, markdown=True)
    text = "\n".join(lines)
    print(text)
    (out / "gpu_scaling.md").write_text("\n".join(log) + "\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
