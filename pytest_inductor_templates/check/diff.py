"""Compiled-versus-eager differences of nested outputs: structure, then dtype and shape, then values.

Integer and bool leaves compare exactly. A floating leaf passes the first comparison when every element is
within ``atol + rtol * |eager|`` (by default torch.testing's tolerances for its dtype, atol scaled to the
leaf's largest |eager|); one that does not gets the float64 second opinion (``second_opinion.opinion_on``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..compile.outputs import leaves
from ..outcomes import FIRST_COMPARISON, SECOND_OPINION, SECOND_OPINION_OFF
from ..tolerance import Tolerance
from . import second_opinion
from .second_opinion import Reference
from .tolerances import LEVELS, default_tolerance, dtype_name, graphnet_tolerance

EXACT = Tolerance(0.0, 0.0)
Names = tuple[str, str]  # what the two sides are called in messages
COMPILED_VS_EAGER: Names = ("compiled", "eager")


@dataclass(frozen=True)
class Mismatch:
    """One way the compiled output differs from eager, at one place in the output."""

    path: str
    kind: str  # structure, value, dtype, shape, device, exact, values, nonfinite, stale, overwritten
    message: str
    rule: str = ""  # what decided it, when that is not the kind itself: ``first comparison``, ``second opinion: ...``
    count: int = 0  # for a tensor's values: how many elements differ, of how many
    total: int = 0
    float64_rmse: tuple[float, float] | None = None  # compiled's and eager's own RMSE against float64, where judged so

    @property
    def decided_by(self) -> str:
        return self.rule or self.kind


@dataclass
class OutputDiff:
    """The verdict on one pair of outputs."""

    mismatches: list[Mismatch] = field(default_factory=list)
    level: int | None = LEVELS[0]  # tightest GraphNet tolerance level at which every leaf passes
    second_opinions: list[str] = field(default_factory=list)  # the second opinion's figures, per leaf it cleared
    uncompared: list[str] = field(default_factory=list)  # floating leaves eager left NaN or Inf everywhere

    @property
    def ok(self) -> bool:
        return not self.mismatches

    @property
    def rule(self) -> str:
        """What decided: the first mismatch's rule, else the second opinion if it cleared a leaf."""
        if self.mismatches:
            return self.mismatches[0].decided_by
        return SECOND_OPINION if self.second_opinions else FIRST_COMPARISON


def _structure(actual: Any, expected: Any, path: str, out: list[Mismatch], names: Names = COMPILED_VS_EAGER) -> None:
    import torch

    if isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor):
        return
    if type(actual) is not type(expected):
        out.append(
            Mismatch(
                path,
                "structure",
                f"{path}: {names[0]} gives {type(actual).__name__}, {names[1]} {type(expected).__name__}",
            )
        )
    elif isinstance(expected, dict):
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        if missing or extra:
            parts = [f"keys missing from the {names[0]} output: {missing}"] if missing else []
            parts += [f"keys only in the {names[0]} output: {extra}"] if extra else []
            out.append(Mismatch(path, "structure", f"{path}: " + "; ".join(parts)))
        for key in expected:
            if key in actual:
                _structure(actual[key], expected[key], f"{path}[{key!r}]", out, names)
    elif isinstance(expected, (list, tuple)):
        if len(actual) != len(expected):
            out.append(
                Mismatch(path, "structure", f"{path}: {names[0]} has {len(actual)} items, {names[1]} {len(expected)}")
            )
        for index, (a, e) in enumerate(zip(actual, expected, strict=False)):
            _structure(a, e, f"{path}[{index}]", out, names)
    elif dataclasses.is_dataclass(expected) and not isinstance(expected, type):
        for f in dataclasses.fields(expected):
            _structure(getattr(actual, f.name), getattr(expected, f.name), f"{path}.{f.name}", out, names)


def _real(t: Any) -> Any:
    import torch

    return torch.view_as_real(t) if t.is_complex() else t


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    import torch

    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), shape)) if shape else ()


def value_classes(t: Any) -> Any:
    """Per element: 0 finite, 1 NaN, 2 +Inf, 3 -Inf."""
    return t.isnan().long() + 2 * t.isposinf().long() + 3 * t.isneginf().long()


def same_classes(a: Any, b: Any) -> bool:
    """Whether every element of ``a`` is finite, NaN, +Inf or -Inf where ``b``'s is."""
    import torch

    return torch.equal(value_classes(a), value_classes(b))


