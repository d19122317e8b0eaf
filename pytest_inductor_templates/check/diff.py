"""Compiled-versus-eager differences of nested outputs: structure, then dtype and shape, then values."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..compile.outputs import leaves
from .tolerances import LEVELS, LOW_PRECISION, Tolerance, default_tolerance, dtype_name, graphnet_tolerance

SECOND_OPINION_FACTOR = 3.0  # compiled RMSE vs fp64 may be this many times eager's (as torch._dynamo.utils.same)
SECOND_OPINION_MAX_FACTOR = 10.0  # and its worst element this many times eager's worst: one bad element stays caught
Names = tuple[str, str]  # what the two sides are called in messages
COMPILED_VS_EAGER: Names = ("compiled", "eager")


@dataclass(frozen=True)
class Mismatch:
    """One way the compiled output differs from eager, at one place in the output."""

    path: str
    kind: str  # structure, value, dtype, shape, device, values, nonfinite, overwritten
    message: str


@dataclass
class OutputDiff:
    """The verdict on one pair of outputs."""

    mismatches: list[Mismatch] = field(default_factory=list)
    level: int | None = LEVELS[0]  # tightest GraphNet tolerance level at which every leaf passes
    second_opinions: list[str] = field(default_factory=list)  # leaves passed on the fp64 reference

    @property
    def ok(self) -> bool:
        return not self.mismatches


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


def _index(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size if size else 0)
        flat_index //= max(size, 1)
    return tuple(reversed(index))


@dataclass
class _LeafErrors:
    bad: Any  # bool tensor: elements beyond tolerance or with a non-finite mismatch
    nonfinite: int
    abs_err: Any
    rel_err: Any


def _errors(a: Any, e: Any, tolerance: Tolerance) -> _LeafErrors:
    import torch

    a64, e64 = _real(a).double(), _real(e).double()
    nonfinite = (a64.isnan() != e64.isnan()) | (a64.isposinf() != e64.isposinf()) | (a64.isneginf() != e64.isneginf())
    both = a64.isfinite() & e64.isfinite()
    abs_err = torch.where(both, (a64 - e64).abs(), torch.zeros_like(a64))
    rel_err = abs_err / e64.abs().clamp(min=torch.finfo(torch.float64).tiny)
    bad = nonfinite | (abs_err > tolerance.atol + tolerance.rtol * e64.abs().nan_to_num(0.0, 0.0, 0.0))
    return _LeafErrors(bad, int(nonfinite.sum()), abs_err, rel_err)


def _real(t: Any) -> Any:
    import torch

    return torch.view_as_real(t) if t.is_complex() else t


def _level(e: Any, errors: _LeafErrors) -> int | None:
    if errors.nonfinite:
        return None
    expected = _real(e).double().abs().nan_to_num(0.0, 0.0, 0.0)
    for level in LEVELS:
        tol = graphnet_tolerance(e.dtype, level)
        if not bool((errors.abs_err > tol.atol + tol.rtol * expected).any()):
            return level
    return None


def _error_vs(a: Any, ref: Any) -> tuple[float, float]:
    """RMSE and worst absolute error of ``a`` against the fp64 reference."""
    diff = (a.double() - ref.double()).nan_to_num(0.0, 0.0, 0.0).abs()
    return (float(diff.pow(2).mean().sqrt()), float(diff.max())) if diff.numel() else (0.0, 0.0)


def _within_second_opinion(a: Any, e: Any, ref: Any, tolerance: Tolerance, tf32_ref: Any = None) -> bool:
    """Compiled's error against fp64 within a small multiple of eager's (or of TF32 rounding's, under TF32)."""
    (compiled_rmse, compiled_max), (eager_rmse, eager_max) = _error_vs(a, ref), _error_vs(e, ref)
    if tf32_ref is not None:
        tf32_rmse, tf32_max = _error_vs(tf32_ref, ref)
        eager_rmse, eager_max = max(eager_rmse, tf32_rmse), max(eager_max, tf32_max)
    floor = tolerance.atol / 10
    return (
        compiled_rmse <= SECOND_OPINION_FACTOR * eager_rmse + floor
        and compiled_max <= SECOND_OPINION_MAX_FACTOR * eager_max + floor
    )


def _values_message(path: str, a: Any, e: Any, errors: _LeafErrors, tolerance: Tolerance, names: Names) -> str:
    count, total = int(errors.bad.sum()), errors.bad.numel()
    flat = errors.bad.reshape(-1)
    worst = int(flat.nonzero()[0]) if errors.nonfinite else int((errors.abs_err.reshape(-1) * flat).argmax())
    index = _index(worst, tuple(errors.bad.shape))
    shown_a, shown_e = _real(a)[index].item(), _real(e)[index].item()
    head = f"{path}: {dtype_name(e.dtype)} {list(e.shape)}: {count} of {total} elements ({count / total:.1%}) differ"
    if not e.is_floating_point() and not e.is_complex():
        return f"{head} (compared exactly); first at index {index}: {names[0]} {shown_a}, {names[1]} {shown_e}"
    nonfinite = f" ({errors.nonfinite} where only one side is NaN or Inf)" if errors.nonfinite else ""
    return (
        f"{head}{nonfinite} beyond rtol {tolerance.rtol:g}, atol {tolerance.atol:g}; max abs error "
        f"{float(errors.abs_err.max()):.3g}, {_max_relative(e, errors)}; worst at index {index}: "
        f"{names[0]} {shown_a!r}, {names[1]} {shown_e!r}"
    )


def _max_relative(e: Any, errors: _LeafErrors) -> str:
    """The largest relative error among the differing elements; undefined where eager is 0 there."""
    nonzero = errors.bad & (_real(e).double().abs() > 0)
    if not bool(nonzero.any()):
        return "max rel error undefined (eager is 0 where they differ)"
    return f"max rel error {float(errors.rel_err[nonzero].max()):.3g}"


def tf32_enabled() -> bool:
    """Whether CUDA may run float32 matmuls or convolutions in TF32 (10-bit mantissa) right now."""
    import torch

    return bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32)


