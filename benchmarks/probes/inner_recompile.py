"""Is Inductor's compile of a graph alone much cheaper than a whole ``torch.compile``? (For a diagnosis's lowering
bisection, whose steps change nothing before Inductor's lowering.)

``python benchmarks/probes/inner_recompile.py CORPUS SAMPLE [--device cuda]``: the sample compiled with Inductor,
keeping what Inductor's ``compile_fx_inner`` was given (the post-AOT forward graph, its fake inputs, its keyword
arguments, the tracing context) and the real inputs of its first call; then that graph compiled again by
``compile_fx_inner`` alone, three times, each called on the real inputs; the largest difference of its outputs from
the graph run eagerly. The whole compile runs three times first (after the first, the kernels come from the cache, as
in a bisection step). Inductor's FX graph and AOT autograd caches are off, so every compile lowers again.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def graph_copy(gm: Any) -> Any:
    """A graph module with its own graph (the passes rewrite it), sharing the module's attributes."""
    import torch

    return torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))


def main() -> None:
    import torch
    import torch._inductor.config as inductor_config
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner
    from torch._inductor.virtualized import V

    from pytest_inductor_templates.samples.graphnet import GraphNetSample

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("sample")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    inductor_config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    device = torch.device(args.device)
    model, input_sets = GraphNetSample(args.corpus, args.sample).make_model_and_inputs(device)
    inputs = input_sets[0]
    kept: dict[str, Any] = {}

    def keeping_inner(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        kept.update(gm=graph_copy(gm), inputs=example_inputs, kwargs=kwargs)
        kept["context"] = torch._guards.TracingContext.try_get()
        compiled = compile_fx_inner(gm, example_inputs, **kwargs)

        def first_inputs_kept(flat: list[Any]) -> Any:
            kept.setdefault("real", [a.clone() if isinstance(a, torch.Tensor) else a for a in flat])
            return compiled(flat)

        first_inputs_kept._boxed_call = True  # type: ignore[attr-defined]
        return first_inputs_kept

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    for attempt in range(3):  # the first compiles the kernels; the others load them, as a bisection step does
        torch._dynamo.reset()
        start = time.perf_counter()
        with torch.no_grad():
            torch.compile(model, backend=lambda gm, ex: compile_fx(gm, ex, inner_compile=keeping_inner))(
                *inputs.args, **inputs.kwargs
            )
        synchronize()
        print(f"whole torch.compile {attempt} and its first call: {time.perf_counter() - start:.2f} s")
    context = kept["context"]
    for attempt in range(3):
        start = time.perf_counter()
        with torch._guards.tracing(context), V.set_fake_mode(context.fake_mode):
            compiled = compile_fx_inner(graph_copy(kept["gm"]), kept["inputs"], **kept["kwargs"])
        compiled_at = time.perf_counter() - start
        with torch.no_grad():
            outputs = compiled([a.clone() if isinstance(a, torch.Tensor) else a for a in kept["real"]])
        synchronize()
        called_at = time.perf_counter() - start
        print(f"compile_fx_inner alone {attempt}: {compiled_at:.2f} s, with its first call {called_at:.2f} s")
    with torch.no_grad():
        expected = kept["gm"](*[a.clone() if isinstance(a, torch.Tensor) else a for a in kept["real"]])
    pairs = zip(torch.utils._pytree.tree_leaves(outputs), torch.utils._pytree.tree_leaves(expected), strict=True)
    worst = max(float((a - b).abs().max()) for a, b in pairs if isinstance(a, torch.Tensor) and a.is_floating_point())
    print(f"largest difference from the graph run eagerly: {worst:.3g}")


if __name__ == "__main__":
    main()
