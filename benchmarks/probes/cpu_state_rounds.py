"""Each paired round's CPU-speed probe beside its eager and compiled times: how a speedup moves with the CPU's speed.

For each sample, in one process: an eager model and one compiled with the default template, then six of the plugin's
paired timings of 2 s each (5 ms blocks), every round's probe kept. Each timing's rounds are grouped by their probe
over the fastest probe of all the sample's timings (under 1.15x, 1.3x, 1.6x, beyond): the rounds, their median ratio,
eager's and compiled's ms per call. The rounds go to $OUT/rounds.json.

Usage (H200): OUT=/tmp/rounds python benchmarks/probes/cpu_state_rounds.py CORPUS SAMPLE [SAMPLE ...]
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import torch

from pytest_inductor_templates.engine.triples import call_without_grad
from pytest_inductor_templates.samples.graphnet import GraphNetSample
from pytest_inductor_templates.timing.paired import PairedPlan, time_paired
from pytest_inductor_templates.timing.timers import block_timer, cuda_synchronized_perf_counter, warm_up

TIMINGS = 6
PLAN = PairedPlan(block_seconds=0.005, min_rounds=10, max_seconds=2.0, target=0.0, min_seconds=2.0)
BINS = ((1.15, "<1.15"), (1.3, "<1.3"), (1.6, "<1.6"), (float("inf"), ">=1.6"))


def timings_of(sample: GraphNetSample) -> list[dict[str, Any]]:
    device = torch.device("cuda")
    inputs = sample.make_inputs(device)[0]

    def caller(model: Any) -> Any:
        return functools.partial(call_without_grad, model, inputs)  # as the plugin calls a sample

    eager, compiled = caller(sample.make_model(device)), caller(torch.compile(sample.make_model(device)))
    warm_up(eager, torch.cuda.synchronize)
    warm_up(compiled, torch.cuda.synchronize)
    timer = block_timer(cuda_synchronized_perf_counter, True)
    runs = []
    for _ in range(TIMINGS):
        timing = time_paired(eager, compiled, timer, PLAN)
        runs.append({"probes": timing.probes, "eager": timing.eager, "compiled": timing.compiled,
                     "iterations": list(timing.iterations)})  # fmt: skip
    return runs


def grouped(runs: list[dict[str, Any]]) -> list[str]:
    fastest = min(probe for run in runs for probe in run["probes"])
    lines = []
    for number, run in enumerate(runs):
        groups: dict[str, list[tuple[float, float]]] = {}
        for probe, eager, compiled in zip(run["probes"], run["eager"], run["compiled"], strict=True):
            name = next(name for bound, name in BINS if probe / fastest < bound)
            groups.setdefault(name, []).append((eager, compiled))
        parts = [
            f"{name}: n={len(pairs)} sp={statistics.median(e / c for e, c in pairs):.3f} "
            f"e={1e3 * statistics.median(e for e, _ in pairs):.2f} c={1e3 * statistics.median(c for _, c in pairs):.2f}"
            for _, name in BINS
            if (pairs := groups.get(name))
        ]
        lines.append(f"{number} {len(run['probes'])} {run['iterations']} " + " ".join(parts))
    return lines


def main() -> int:
    corpus, out = Path(sys.argv[1]).resolve(), Path(os.environ.get("OUT", "cpu-state-rounds"))
    out.mkdir(parents=True, exist_ok=True)
    kept = {}
    for relative in sys.argv[2:]:
        kept[relative] = timings_of(GraphNetSample(corpus, relative))
        print(f"== {relative}", *grouped(kept[relative]), sep="\n", flush=True)
        torch._dynamo.reset()
    (out / "rounds.json").write_text(json.dumps(kept))
    return 0


if __name__ == "__main__":
    sys.exit(main())
