"""Why no CUDA graph is recorded for the dynamic_batch sample: recorded graphs, skips and timing per call pattern.

Usage (GPU machine): python benchmarks/probes/cudagraph_dynamic_probe.py
"""

import torch
from torch._dynamo.utils import counters
from torch.utils.benchmark import Timer

from pytest_inductor_templates.compile.effects import recorded_cuda_graphs
from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES

torch._logging.set_logs(cudagraphs=True, perf_hints=True, recompiles=True)
cfg = torch._inductor.config.triton
print("skip_dynamic_graphs", getattr(cfg, "cudagraph_skip_dynamic_graphs", "?"), "trees", cfg.cudagraph_trees)
s = next(x for x in BUILTIN_SAMPLES if x.name == "dynamic_batch")
dev = torch.device("cuda")
inputs = s.make_inputs(dev)
for label, opts in (("cudagraphs", {"triton.cudagraphs": True}), ("default", None)):
    torch._dynamo.reset()
    counters.clear()
    c = torch.compile(s.make_model(dev), options=opts)
    with torch.no_grad():
        for i in inputs:
            c(*i.args)
            print(
                label,
                "after first call with",
                tuple(i.args[0].shape),
                "recorded",
                recorded_cuda_graphs(0),
                "skips",
                counters["inductor"]["cudagraph_skips"],
                flush=True,
            )
        for k in range(3):
            for i in inputs:
                c(*i.args)
            print(label, "round", k, "recorded", recorded_cuda_graphs(0), dict(counters["inductor"]), flush=True)
        x = inputs[0].args
        t = Timer("c(*x)", globals={"c": c, "x": x}).blocked_autorange(min_run_time=0.5).median
        print(
            label,
            "batch",
            tuple(x[0].shape),
            f"Timer {t * 1e6:.1f} us; recorded after timing",
            recorded_cuda_graphs(0),
            flush=True,
        )
