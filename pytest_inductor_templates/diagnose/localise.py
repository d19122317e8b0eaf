"""The operator: the first node of the post-AOT graph whose compiled value differs from eager's beyond what the
float64 run of the same graph allows (the plugin's own comparison, node by node); where the bisector named the
lowering, that node.

Compiled values come from Inductor's intermediate hooks (``config.generate_intermediate_hooks``, as
``torch._dynamo.repro.after_aot``'s analyze mode uses them) where its code emits them (Triton kernels, extern
kernels); Inductor's C++ (CPU) kernels emit none, so each node read is also made an output of the graph compiled
for this step, which materialises it: the named node alone, else every intermediate (a fault that only a fusion
shows may then vanish: then "not localised").
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Any

from ..check.tolerances import Tolerance
from .capture import CapturedGraph, clone_input

NOT_LOCALISED = "not localised"
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


@dataclass
class NodeFinding:
    """One aten node and how far compiled and eager each are from float64 there."""

    name: str
    target: str  # "aten.sigmoid"
    where: str | None  # "model.py:12", from the node's stack trace
    compiled_rmse: float | None = None
    eager_rmse: float | None = None
    diverges: bool = True

    def describe(self) -> str:
        return f"{self.target} ({self.where})" if self.where else self.target


def op_name(target: Any) -> str:
    """``aten.sigmoid.default`` -> ``aten.sigmoid``."""
    packet = getattr(target, "overloadpacket", None)
    if packet is not None:
        return f"{getattr(packet, '_qualified_op_name', str(packet)).replace('::', '.')}"
    return str(getattr(target, "__name__", target))


def source_line(node: Any) -> str | None:
    """The innermost ``file:line`` of the node's stack trace (a GraphNet sample's ``model.py:12``)."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    if not frames:
        return None
    path, line = frames[-1]
    return f"{path.replace(chr(92), '/').rsplit('/', 1)[-1]}:{line}"


def rmse(a: Any, b: Any) -> float:
    import torch

    diff = a.detach().double().cpu() - b.detach().double().cpu()
    finite = torch.isfinite(diff)
    return math.sqrt(float((diff[finite] ** 2).mean())) if bool(finite.any()) else float("nan")


def _floating(value: Any) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point()


def node_values(graph: Any, inputs: list[Any], wide: bool = False) -> dict[str, Any]:
    """Every node's value when ``graph`` runs eagerly (in float64 with ``wide``: the plugin's widening)."""
    import torch.fx

    from ..check.float64 import widen, widened

    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            result = super().run_node(n)
            values[n.name] = result
            return result

    args = [clone_input(t) for t in inputs]
    recorder = Recorder(copy.deepcopy(graph))  # copied outside the widening: it would widen a held tensor's copy
    if wide:
        args = [widen(t) if _floating(t) else t for t in args]
        with widened():
            recorder.run(*args)
    else:
        recorder.run(*args)
    return values


def _intermediates(graph: Any) -> list[Any]:
    return [n for n in graph.graph.nodes if n.op == "call_function" and _floating(n.meta.get("val"))]


def holds(graph: Any, name: str) -> bool:
    """Whether ``name`` is one of ``graph``'s floating intermediates (the bisector's lowering, in this graph)."""
    return any(n.name == name for n in _intermediates(graph))


def intermediates_to_read(graph: Any, named: str | None = None) -> list[str]:
    """The nodes whose compiled values the operator step reads: the bisector's lowering alone where it named one
    of ``graph``'s nodes (one more output: the graph's other kernels stay as the failing compile made them, and
    load from its cache), else every floating intermediate (on a large graph, a compile of thousands of unfused
    kernels: minutes on a GPU)."""
    if named is not None and holds(graph, named):
        return [named]
    return [n.name for n in _intermediates(graph)]


def compiled_values(graph: Any, inputs: list[Any], patches: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """The compiled values of the floating intermediates ``names``: the graph compiled with each made an output
    too, and the intermediate hooks' values where Inductor emits hooks (they win: they are the fused kernels'
    own)."""
    from torch._inductor import config
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.hooks import intermediate_hook

    wide = copy.deepcopy(graph)
    output = next(n for n in wide.graph.nodes if n.op == "output")
    wanted = set(names)
    extra = [n for n in wide.graph.nodes if n.name in wanted]
    originals = list(output.args[0])
    output.args = (tuple(originals + extra),)
    wide.recompile()
    hooked: dict[str, Any] = {}
    with config.patch({**patches, "generate_intermediate_hooks": True}):
        compiled = compile_fx_inner(wide, [clone_input(t) for t in inputs])
        with intermediate_hook(lambda name, value: hooked.__setitem__(name, value.detach().clone())):
            outs = compiled([clone_input(t) for t in inputs])
    values = {n.name: v for n, v in zip(extra, list(outs)[len(originals) :], strict=True)}
    values.update({k: v for k, v in hooked.items() if k in wanted})
    return values


def first_divergence(
    entry: CapturedGraph, patches: dict[str, Any], tolerance: Tolerance | None, named: str | None = None
) -> NodeFinding | None:
    """The first aten node (in graph order) whose compiled value fails the plugin's comparison against eager
    with the float64 second opinion (without it where an operator of the graph cannot run in float64); with
    ``named`` (the bisector's lowering), that node. None: none diverges."""
    import torch

    from ..check.diff import compare_outputs
    from ..check.second_opinion import Reference

    graph = entry.aten
    if named is not None and not holds(graph, named):  # the bisector's node is another graph's
        return None
    names = intermediates_to_read(graph, named)
    inputs = entry.aten_inputs
    with torch.no_grad():  # values alone are compared
        compiled = compiled_values(graph, inputs, patches, names)
        eager = node_values(graph, inputs)
        try:
            wide = node_values(graph, inputs, wide=True)
        except torch.OutOfMemoryError:
            raise
        except RuntimeError:  # an operator with no float64 kernel (CUDA's efficient attention): no float64 opinion
            wide = {}
    for node in graph.graph.nodes:
        if named is not None and node.name != named:
            continue
        c, e, f = compiled.get(node.name), eager.get(node.name), wide.get(node.name)
        if not (_floating(c) and _floating(e)):
            if named is not None:
                return NodeFinding(node.name, op_name(node.target), source_line(node))
            continue
        reference = Reference({"out": f} if _floating(f) else None, precision=e.dtype)
        diff = compare_outputs(c, e, tolerance, lambda r=reference: r)
        if diff.ok and named is None:
            continue
        finding = NodeFinding(node.name, op_name(node.target), source_line(node), diverges=not diff.ok)
        if _floating(f):
            finding.compiled_rmse, finding.eager_rmse = rmse(c, f), rmse(e, f)
        return finding
    return None