_CLASS = ("finite", "NaN", "+Inf", "-Inf")


@dataclass
class LeafErrors:
    """Where and by how much one tensor leaf differs from eager's."""

    bad: Any  # bool tensor: elements beyond tolerance or with a non-finite mismatch
    nonfinite: Any  # bool tensor: NaN or Inf on one side where the other has something else
    abs_err: Any  # |a - e| where both are finite, else 0
    scale: float  # the largest finite |eager|
    atol: float  # the absolute tolerance used (scaled to ``scale`` when the tolerance is)

    @property
    def nonfinite_count(self) -> int:
        return int(self.nonfinite.sum())


def leaf_errors(a: Any, e: Any, tolerance: Tolerance) -> LeafErrors:
    """Elementwise comparison of two CPU tensors of one dtype and shape."""
    import torch

    a64, e64 = _real(a).double(), _real(e).double()
    nonfinite = value_classes(a64) != value_classes(e64)
    both = a64.isfinite() & e64.isfinite()
    abs_err = torch.where(both, (a64 - e64).abs(), torch.zeros_like(a64))
    finite_e = e64[e64.isfinite()].abs()
    scale = float(finite_e.max()) if finite_e.numel() else 0.0
    atol = tolerance.atol_for(scale, e.dtype)
    bad = nonfinite | (abs_err > atol + tolerance.rtol * e64.abs().nan_to_num(0.0, 0.0, 0.0))
    return LeafErrors(bad, nonfinite, abs_err, scale, atol)


def _level(e: Any, errors: LeafErrors) -> int | None:
    """The tightest GraphNet level (absolute atol = 10^t, as GraphNet grades) at which the leaf passes."""
    if errors.nonfinite_count:
        return None
    expected = _real(e).double().abs().nan_to_num(0.0, 0.0, 0.0)
    for level in LEVELS:
        tol = graphnet_tolerance(e.dtype, level)
        if not bool((errors.abs_err > tol.atol + tol.rtol * expected).any()):
            return level
    return None


def _shown(t: Any, index: tuple[int, ...]) -> Any:
    return _real(t)[index].item() if index or t.dim() == 0 else _real(t).item()


def _nonfinite_message(a: Any, e: Any, errors: LeafErrors, names: Names) -> str:
    """``2 NaN where eager is finite, 1 finite where eager is +Inf; first at index (0, 5): compiled nan, eager 0.5``."""
    import torch

    ra, re = _real(a).double(), _real(e).double()
    pairs = torch.stack([value_classes(ra)[errors.nonfinite], value_classes(re)[errors.nonfinite]], dim=1)
    kinds, counts = torch.unique(pairs, dim=0, return_counts=True)
    order = counts.argsort(descending=True)
    described = ", ".join(
        f"{int(counts[i])} {_CLASS[int(kinds[i][0])]} where {names[1]} is {_CLASS[int(kinds[i][1])]}" for i in order
    )
    first = _index(int(errors.nonfinite.reshape(-1).nonzero()[0]), tuple(errors.nonfinite.shape))
    return f"{described}; first at index {first}: {names[0]} {_shown(a, first)!r}, {names[1]} {_shown(e, first)!r}"


def values_message(
    path: str, a: Any, e: Any, errors: LeafErrors, tolerance: Tolerance, names: Names = COMPILED_VS_EAGER
) -> str:
    """One line naming how many elements differ, how (non-finite ones by kind), by how much, and the worst."""
    count, total = int(errors.bad.sum()), errors.bad.numel()
    head = f"{path}: {dtype_name(e.dtype)} {list(e.shape)}: {count} of {total} elements ({count / total:.1%}) differ"
    if not e.is_floating_point() and not e.is_complex():
        first = _index(int(errors.bad.reshape(-1).nonzero()[0]), tuple(errors.bad.shape))
        shown = f"{names[0]} {_shown(a, first)}, {names[1]} {_shown(e, first)}"
        return f"{head} (compared exactly); first at index {first}: {shown}"
    beyond = errors.bad & ~errors.nonfinite
    parts = [f": {_nonfinite_message(a, e, errors, names)}"] if errors.nonfinite_count else []
    if bool(beyond.any()):
        worst = _index(int((errors.abs_err * beyond).reshape(-1).argmax()), tuple(beyond.shape))
        scaled = f" ({tolerance.atol:g} x max|{names[1]}| {errors.scale:.3g})" if tolerance.scaled else ""
        parts.append(
            ("; " + str(int(beyond.sum())) if parts else "")
            + f" beyond rtol {tolerance.rtol:g}, atol {errors.atol:.3g}{scaled}; "
            f"max abs error {float(errors.abs_err[beyond].max()):.3g}, {_max_relative(e, errors, beyond)}; "
            f"worst at index {worst}: {names[0]} {_shown(a, worst)!r}, {names[1]} {_shown(e, worst)!r}"
        )
    return head + "".join(parts)


