"""Where a process's speedup offset comes from: processes with Python's hash seed fixed against drawn anew.

A launch-bound speedup differs from process to process by up to 4.5% on a host whose CPUs hold one speed, while
inside one process its timings agree within 0.5% (docs/results/history.md, tenth session). Python's hash seed is
one thing every fresh process draws anew: it orders sets of strings, and so may order what Dynamo's guards check
and what Inductor's code generation emits around a call. This probe starts PROCESSES fresh processes per variant,
alternating the variants (``random``: the seed Python draws; ``fixed``: ``PYTHONHASHSEED=0``), each building the
sample, compiling it with the default template (from the cache the first process filled) and timing it with the
plugin's paired rounds for SECONDS; a third variant, ``no-aslr``, fixes the seed and also starts the process under
``setarch -R`` (addresses not randomised: the same heap, stack and library layout in every process). Per sample and
variant: each process's speedup, eager's and the compiled call's median ms, and the spread between the processes (the
sd of their logs). Where ``fixed`` spreads much less than ``random``, the offset is the seed's; where only
``no-aslr`` does, it is the address layout's. With RELOADS, each process also compiles the sample again that many
times and times each load, and the spread is split into the loads' inside a process and the process's own: where the
process's own part is near zero, a timing repeated in the same process after a fresh compile (no new process, no
new build) samples what a repeat in another process would. A reload is a Dynamo reset and the sample built again;
with ``OFFSET_RELOAD=reset-clear``, also Inductor's in-memory caches cleared, as the plugin's loads do
(``--inductor-timing-loads``): on an H100 three samples' first timing differed from their loads' by 20-50%, in every
process, and the per-load eager and compiled medians printed say which side moved.

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

from probe_cli import child_or_args

PROCESSES = int(os.environ.get("OFFSET_PROCESSES", "4"))  # per variant
SECONDS = float(os.environ.get("OFFSET_SECONDS", "1.0"))
RELOADS = int(os.environ.get("OFFSET_RELOADS", "0"))  # compiles again in the same process, each timed
RELOAD = os.environ.get("OFFSET_RELOAD", "reset")  # a reload's reset: "reset" (Dynamo's), "reset-clear" (+ Inductor's)
# PYTHONHASHSEED, and the command's prefix
VARIANTS: dict[str, tuple[str | None, list[str]]] = {
    "random": (None, []),
    "fixed": ("0", []),
    "no-aslr": ("0", ["setarch", os.uname().machine, "-R"]),
}


def gpu_clocks() -> str:
    """The GPU's SM and memory clocks and performance state now (nvidia-smi), or '' without it."""
    query = ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,pstate", "--format=csv,noheader", "-i", "0"]
    try:
        return subprocess.run(query, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def one_process(corpus: Path, relative: str, device_name: str) -> dict[str, Any]:
    """Time the sample's eager and compiled calls; then, RELOADS times, compile it again in this process (Dynamo
    reset, from the caches) and time again: a figure that moves with each load is the load's, not the process's."""
    import torch

    from pytest_inductor_templates.compile import cache
    from pytest_inductor_templates.engine.triples import call_without_grad
    from pytest_inductor_templates.samples.graphnet import GraphNetSample
    from pytest_inductor_templates.timing.paired import PairedPlan, time_paired
    from pytest_inductor_templates.timing.timers import block_timer, cuda_synchronized_perf_counter, host_share, warm_up

    sample, device = GraphNetSample(corpus, relative), torch.device(device_name)
    cuda = device.type == "cuda"
    inputs = sample.make_inputs(device)[0]
    synchronize = torch.cuda.synchronize if cuda else None
    timer = block_timer(cuda_synchronized_perf_counter if cuda else time.perf_counter, cuda)
    plan = PairedPlan(block_seconds=0.005, min_rounds=10, max_seconds=SECONDS, target=0.0, min_seconds=SECONDS)
    loads = []
    for load in range(1 + RELOADS):
        torch._dynamo.reset()
        if load and RELOAD == "reset-clear":
            cache.clear_in_memory()
        compiled = functools.partial(call_without_grad, torch.compile(sample.make_model(device)), inputs)
        warm_up(compiled, synchronize)
        eager = functools.partial(call_without_grad, sample.make_model(device), inputs)  # fresh, as the plugin pairs
        warm_up(eager, synchronize)
        clocks = gpu_clocks() if cuda else ""
        timing = time_paired(eager, compiled, timer, plan)
        loads.append({"speedup": timing.all_rounds.median, "rounds": timing.rounds,
                      "probe": statistics.median(timing.probes), "eager_ms": 1e3 * statistics.median(timing.eager),
                      "compiled_ms": 1e3 * statistics.median(timing.compiled), "clocks": clocks,
                      "compiled_host_share": host_share(compiled) if cuda else None})  # fmt: skip
    return {"pid": os.getpid(), "seed": os.environ.get("PYTHONHASHSEED"), **loads[0], "loads": loads}


def spread(values: list[float]) -> float:
    """The sd of the values' logs (0 for fewer than two)."""
    logs = [math.log(v) for v in values]
    return statistics.stdev(logs) if len(logs) > 1 else 0.0


def components(runs: list[dict[str, Any]]) -> str:
    """Where the spread of processes' loads sits (RELOADS > 0): the sd between loads inside one process (pooled
    over the processes), the sd between the processes' mean loads, and what of that is the process's own (its
    variance less the within-process part a mean of the loads carries; 0 where loads explain it all). Where the
    process's own part is near 0, compiling again in one process samples what a new process would."""
    within = [[math.log(load["speedup"]) for load in run["loads"]] for run in runs if len(run["loads"]) > 1]
    if len(within) < 2:
        return ""
    loads = min(len(logs) for logs in within)
    pooled = statistics.fmean(statistics.variance(logs) for logs in within)
    means = statistics.variance([statistics.fmean(logs) for logs in within])
    own = max(0.0, means - pooled / loads)
    return (f"sd between loads in a process {math.sqrt(pooled):.1%} (pooled, {loads} loads each), between processes' "
            f"means {math.sqrt(means):.1%}, the process's own {math.sqrt(own):.1%}")  # fmt: skip


def main() -> int:
    args = child_or_args(one_process, "process-offset")
    if args is None:
        return 0
    device, corpus, out, samples = args
    kept: dict[str, list[dict[str, Any]]] = {}
    names = os.environ.get("OFFSET_VARIANTS")
    chosen = {name: VARIANTS[name] for name in names.split(",")} if names else VARIANTS
    for relative in samples:
        runs: list[dict[str, Any]] = []
        for _ in range(PROCESSES):
            for variant, (seed, prefix) in chosen.items():
                env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
                env.update({"PYTHONHASHSEED": seed} if seed is not None else {})
                command = [*prefix, sys.executable, __file__, "--one", str(corpus), relative, device]
                done = subprocess.run(command, capture_output=True, text=True, env=env)
                if done.returncode != 0:
                    print(f"{relative}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}", flush=True)
                    continue
                runs.append({"variant": variant, **json.loads(done.stdout.strip().splitlines()[-1])})
        kept[relative] = runs
        (out / "offset.json").write_text(json.dumps(kept))
        print(f"== {relative}", flush=True)
        for variant in chosen:
            mine = [run for run in runs if run["variant"] == variant]
            if mine:
                speedups = [run["speedup"] for run in mine]
                sides = " | sd eager {:.1%}, compiled {:.1%}".format(
                    spread([r["eager_ms"] for r in mine]), spread([r["compiled_ms"] for r in mine])
                )
                print(f"  {variant:7} sd between processes {spread(speedups):.1%}{sides} | "
                      + " ".join(f"{s:.3f}" for s in speedups), flush=True)  # fmt: skip
                if parts := components(mine):
                    print(f"  {variant:7} {parts}", flush=True)
                for run in mine:
                    if len(run["loads"]) > 1:
                        print("    loads in one process: " + " ".join(
                            f"{load['speedup']:.3f} (eager {load['eager_ms']:.3f} ms, "
                            f"compiled {load['compiled_ms']:.3f} ms, "
                            f"host {load['compiled_host_share']}, "
                            f"{load['clocks']})" for load in run["loads"]), flush=True)  # fmt: skip
    for variant in chosen:
        spreads = [spread([r["speedup"] for r in runs if r["variant"] == variant]) for runs in kept.values()]
        if spreads:
            print(f"{variant}: sd between processes, median over samples {statistics.median(spreads):.1%}, "
                  f"largest {max(spreads):.1%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
