"""The graphs Dynamo hands the backend for the item's first call, with their real inputs and post-AOT (aten) forms."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from ..templates.selection import Selection
from .request import DiagnosisRequest


@dataclass
class CapturedGraph:
    """One Dynamo graph: its FX module, the real tensors it was called with, and its aten forward graph."""

    dynamo: Any  # torch.fx.GraphModule, torch-level calls (the repro rebuilds this)
    inputs: list[Any]  # real example inputs, cloned (the parameters too where Dynamo lifts them: not under freezing)
    aten: Any = None  # the forward graph after AOT autograd with Inductor's decompositions
    kept: dict[str, Any] = field(default_factory=dict)  # the module's own parameters, then buffers, by name, cloned

    @property
    def aten_inputs(self) -> list[Any]:
        """The aten graph's arguments: AOT autograd passes the Dynamo module's own parameters and buffers (kept as
        attributes where Dynamo does not lift them: freezing's) before its inputs."""
        return [*self.kept.values(), *self.inputs]


def kept_tensors(gm: Any) -> dict[str, Any]:
    """``gm``'s parameters then buffers by name, a shared one under each of its names, in the order AOT autograd
    lifts them (``dict(named_parameters(remove_duplicate=False))``, then the buffers')."""
    return {
        **dict(gm.named_parameters(remove_duplicate=False)),
        **dict(gm.named_buffers(remove_duplicate=False)),
    }


def clone_input(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    return value


def capture(request: DiagnosisRequest, selection: Selection, build: Any) -> list[CapturedGraph]:
    """Trace a copy of the item's model (from ``build``, the diagnosis's one draw) on its first input set with a
    backend that keeps each graph and runs it in aten."""
    import torch
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.compile_fx import select_decomp_table

    from ..compile.isolation import isolated_compile_state
    from .predicate import scoped_config

    captured: list[CapturedGraph] = []

    def backend(gm: Any, example_inputs: list[Any]) -> Any:
        entry = CapturedGraph(
            gm,
            [clone_input(t) for t in example_inputs],
            kept={name: clone_input(t) for name, t in kept_tensors(gm).items()},
        )
        captured.append(entry)

        def forward_compiler(aten_gm: Any, _: Any) -> Any:
            entry.aten = aten_gm
            return make_boxed_func(aten_gm.forward)

        try:
            return aot_autograd(fw_compiler=forward_compiler, decompositions=select_decomp_table())(gm, example_inputs)
        except Exception:  # AOT autograd's own failure: the Dynamo graph is still a repro
            entry.aten = None
            return gm.forward

    device = torch.device(request.device.name)
    model = build.make_model(device)
    inputs = build.make_inputs(device)[0]
    no_grad = request.no_grad or selection.inference_only
    with isolated_compile_state(), scoped_config(selection.config_patches):
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            compiled = torch.compile(model, backend=backend, fullgraph=selection.fullgraph, dynamic=selection.dynamic)
            compiled(*inputs.args, **inputs.kwargs)
    return captured


@dataclass(frozen=True)
class GraphFacts:
    """What the captured aten graphs call and compute: what some of the bisector's switches act on."""

    random_ops: bool  # a random operator (``nondeterministic_seeded``)
    convolutions: bool  # ``aten.convolution``
    low_precision: bool  # a float16 or bfloat16 value


def graph_facts(graphs: list[CapturedGraph]) -> GraphFacts | None:
    """The facts of every captured aten graph together; None when a graph has no aten form to read."""
    import torch

    if not graphs or any(g.aten is None for g in graphs):
        return None
    random = convolutions = low = False
    for entry in graphs:
        for node in entry.aten.graph.nodes:
            value = node.meta.get("val")
            if isinstance(value, torch.Tensor) and value.dtype in (torch.float16, torch.bfloat16):
                low = True
            if node.op != "call_function":
                continue
            random = random or torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ())
            convolutions = convolutions or getattr(node.target, "overloadpacket", None) is torch.ops.aten.convolution
    return GraphFacts(random, convolutions, low)
