"""Paired timings that follow a CPU at full speed against timings that stay put: which spread less?

For each sample, PROCESSES fresh processes one after another (the first compiles cold, the others from its cache);
each builds the sample, compiles it with the default template and times it with the plugin's paired rounds
(``time_paired``, 5 ms blocks) TIMINGS times each way, alternating: staying where the scheduler puts the thread,
then following a CPU at full speed (``timing.fast_cpu``), with a pause between timings so that the CPUs' speed
states move on. Each timing spans SECONDS (one process's share of an item's span at eight processes). Per sample
and way: each timing's speedup, the spread between them (the sd of their logs), their median probe over the
fastest probe seen, and the rounds that moved.

Usage (H200): OUT=/tmp/follow python benchmarks/probes/cpu_follow.py CORPUS SAMPLE [SAMPLE ...]
"""

from __future__ import annotations

import functools
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROCESSES = int(os.environ.get("FOLLOW_PROCESSES", "2"))
TIMINGS = int(os.environ.get("FOLLOW_TIMINGS", "3"))
SECONDS = float(os.environ.get("FOLLOW_SECONDS", "0.5"))
PAUSE = 1.0


def one_process(corpus: Path, relative: str) -> list[dict[str, Any]]:
    import torch

    from pytest_inductor_templates.cpu_speed import loop_ms
    from pytest_inductor_templates.engine.triples import call_without_grad
    from pytest_inductor_templates.samples.graphnet import GraphNetSample
    from pytest_inductor_templates.timing.fast_cpu import following
    from pytest_inductor_templates.timing.paired import PROBE_LOOP, PairedPlan, time_paired
    from pytest_inductor_templates.timing.timers import block_timer, cuda_synchronized_perf_counter, warm_up

    sample, device = GraphNetSample(corpus, relative), torch.device("cuda")
    inputs = sample.make_inputs(device)[0]
    eager = functools.partial(call_without_grad, sample.make_model(device), inputs)
    compiled = functools.partial(call_without_grad, torch.compile(sample.make_model(device)), inputs)
    warm_up(eager, torch.cuda.synchronize)
    warm_up(compiled, torch.cuda.synchronize)
    timer = block_timer(cuda_synchronized_perf_counter, True)
    plan = PairedPlan(block_seconds=0.005, min_rounds=10, max_seconds=SECONDS, target=0.0, min_seconds=SECONDS)
    runs = []
    for _ in range(TIMINGS):
        for way in ("stay", "follow"):
            time.sleep(PAUSE)
            if way == "stay":
                timing = time_paired(eager, compiled, timer, plan)
            else:
                with following(functools.partial(loop_ms, PROBE_LOOP)) as follow:
                    timing = time_paired(eager, compiled, timer, plan, follow=follow)
            runs.append({"way": way, "pid": os.getpid(), "speedup": timing.speedup.median,
                         "all_rounds": timing.all_rounds.median, "probes": timing.probes,
                         "moves": timing.cpu_moves, "rounds": timing.rounds})  # fmt: skip
    return runs


def summary(relative: str, runs: list[dict[str, Any]]) -> list[str]:
    fastest = min(p for run in runs for p in run["probes"])
    lines = [f"== {relative} (fastest probe {fastest:.4f} ms)"]
    for way in ("stay", "follow"):
        mine = [run for run in runs if run["way"] == way]
        logs = [math.log(run["all_rounds"]) for run in mine]
        probes = [statistics.median(run["probes"]) / fastest for run in mine]
        figures = " ".join(f"{run['all_rounds']:.3f}" for run in mine)
        moves = [run["moves"] for run in mine if run["moves"] is not None]
        lines.append(
            f"  {way:6} geomean {math.exp(statistics.fmean(logs)):.3f} sd {spread(runs, way):.1%} | {figures} | "
            f"median probe / fastest {statistics.median(probes):.2f} (max {max(probes):.2f})"
            + (f" | moves {sum(moves)} of {sum(run['rounds'] for run in mine)} rounds" if moves else "")
        )
    return lines


def main() -> int:
    if sys.argv[1] == "--one":
        print(json.dumps(one_process(Path(sys.argv[2]), sys.argv[3])))
        return 0
    corpus, out = Path(sys.argv[1]).resolve(), Path(os.environ.get("OUT", "cpu-follow"))
    out.mkdir(parents=True, exist_ok=True)
    kept: dict[str, list[dict[str, Any]]] = {}
    for relative in sys.argv[2:]:
        runs: list[dict[str, Any]] = []
        for _ in range(PROCESSES):
            done = subprocess.run(
                [sys.executable, __file__, "--one", str(corpus), relative], capture_output=True, text=True
            )
            if done.returncode != 0:
                print(f"{relative}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            runs.extend(json.loads(done.stdout.strip().splitlines()[-1]))
        kept[relative] = runs
        (out / "follow.json").write_text(json.dumps(kept))
        if runs:
            print(*summary(relative, runs), sep="\n", flush=True)
    for way in ("stay", "follow"):
        spreads = [spread(runs, way) for runs in kept.values() if runs]
        if spreads:
            print(f"{way}: sd between timings, median over samples {statistics.median(spreads):.1%}, largest "
                  f"{max(spreads):.1%}")  # fmt: skip
    return 0


def spread(runs: list[dict[str, Any]], way: str) -> float:
    """The sd of the logs of ``way``'s timings' all-rounds speedups."""
    logs = [math.log(run["all_rounds"]) for run in runs if run["way"] == way]
    return statistics.stdev(logs) if len(logs) > 1 else 0.0


if __name__ == "__main__":
    sys.exit(main())
