"""A lowering-bisection step compiled from Inductor's own input: the post-AOT graph ``compile_fx_inner`` was given
in a model-level check of the lowerings, or of the post-grad passes' switch, in this process (those passes act
inside ``compile_fx_inner``: its input is the same; kept with its fake inputs, its arguments, the tracing
context and Inductor's config it compiled under, and the real inputs and outputs of its first call), compiled
again by ``compile_fx_inner`` alone and judged on that graph's outputs against the graph run eagerly, by the
repro's rule (``standalone.compare``: the item's explicit tolerance, else the per-dtype default; the float64
opinion; the first input set). A step changes nothing before Inductor's lowering, so Dynamo's trace and AOT
autograd need not run again (on the CPU, opus-mt's compile of the kept graph alone took 55-60% of a whole
``torch.compile``).

The graph is used only where the model-level checks compiled exactly one graph, without CUDA graphs, for an
inference call (so the lowerings the bisector counts are that graph's), and where the graph's own verdict on such
a check's compiled outputs was the check's, on a failing check and on a passing one where there was one
(``predicate.Judge.asked``; else the whole model is checked at every step, as before). A process whose checks of
the lowerings have passed so far uses its graph once the same graph (``fingerprint``) agreed with a failing check in
another of the diagnosis's processes (``vouch``): otherwise a helper given only passing steps checks the whole
model for each (on an H100, opus-mt's 15 s against 5 s).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOWERINGS = "lowerings"
# the subsystems that act only inside Inductor's compile_fx_inner: a model-level check with one of them switched off
# gives it the graph that the lowering steps compile (the switches of config changes, applied as torch.compile's
# options, are also read by AOT autograd's decompositions and partitioner: not those)
INSIDE_COMPILE_FX_INNER = frozenset({LOWERINGS, "post_grad_passes"})


def from_the_graph(question: Any) -> bool:
    """Whether ``question`` is checked from a kept graph where its process holds one standing for the model: a
    step counting or bisecting the lowerings."""
    return (
        question.backend == "inductor"
        and question.subsystem == LOWERINGS
        and question.run_state in ("find_max_bounds", "bisect")
    )


def keeps_the_graph(question: Any) -> bool:
    """Whether the model-level check of ``question`` keeps the graph Inductor's ``compile_fx_inner`` was given, for
    the lowering steps: a question about the lowerings, or the switch of a subsystem acting only inside
    ``compile_fx_inner``."""
    if question.backend != "inductor":
        return False
    return question.subsystem == LOWERINGS or (
        question.subsystem in INSIDE_COMPILE_FX_INNER and question.run_state == "test_disable"
    )


@dataclass
class InnerGraph:
    """One graph as Inductor's ``compile_fx_inner`` received it, and the real call it served."""

    gm: Any  # a copy taken before Inductor's passes rewrote it
    fake_inputs: list[Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    context: Any  # the TracingContext it compiled in (its fake mode)
    config: dict[str, Any]  # Inductor's config then: the template's options and scoped patches
    real: list[tuple[Any, Any]] | None = None  # the flat real inputs of its first call, in host memory (``_to_host``)
    compiled: list[Any] | None = None  # that call's outputs (copies)
    eager: list[Any] | None = None  # the graph's outputs run eagerly on ``real``
    wide: list[Any] | None = None  # the same in float64 (None: no second opinion, or it cannot run in float64)
    fingerprint: str | None = None  # ``fingerprint``'s, once computed


def graph_copy(gm: Any) -> Any:
    """A graph module with its own graph (Inductor's passes rewrite it), sharing the module's attributes."""
    import torch

    return torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))


def _detached(values: Any) -> list[Any]:
    import torch

    from .standalone import flat

    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in flat(values)]


