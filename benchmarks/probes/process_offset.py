"""Where a process's speedup offset comes from: processes with Python's hash seed fixed against drawn anew.

A launch-bound speedup differs from process to process by up to 4.5% on a host whose CPUs hold one speed, while
inside one process its timings agree within 0.5% (docs/results/history.md, tenth session). Python's hash seed is
one thing every fresh process draws anew: it orders sets of strings, and so may order what Dynamo's guards check
and what Inductor's code generation emits around a call. This probe starts PROCESSES fresh processes per variant,
alternating the variants (``random``: the seed Python draws; ``fixed``: ``PYTHONHASHSEED=0``), each building the
sample, compiling it with the default template (from the cache the first process filled) and timing it with the
plugin's paired rounds for SECONDS. Per sample and variant: each process's speedup and the spread between them (the
sd of their logs). Where ``fixed`` spreads much less than ``random``, the offset is the seed's.

Usage (GPU): OUT=/tmp/offset python benchmarks/probes/process_offset.py CORPUS SAMPLE [SAMPLE ...]
    (--device cpu for a dry run of the script on a small sample)
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

PROCESSES = int(os.environ.get("OFFSET_PROCESSES", "4"))  # per variant
SECONDS = float(os.environ.get("OFFSET_SECONDS", "1.0"))
VARIANTS = {"random": None, "fixed": "0"}  # PYTHONHASHSEED


def one_process(corpus: Path, relative: str, device_name: str) -> dict[str, Any]:
    import torch

    from pytest_inductor_templates.engine.triples import call_without_grad
    from pytest_inductor_templates.samples.graphnet import GraphNetSample
    from pytest_inductor_templates.timing.paired import PairedPlan, time_paired
    from pytest_inductor_templates.timing.timers import block_timer, cuda_synchronized_perf_counter, warm_up

    sample, device = GraphNetSample(corpus, relative), torch.device(device_name)
    cuda = device.type == "cuda"
    inputs = sample.make_inputs(device)[0]
    eager = functools.partial(call_without_grad, sample.make_model(device), inputs)
    compiled = functools.partial(call_without_grad, torch.compile(sample.make_model(device)), inputs)
    synchronize = torch.cuda.synchronize if cuda else None
    warm_up(eager, synchronize)
    warm_up(compiled, synchronize)
    timer = block_timer(cuda_synchronized_perf_counter if cuda else time.perf_counter, cuda)
    plan = PairedPlan(block_seconds=0.005, min_rounds=10, max_seconds=SECONDS, target=0.0, min_seconds=SECONDS)
    timing = time_paired(eager, compiled, timer, plan)
    return {"pid": os.getpid(), "seed": os.environ.get("PYTHONHASHSEED"), "speedup": timing.all_rounds.median,
            "rounds": timing.rounds, "probe": statistics.median(timing.probes)}  # fmt: skip


def spread(values: list[float]) -> float:
    """The sd of the values' logs (0 for fewer than two)."""
    logs = [math.log(v) for v in values]
    return statistics.stdev(logs) if len(logs) > 1 else 0.0


def main() -> int:
    if sys.argv[1] == "--one":
        print(json.dumps(one_process(Path(sys.argv[2]), sys.argv[3], sys.argv[4])))
        return 0
    device = "cuda"
    if "--device" in sys.argv:
        at = sys.argv.index("--device")
        device = sys.argv[at + 1]
        del sys.argv[at : at + 2]
    corpus, out = Path(sys.argv[1]).resolve(), Path(os.environ.get("OUT", "process-offset"))
    out.mkdir(parents=True, exist_ok=True)
    kept: dict[str, list[dict[str, Any]]] = {}
    for relative in sys.argv[2:]:
        runs: list[dict[str, Any]] = []
        for _ in range(PROCESSES):
            for variant, seed in VARIANTS.items():
                env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
                env.update({"PYTHONHASHSEED": seed} if seed is not None else {})
                command = [sys.executable, __file__, "--one", str(corpus), relative, device]
                done = subprocess.run(command, capture_output=True, text=True, env=env)
                if done.returncode != 0:
                    print(f"{relative}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}", flush=True)
                    continue
                runs.append({"variant": variant, **json.loads(done.stdout.strip().splitlines()[-1])})
        kept[relative] = runs
        (out / "offset.json").write_text(json.dumps(kept))
        print(f"== {relative}", flush=True)
        for variant in VARIANTS:
            speedups = [run["speedup"] for run in runs if run["variant"] == variant]
            if speedups:
                print(f"  {variant:6} sd between processes {spread(speedups):.1%} | "
                      + " ".join(f"{s:.3f}" for s in speedups), flush=True)  # fmt: skip
    for variant in VARIANTS:
        spreads = [spread([r["speedup"] for r in runs if r["variant"] == variant]) for runs in kept.values()]
        if spreads:
            print(f"{variant}: sd between processes, median over samples {statistics.median(spreads):.1%}, "
                  f"largest {max(spreads):.1%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
