"""Drift or miscompile: whether precision casts make the failure go away (bf16/fp16), and how far compiled and
eager each are from float64 (at the diverging node when known, else at the outputs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..compile.outputs import leaves
from ..templates.selection import Selection
from .localise import rmse
from .request import DiagnosisRequest

LOW_PRECISION = ("float16", "bfloat16")
MISCOMPILE_FACTOR = 3.0  # compiled this many times farther from float64 than eager (the check's own RMSE factor)


@dataclass
class Distances:
    compiled_rmse: float
    eager_rmse: float
    where: str  # "at aten.sigmoid (model.py:12)", "at the outputs (out[0])"

    @property
    def ratio(self) -> float:
        return self.compiled_rmse / self.eager_rmse if self.eager_rmse > 0 else float("inf")

    def describe(self) -> str:
        return f"RMSE against float64 {self.where}: compiled {self.compiled_rmse:.3g}, eager {self.eager_rmse:.3g}" + (
            f" ({self.ratio:.3g}x)" if self.eager_rmse > 0 else ""
        )


def floating_dtypes(build: Any) -> set[str]:
    """The floating dtypes of the item's inputs, parameters and buffers (of ``build``'s copies: no draw)."""
    import torch

    model = build.model
    tensors = [t for x in build.inputs[:1] for _, t in leaves((x.args, x.kwargs))]
    if isinstance(model, torch.nn.Module):
        tensors += [*model.parameters(), *model.buffers()]
    return {
        str(t.dtype).removeprefix("torch.") for t in tensors if isinstance(t, torch.Tensor) and t.is_floating_point()
    }


def at_failing_outputs(figures: dict[str, tuple[float, float]]) -> Distances:
    """The failing check's own figures (its call and output -> compiled's and eager's RMSE against float64, as
    ``CheckResult.float64_rmse`` keeps them), at the output where compiled is farthest beyond eager."""
    found = [Distances(compiled, eager, f"at the outputs ({where})") for where, (compiled, eager) in figures.items()]
    return max(found, key=lambda d: d.ratio)


def output_distances(
    request: DiagnosisRequest, selection: Selection, build: Any, eager: Any, counts: Any
) -> Distances | None:
    """Compiled's and eager's RMSE against the float64 run at the first call's output where they differ most; eager's
    outputs and the float64 run are the diagnosis's (``eager``, computed once), the compiled one is compiled here
    (not where there is no float64 run), counted in ``counts``. Where the failing check's second opinion judged its
    outputs, the kind step reads its figures instead (``at_failing_outputs``)."""
    import torch

    from ..compile.compiled import CompiledModel
    from ..compile.isolation import isolated_compile_state
    from ..timing import host_lock
    from .predicate import call_of

    wide = eager.float64.outputs()
    if wide is None:
        return None
    device = torch.device(request.device.name)
    inputs = build.make_inputs(device)[:1]
    with host_lock.work(), isolated_compile_state() as watcher:
        compiled = CompiledModel(build.make_model(device), selection, watcher)
        actual = call_of(request)(compiled, inputs[0])
    counts.compiles += 1
    expected = eager.expected[0]
    best: Distances | None = None
    for (path, a), (_, e), (_, f) in zip(leaves(actual), leaves(expected), leaves(wide[0]), strict=False):
        if not (isinstance(e, torch.Tensor) and e.is_floating_point() and a.shape == e.shape == f.shape):
            continue
        found = Distances(rmse(a, f), rmse(e, f), f"at the outputs ({path})")
        if best is None or found.ratio > best.ratio:
            best = found
    return best


def kind_of(distances: Distances | None, fixed_by_casts: bool | None) -> str:
    """ "numerics" when precision casts fix it or compiled is about as close to float64 as eager; else
    "miscompile" (compiled clearly farther)."""
    if fixed_by_casts:
        return "numerics"
    if distances is None:
        return "not judged (no float64 figures)"
    return "miscompile" if distances.ratio > MISCOMPILE_FACTOR else "numerics"