def round_to_tf32(t: Any) -> Any:
    """``t`` (float64) rounded to TF32's precision: 10 explicit mantissa bits, round to nearest."""
    import torch

    mantissa, exponent = torch.frexp(t)  # mantissa in [0.5, 1): 11 significant bits are TF32's 1 + 10
    return torch.ldexp(torch.round(mantissa * 2048) / 2048, exponent)


def compare_outputs(
    actual: Any,
    expected: Any,
    tolerance: Tolerance | None = None,
    reference64: Callable[[], Any] | None = None,
    reference_tf32: Callable[[], Any] | None = None,
    names: Names = COMPILED_VS_EAGER,
) -> OutputDiff:
    """Compare compiled ``actual`` with eager ``expected``; ``reference64`` gives fp64 outputs on demand.

    Integer and bool leaves compare exactly; floating leaves within ``tolerance`` (else torch.testing's
    default for their dtype). A low-precision leaf beyond it (fp16, bf16) passes when its error against
    the fp64 reference is within a small multiple of eager's own. ``reference_tf32`` (given when fp32 ran
    where TF32 is allowed) gives the fp64 outputs from TF32-rounded inputs and parameters: an fp32 leaf may
    then be as far from fp64 as a small multiple of that rounding's effect.
    """
    import torch

    result = OutputDiff()
    _structure(actual, expected, "out", result.mismatches, names)
    if result.mismatches:
        result.level = None
        return result
    reference_leaves: dict[str, Any] | None = None
    tf32_leaves: dict[str, Any] | None = None
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
            leaf_tolerance = (tolerance or default_tolerance(e.dtype)) if floating else Tolerance(0.0, 0.0)
            errors = _errors(a_cpu, e_cpu, leaf_tolerance)
            level = _level(e_cpu, errors) if floating else (None if bool(errors.bad.any()) else LEVELS[0])
            result.level = None if level is None or result.level is None else max(result.level, level)
            if not bool(errors.bad.any()):
                continue
            under_tf32 = reference_tf32 is not None and e.dtype == torch.float32
            low_precision = dtype_name(e.dtype) in LOW_PRECISION or under_tf32
            if low_precision and not errors.nonfinite and reference64 is not None:
                if reference_leaves is None:
                    reference_leaves = dict(leaves(reference64()))
                if under_tf32 and tf32_leaves is None:
                    tf32_leaves = dict(leaves(reference_tf32()))  # type: ignore[misc]
                ref = reference_leaves.get(path)
                tf32_ref = (tf32_leaves or {}).get(path) if under_tf32 else None
                if ref is not None and _within_second_opinion(
                    a_cpu, e_cpu, ref.cpu(), leaf_tolerance, None if tf32_ref is None else tf32_ref.cpu()
                ):
                    result.second_opinions.append(path)
                    continue
            kind = "nonfinite" if errors.nonfinite else "values"
            message = _values_message(path, a_cpu, e_cpu, errors, leaf_tolerance, names)
            result.mismatches.append(Mismatch(path, kind, message))
    if result.mismatches:
        result.level = result.level if all(m.kind == "values" for m in result.mismatches) else None
    return result