def _to_host(value: Any) -> tuple[Any, Any]:
    """A copy of a tensor in host memory and the device it came from; another value as it is, and None."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value, None
    return value.detach().to("cpu", copy=True).requires_grad_(value.requires_grad), value.device


def _on_device(held: tuple[Any, Any]) -> Any:
    """A fresh copy of what ``_to_host`` kept, on the device it came from."""
    value, device = held
    if device is None:
        return value
    return value.detach().to(device, copy=True).requires_grad_(value.requires_grad)


@contextlib.contextmanager
def keeping(kept: list[InnerGraph | None]) -> Iterator[None]:
    """Every graph Inductor compiles in the block appended to ``kept``, with its first call's inputs and outputs
    (scoped patches of ``compile_fx._compile_fx_inner`` and of the compiled graph's call)."""
    from unittest import mock

    import torch
    from torch._inductor import compile_fx, config
    from torch._inductor.output_code import CompiledFxGraph

    compile_inner = compile_fx._compile_fx_inner
    call = CompiledFxGraph.__call__
    served: dict[int, InnerGraph] = {}

    def keep(gm: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
        entry = None
        try:  # keeping is bookkeeping: where it fails, the check compiles as it would have, and nothing is kept
            context = torch._guards.TracingContext.try_get()
            entry = InnerGraph(
                graph_copy(gm), list(example_inputs), args, dict(kwargs), context, config.get_config_copy()
            )
        except Exception:
            kept.append(None)  # a graph compiled but not kept: none can stand for the model
        if entry is not None:
            kept.append(entry)
        output = compile_inner(gm, example_inputs, *args, **kwargs)
        if entry is not None:
            served[id(output)] = entry
        return output

    def first_call_kept(self: Any, inputs: Any) -> Any:
        entry = served.pop(id(self), None)
        real = None
        if entry is not None:
            try:  # in host memory: the device may have no room for a second copy of the weights
                real = [_to_host(v) for v in inputs]
            except Exception:
                real = None
        outputs = call(self, inputs)  # a boxed call: it may empty ``inputs``
        if entry is not None and real is not None:
            try:
                entry.real, entry.compiled = real, _detached(outputs)
            except Exception:
                entry.real = None
        return outputs

    with (
        mock.patch.object(compile_fx, "_compile_fx_inner", keep),
        mock.patch.object(CompiledFxGraph, "__call__", first_call_kept),
    ):
        yield


def _run_eagerly(entry: InnerGraph, second_opinion: bool) -> None:
    """The graph's eager outputs on its real inputs, and their float64 opinion (where asked for and possible)."""
    import torch

    from .standalone import float64_outputs

    assert entry.real is not None
    with torch.no_grad():
        entry.eager = _detached(entry.gm(*[_on_device(v) for v in entry.real]))
        entry.wide = float64_outputs(entry.gm, [_on_device(v) for v in entry.real]) if second_opinion else None


def problems(entry: InnerGraph, compiled: list[Any], tolerance: tuple[float, float] | None) -> list[str]:
    """How ``compiled`` (the graph's outputs) differs from eager's beyond the repro's rule; empty: it passes."""
    from .standalone import compare

    return compare(compiled, entry.eager, entry.wide, tolerance)


def usable(
    kept: list[InnerGraph | None], failing: bool, tolerance: tuple[float, float] | None, second_opinion: bool
) -> InnerGraph | None:
    """The one graph a model-level check compiled, ready for steps compiled from it, where its own verdict on
    that check's compiled outputs is ``failing`` (the model-level verdict); else None."""
    if len(kept) != 1 or kept[0] is None or kept[0].real is None or kept[0].compiled is None:
        return None
    if kept[0].context is None:
        return None
    entry = kept[0]
    _run_eagerly(entry, second_opinion)
    return entry if bool(problems(entry, entry.compiled, tolerance)) == failing else None  # type: ignore[arg-type]


def fingerprint(entry: InnerGraph) -> str:
    """What makes two processes' kept graphs the same graph: its code, and each example input's shape, dtype,
    strides and device (the processes of a diagnosis load one draw, so the values are the same)."""
    import hashlib

    if entry.fingerprint is None:
        digest = hashlib.sha256(entry.gm.code.encode())
        for value in entry.fake_inputs:
            try:
                layout = (tuple(value.shape), str(value.dtype), tuple(value.stride()), str(value.device))
            except Exception:  # not a strided tensor (a symbol, a sparse or nested tensor): its type and text
                layout = (type(value).__name__, repr(value))
            digest.update(repr(layout).encode())
        entry.fingerprint = digest.hexdigest()
    return entry.fingerprint


def vouch(entry: InnerGraph, vouched: Path | None, agreed: bool) -> None:
    """Record in ``vouched`` (a diagnosis's file, shared by its processes) whether this graph agreed with a failing
    model-level check (``+``: it reproduces the fault there) or disagreed with a check (``-``: it stands for the
    model in no process). Bookkeeping: where it fails, nothing is recorded."""
    if vouched is None:
        return
    try:
        line = ("+" if agreed else "-") + fingerprint(entry) + "\n"
        with vouched.open("a", encoding="ascii") as file:
            file.write(line)
    except Exception:
        pass


def _marks(vouched: Path | None) -> set[str]:
    """The lines of ``vouched`` (none where there is no file, or it cannot be read)."""
    try:
        return set(vouched.read_text(encoding="ascii").split()) if vouched is not None and vouched.exists() else set()
    except Exception:
        return set()


def vouched_for(entry: InnerGraph, vouched: Path | None) -> bool:
    """Whether the same graph agreed with a failing model-level check in some process and disagreed with a check in
    none (``vouch``)."""
    marks = _marks(vouched)
    return "+" + fingerprint(entry) in marks and not withdrawn(entry, vouched, marks)


def withdrawn(entry: InnerGraph, vouched: Path | None, marks: set[str] | None = None) -> bool:
    """Whether the same graph disagreed with a model-level check in some process (``vouch``)."""
    return "-" + fingerprint(entry) in (marks if marks is not None else _marks(vouched))


def fails(entry: InnerGraph, tolerance: tuple[float, float] | None) -> bool:
    """Whether the graph compiled again by ``compile_fx_inner`` alone (under the bisector's state in this process,
    Inductor's config of the kept compile, no FX graph cache) still fails on its real inputs."""
    import torch
    from torch._inductor import config
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.virtualized import V

    assert entry.real is not None
    changed = {k: v for k, v in entry.config.items() if getattr(config, k, v) is not v and getattr(config, k) != v}
    changed["fx_graph_cache"] = False  # its key does not see the bisector's switches
    with torch._guards.tracing(entry.context), V.set_fake_mode(entry.context.fake_mode), config.patch(changed):
        compiled = compile_fx_inner(graph_copy(entry.gm), entry.fake_inputs, *entry.args, **entry.kwargs)
    with torch.no_grad():
        outputs = compiled([_on_device(v) for v in entry.real])
    return bool(problems(entry, _detached(outputs), tolerance))