def _max_relative(e: Any, errors: LeafErrors, beyond: Any) -> str:
    """The largest relative error among the differing elements; undefined where eager is 0 there."""
    magnitude = _real(e).double().abs()
    nonzero = beyond & (magnitude > 0)
    if not bool(nonzero.any()):
        return "max rel error undefined (eager is 0 where they differ)"
    return f"max rel error {float((errors.abs_err / magnitude.clamp(min=1e-300))[nonzero].max()):.3g}"


def compare_outputs(
    actual: Any,
    expected: Any,
    tolerance: Tolerance | None = None,
    reference: Callable[[], Reference] | None = None,
    names: Names = COMPILED_VS_EAGER,
    second_opinion_off: bool = False,
) -> OutputDiff:
    """Compare compiled ``actual`` with eager ``expected``; ``reference`` gives the float64 run on demand.

    Integer and bool leaves compare exactly; floating leaves within ``tolerance`` (else torch.testing's
    default for their dtype, atol scaled to the leaf's magnitude). A floating leaf beyond it, with no NaN or
    Inf where eager has none, passes when the float64 second opinion clears it; with ``second_opinion_off``
    none is asked: it fails, its rule ``SECOND_OPINION_OFF``.
    """
    import torch

    result = OutputDiff()
    _structure(actual, expected, "out", result.mismatches, names)
    if result.mismatches:
        result.level = None
        return result
    ref: Reference | None = None
    for (path, a), (_, e) in zip(leaves(actual), leaves(expected), strict=True):
        if not isinstance(e, torch.Tensor):
            if a != e:
                result.mismatches.append(Mismatch(path, "value", f"{path}: {names[0]} {a!r}, {names[1]} {e!r}"))
            continue
        for kind, got, want in (
            ("dtype", a.dtype, e.dtype),
            ("shape", tuple(a.shape), tuple(e.shape)),
            ("device", a.device.type, e.device.type),
        ):
            if got != want:
                result.mismatches.append(Mismatch(path, kind, f"{path}: {kind} {names[0]} {got}, {names[1]} {want}"))
                break
        else:
            a_cpu, e_cpu = a.detach().cpu(), e.detach().cpu()
            floating = e.is_floating_point() or e.is_complex()
            leaf_tolerance = (tolerance or default_tolerance(e.dtype)) if floating else EXACT
            errors = leaf_errors(a_cpu, e_cpu, leaf_tolerance)
            if floating and e_cpu.numel() and not bool(e_cpu.isfinite().any()):
                result.uncompared.append(path)  # matching NaN and Inf are all there is to compare
            level = _level(e_cpu, errors) if floating else (None if bool(errors.bad.any()) else LEVELS[0])
            result.level = None if level is None or result.level is None else max(result.level, level)
            if not bool(errors.bad.any()):
                continue
            message = values_message(path, a_cpu, e_cpu, errors, leaf_tolerance, names)
            counts = {"count": int(errors.bad.sum()), "total": errors.bad.numel()}
            if not floating:
                result.mismatches.append(Mismatch(path, "exact", message, **counts))
                continue
            if errors.nonfinite_count:
                result.mismatches.append(Mismatch(path, "nonfinite", message, **counts))
                continue
            if second_opinion_off:
                result.mismatches.append(Mismatch(path, "values", message, SECOND_OPINION_OFF, **counts))
                continue
            if reference is None:
                result.mismatches.append(Mismatch(path, "values", message, FIRST_COMPARISON, **counts))
                continue
            ref = ref or reference()
            opinion = second_opinion.opinion_on(path, a_cpu, e_cpu, ref)
            if opinion.cleared:
                result.second_opinions.append(opinion.evidence)
            else:
                message = f"{message}; {opinion.evidence}"
                rmse = opinion.distances.own_rmse if opinion.distances is not None else None
                result.mismatches.append(Mismatch(path, "values", message, opinion.rule, **counts, float64_rmse=rmse))
    if result.mismatches:
        result.level = result.level if all(m.kind == "values" for m in result.mismatches) else None
    return result
