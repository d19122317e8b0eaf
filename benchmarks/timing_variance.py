"""Where a speedup's variance sits: between rounds, between stretches of one process, between processes.

For each sample, --processes fresh interpreters one after another, sharing one Inductor and Triton cache of their own
(the first compiles cold, the others warm: the same compiled code and autotune choices). Each builds the sample
(weights as parameters, as the plugin binds them), compiles it under ``default``, and times it --stretches times in a
row with the plugin's own timing (``timing.measure.measure``, the default plan the items get: paired rounds with a
fresh eager model, 2-4 s on CUDA), each a *stretch*; with --pin CPUS, stretch e runs pinned to the e-th CPU of the
list (cycling), else where the scheduler puts it. Then, per sample, over the log speedups:

- within a stretch: the median half-width of the stretches' 95% bands (what the plugin prints);
- between stretches of one process: the standard deviation of stretch speedups around their process's mean;
- between processes: the standard deviation of the process means, less what the stretches alone explain
  (one-way random effects: var(means) - var(stretches) / stretches, floored at 0);
- how many later stretches lie outside the band of their process's first stretch, and how many later processes'
  first stretches lie outside the band of the first process's first stretch (a repeat in another process). With no
  variance beyond the rounds, about 17% of either land outside (two estimates, each with its own error:
  P(|Z| > 1.96 / sqrt 2)); the summary prints that baseline beside the counts.

The largest of the three is where repetitions belong: more rounds narrow the first, longer spans in one process the
second, only timings in other processes the third.

    OUT=/tmp/variance python benchmarks/timing_variance.py CORPUS [--samples A,B,...] [--processes 4]
        [--stretches 4] [--pin 2,7,12] [--device cuda]

Writes stretches.jsonl (one line per stretch) and summary.txt under $OUT.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_SAMPLES = (
    "mmseg/PoolFormer_s12,torchgeometric/GAT,transformers-auto-model/LiheYoung_depth-anything-large-hf,"
    "torchvision/squeezenet1_0,torchvision/resnet50"
)


def child(corpus: Path, relative: str, device_name: str, stretches: int, pin: list[int]) -> None:
    """One process: build, compile, time ``stretches`` times; a JSON line per stretch on stdout."""
    import torch

    from pytest_inductor_templates.samples.graphnet import GraphNetSample
    from pytest_inductor_templates.timing.measure import TimingPlan, measure
    from pytest_inductor_templates.timing.rounds import RoundsPlan
    from pytest_inductor_templates.timing.timers import CUDA_MIN_ROUND_SECONDS, cuda_synchronized_perf_counter

    device = torch.device(device_name)
    sample = GraphNetSample(corpus, relative)
    inputs = sample.make_inputs(device)[0]
    compiled = torch.compile(sample.make_model(device))
    eager = sample.make_model(device)  # a fresh eager model, as the plugin's paired rounds use

    def call(model: object) -> object:
        with torch.no_grad():
            return model(*inputs.args, **inputs.kwargs)  # type: ignore[operator]

    started = time.perf_counter()
    call(compiled)
    compile_seconds = time.perf_counter() - started
    # what the plugin's items get (integrations.benchmark.mark_timing over pytest-benchmark's defaults): on CUDA the
    # synchronizing timer and rounds of at least 5 ms; on the CPU (a dry run here) one thread and the CPU time
    cuda = device.type == "cuda"
    if not cuda:
        torch.set_num_threads(1)
    timer = cuda_synchronized_perf_counter if cuda else time.process_time
    plan = TimingPlan(
        RoundsPlan(timer=timer, min_time=CUDA_MIN_ROUND_SECONDS if cuda else 0.000005, max_time=1.0, min_rounds=5)
    )
    for stretch in range(stretches):
        if pin:
            os.sched_setaffinity(0, {pin[stretch % len(pin)]})
        timing = measure(lambda: call(compiled), lambda: call(eager), cuda, plan)
        assert timing.paired is not None
        speedup = timing.paired.speedup
        print(json.dumps({
            "stretch": stretch, "cpu": pin[stretch % len(pin)] if pin else None, "speedup": speedup.median,
            "low": speedup.low, "high": speedup.high, "of": timing.paired.speedup_of,
            "all_rounds": timing.paired.all_rounds.median, "rounds": timing.paired.rounds,
            "launch_bound": timing.launch_bound, "seconds": timing.seconds, "compile_seconds": compile_seconds,
        }), flush=True)  # fmt: skip


def decompose(rows: list[dict]) -> dict[str, float | int]:
    """The three levels' spreads (relative, from log speedups) and the coverage counts, for one sample's rows.

    One-way random effects over processes: the spread of stretches around their process's mean, less what each
    stretch's own rounds explain (its band's standard error, half-width / 1.96), is the stretches' own; the spread
    of the process means, less what the stretches explain (their mean square / n0, n0 the usual size for unequal
    groups), is the processes'. Each is floored at 0."""
    by_process: dict[int, list[dict]] = {}
    for row in rows:
        by_process.setdefault(row["process"], []).append(row)
    logs = {p: [math.log(r["speedup"]) for r in rs] for p, rs in by_process.items()}
    means = {p: statistics.fmean(v) for p, v in logs.items()}
    residuals = [x - means[p] for p, v in logs.items() for x in v]
    total = len(residuals)
    within_ms = sum(r * r for r in residuals) / max(total - len(logs), 1)
    half_widths = [(r["high"] - r["low"]) / 2 / r["speedup"] for r in rows]
    rounds_var = statistics.fmean((w / 1.96) ** 2 for w in half_widths)
    n0 = (total - sum(len(v) ** 2 for v in logs.values()) / total) / max(len(logs) - 1, 1)
    between_var = statistics.variance(means.values()) - within_ms / n0 if len(means) > 1 else 0.0
    first = {p: rs[0] for p, rs in by_process.items()}
    outside_stretch = sum(
        not (first[r["process"]]["low"] <= r["speedup"] <= first[r["process"]]["high"])
        for r in rows if r["stretch"] > 0
    )  # fmt: skip
    base = first[min(first)]
    outside_process = sum(
        not (base["low"] <= r["speedup"] <= base["high"]) for p, r in first.items() if p != min(first)
    )  # fmt: skip
    return {
        "band": statistics.median(half_widths),
        "stretch_sd": math.sqrt(max(within_ms - rounds_var, 0.0)),
        "process_sd": math.sqrt(max(between_var, 0.0)),
        "outside_stretch": outside_stretch,
        "later_stretches": sum(r["stretch"] > 0 for r in rows),
        "outside_process": outside_process,
        "later_processes": len(means) - 1,
    }


