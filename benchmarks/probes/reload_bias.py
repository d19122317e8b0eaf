"""Why a later load's speedup is not a fresh process's: the plugin's reload taken apart, step by step, in one process.

On an H100 a later load of a compiled item (``--inductor-timing-loads``) read `distilroberta-base` at 0.98-1.06x where
the processes' first loads read 1.23-1.34x, `convnext_zepto` 0.90-1.00x against 1.32-1.39x, `DeepLabV3_R101`
1.43-1.70x against 1.21-1.24x, in every process of two runs; a fresh process that built the sample again after each
Dynamo reset and cleared cache (``process_offset.py``, ``OFFSET_RELOAD=reset-clear``) read the first loads' figures
every time. The plugin's reload differs from that probe's in what it compiles (a copy of the model as built, kept in
host memory: ``engine.pristine``), how (the plugin's ``CompiledModel``: a recording backend, ``steady()``), and what
it pairs with (a copy too). Here each of those is varied alone, in one process per sample and cache state:

- ``built``: the model as built, compiled by ``CompiledModel`` (as the item's own process and each repeat process
  time it first), paired with a copy;
- ``copy``: Dynamo reset, Inductor's in-memory caches cleared, a copy compiled by ``CompiledModel`` (the plugin's
  reload), paired with a copy;
- ``rebuilt``: the same reset, the sample built again and compiled by ``CompiledModel``, paired with a rebuilt one;
- ``copy-plain``: the same reset, a copy compiled by plain ``torch.compile``, paired with a copy;
- ``copy-no-reset``: a copy compiled by ``CompiledModel`` with nothing reset (a second instance of the same code);
- ``copy`` again, and ``built-eager-copy``: a rebuilt model compiled, paired with a copy (which side moves).

Each step prints eager's and the compiled call's median ms, the speedup, the CPU-speed probe's median, and the graphs
Dynamo compiled. Each sample runs in two fresh processes: the first from a cold cache (as the item's own process
checks), the second from the cache the first filled (as a repeat process compiles). Where ``copy`` moves and
``rebuilt`` does not, the copy is the cause; where ``copy-plain`` does not, the ``CompiledModel`` is.

Usage (GPU): OUT=/tmp/reload python benchmarks/probes/reload_bias.py CORPUS SAMPLE [SAMPLE ...]
    (--device cpu for a dry run on a small sample)
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from probe_cli import child_or_args

SECONDS = float(os.environ.get("RELOAD_SECONDS", "0.5"))  # each step's paired timing
STEPS = ("built", "copy", "rebuilt", "copy-plain", "copy-no-reset", "copy", "built-eager-copy")


def one_process(corpus: Path, relative: str, device_name: str) -> list[dict[str, Any]]:
    """Every step of ``STEPS`` in order, in this process: each one's eager and compiled medians and speedup."""
    import torch

    from pytest_inductor_templates.compile import cache
    from pytest_inductor_templates.compile.compiled import CompiledModel
    from pytest_inductor_templates.compile.isolation import isolated_compile_state
    from pytest_inductor_templates.compile.phase_times import reset_dynamo
    from pytest_inductor_templates.engine.pristine import pristine_or_none
    from pytest_inductor_templates.engine.triples import call_without_grad
    from pytest_inductor_templates.samples.graphnet import GraphNetSample
    from pytest_inductor_templates.templates.registry import TemplateRegistry
    from pytest_inductor_templates.templates.selection import Selection
    from pytest_inductor_templates.timing.paired import PairedPlan, time_paired
    from pytest_inductor_templates.timing.timers import block_timer, cuda_synchronized_perf_counter, warm_up

    sample, device = GraphNetSample(corpus, relative), torch.device(device_name)
    cuda = device.type == "cuda"
    synchronize = torch.cuda.synchronize if cuda else None
    timer = block_timer(cuda_synchronized_perf_counter if cuda else time.perf_counter, cuda)
    plan = PairedPlan(block_seconds=0.005, min_rounds=10, max_seconds=SECONDS, target=0.0, min_seconds=SECONDS)
    selection = Selection(template=TemplateRegistry()["default"])
    results: list[dict[str, Any]] = []
    with isolated_compile_state() as watcher:
        built, input_sets = sample.make_model_and_inputs(device)
        inputs = input_sets[0]
        pristine = pristine_or_none(built)
        assert pristine is not None, "the sample's model cannot be kept as built"

        def timed(step: str, compiled: Any, eager: Any) -> None:
            graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
            start = time.perf_counter()
            call_without_grad(compiled, inputs)  # compiles, as the check's (or a repeat's) first call does
            seconds = time.perf_counter() - start
            steady = compiled.steady() if isinstance(compiled, CompiledModel) else compiled
            compiled_run = functools.partial(call_without_grad, steady, inputs)
            eager_run = functools.partial(call_without_grad, eager, inputs)
            warm_up(compiled_run, synchronize)
            warm_up(eager_run, synchronize)
            timing = time_paired(eager_run, compiled_run, timer, plan)
            results.append({
                "step": step, "speedup": timing.all_rounds.median, "rounds": timing.rounds,
                "eager_ms": 1e3 * statistics.median(timing.eager),
                "compiled_ms": 1e3 * statistics.median(timing.compiled),
                "probe_ms": round(statistics.median(timing.probes), 4) if timing.probes else None,
                "graphs": torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs_before,
                "compile_seconds": round(seconds, 2),
            })  # fmt: skip
            print(json.dumps(results[-1]), file=sys.stderr, flush=True)

        def reset() -> None:
            reset_dynamo()
            cache.clear_in_memory()

        for step in STEPS:
            if step == "built":
                timed(step, CompiledModel(built, selection, watcher), pristine.fresh())
            elif step == "copy":
                reset()
                timed(step, CompiledModel(pristine.fresh(), selection, watcher), pristine.fresh())
            elif step == "rebuilt":
                reset()
                timed(step, CompiledModel(sample.make_model(device), selection, watcher), sample.make_model(device))
            elif step == "copy-plain":
                reset()
                timed(step, torch.compile(pristine.fresh()), pristine.fresh())
            elif step == "copy-no-reset":
                timed(step, CompiledModel(pristine.fresh(), selection, watcher), pristine.fresh())
            elif step == "built-eager-copy":
                reset()
                timed(step, CompiledModel(sample.make_model(device), selection, watcher), pristine.fresh())
    return results


def main() -> int:
    args = child_or_args(one_process, "reload-bias")
    if args is None:
        return 0
    device, corpus, out, samples = args
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(out / "cache")}
    kept: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for relative in samples:
        kept[relative] = {}
        for state in ("cold", "warm"):
            command = [sys.executable, __file__, "--one", str(corpus), relative, device]
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            if done.returncode != 0:
                print(f"{relative} ({state}): exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
                continue
            kept[relative][state] = json.loads(done.stdout.strip().splitlines()[-1])
            (out / "reload_bias.json").write_text(json.dumps(kept))
            print(f"== {relative} ({state} cache at the start)", flush=True)
            for step in kept[relative][state]:
                print(f"  {step['step']:16} {step['speedup']:.3f}  eager {step['eager_ms']:.3f} ms  compiled "
                      f"{step['compiled_ms']:.3f} ms  probe {step['probe_ms']}  graphs {step['graphs']}  "
                      f"compile {step['compile_seconds']} s  rounds {step['rounds']}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