def where(d: dict[str, float | int]) -> str:
    levels = {"rounds (the band)": d["band"] / 1.96, "stretches": d["stretch_sd"], "processes": d["process_sd"]}
    return max(levels, key=lambda level: levels[level])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--samples", default=DEFAULT_SAMPLES, help="comma-separated sample directories")
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--stretches", type=int, default=4)
    parser.add_argument("--pin", default="", help="comma-separated CPUs the stretches are pinned to, in turn")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    pin = [int(c) for c in args.pin.split(",") if c]
    corpus = args.corpus.resolve()
    if args.child:
        child(corpus, args.child, args.device, args.stretches, pin)
        return 0
    out = Path(os.environ.get("OUT") or "timing-variance").resolve()
    out.mkdir(parents=True, exist_ok=True)
    caches = Path(tempfile.mkdtemp(prefix="variance-caches-", dir=out))
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(caches / "inductor"),
        "TRITON_CACHE_DIR": str(caches / "triton"),
    }
    lines = [
        f"{args.processes} processes x {args.stretches} stretches per sample, device {args.device}, pin {pin or 'none'}"
    ]
    with (out / "stretches.jsonl").open("w") as log:
        for relative in [s for s in args.samples.split(",") if s]:
            mine: list[dict] = []
            for process in range(args.processes):
                command = [sys.executable, __file__, str(corpus), "--child", relative, "--device", args.device,
                           "--stretches", str(args.stretches), "--pin", args.pin]  # fmt: skip
                done = subprocess.run(command, env=env, capture_output=True, text=True)
                if done.returncode != 0:
                    lines.append(
                        f"{relative}: process {process} exited {done.returncode}: {done.stderr.strip()[-300:]}"
                    )
                    break
                for text in done.stdout.splitlines():
                    if text.startswith("{"):
                        row = {"sample": relative, "process": process, **json.loads(text)}
                        mine.append(row)
                        log.write(json.dumps(row) + "\n")
                print(f"{relative}: process {process}: " + ", ".join(f"{r['speedup']:.3f}" for r in mine
                      if r["process"] == process), flush=True)  # fmt: skip
            if len({r["process"] for r in mine}) < 2:
                continue
            d = decompose(mine)
            lines.append(
                f"{relative}: band ±{d['band']:.1%} (median), between stretches sd {d['stretch_sd']:.1%}, between "
                f"processes sd {d['process_sd']:.1%}: most at the level of {where(d)}; stretches outside their "
                f"process's first band {d['outside_stretch']} of {d['later_stretches']}, later processes outside "
                f"the first process's first band {d['outside_process']} of {d['later_processes']} (about 17% of "
                "either with no variance beyond the rounds)"
            )
    text = "\n".join(lines)
    print(text)
    (out / "summary.txt").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
