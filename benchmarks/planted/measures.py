"""How big a change is: against the dtype's legitimate reassociation error, against eager's own error from
float64 (as the second opinion measures it), and whether the float64 run is a fair reference."""

from __future__ import annotations

import math
from typing import Any

from .outputs import floating, leaves

# A change is beyond the dtype's legitimate reassociation error where |change| > rtol * |eager| + atol * max|eager|
# (max over the output): torch.testing's per-dtype tolerances with atol scaled to the output, the first
# comparison's own rule. Reordering a reduction of n terms moves a result by about sqrt(n) units in the last
# place of its largest partial sums; the measured compiled-vs-eager and reordered-vs-eager differences (the
# summary prints their maxima) stay below this.
LEGIT = {"float32": (1.3e-6, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float16": (1e-3, 1e-5)}


def untrusted(observed: Any) -> str | None:
    """Why the float64 run is no fair reference for some floating output (the second opinion's own rule), or
    None."""
    from pytest_inductor_templates.check.second_opinion import untrusted

    for call, out in enumerate(observed.expected):
        reference = observed.reference(call)
        refs, tf32s = reference.leaves or {}, reference.tf32_leaves or {}
        for path, e in leaves(out):
            if hasattr(e, "dtype") and floating(e) and path in refs:
                if why := untrusted(e, refs[path], reference.precision, path in tf32s):
                    return f"{path}: {why}"
    return None


def chooses_otherwise(observed: Any) -> str | None:
    """Where the float64 run's integer or bool output differs from eager's (a near tie, in the dtype, that
    float64 decides the other way: then recomputing in float64 is no harmless change), or None."""
    import torch

    for call, (out, wide) in enumerate(zip(observed.expected, observed.float64.outputs() or [], strict=False)):
        refs = dict(leaves(wide))
        for path, e in leaves(out):
            if hasattr(e, "dtype") and not floating(e) and path in refs:
                if not torch.equal(e.detach().cpu(), refs[path].detach().cpu()):
                    return f"call {call + 1} {path}: the float64 run's {e.dtype} output differs from eager's"
    return None


def change_beyond_legit(before: list[Any], after: list[Any], expected: list[Any], dtype: str) -> float:
    """The largest change the transform made, in units of the legitimate error (> 1: beyond it); inf for any
    change of an element's class (finite, NaN, +Inf, -Inf) or of an integer or bool output."""
    import torch

    from pytest_inductor_templates.check.diff import same_classes

    rtol, atol = LEGIT[dtype]
    worst = 0.0
    for b_out, a_out, e_out in zip(before, after, expected, strict=True):
        for (_, b), (_, a), (_, e) in zip(leaves(b_out), leaves(a_out), leaves(e_out), strict=True):
            if not isinstance(b, torch.Tensor):
                continue
            b, a, e = b.detach().cpu(), a.detach().cpu(), e.detach().cpu()
            if a.shape != b.shape or a.dtype != b.dtype:
                return math.inf
            if not floating(b):
                worst = max(worst, math.inf if not torch.equal(a, b) else 0.0)
                continue
            b64, a64, e64 = b.double(), a.double(), e.double()
            if not same_classes(b64, a64):
                return math.inf
            finite = b64.isfinite() & a64.isfinite() & e64.isfinite()
            if not bool(finite.any()):
                continue
            scale = float(e64[finite].abs().max())
            legit = rtol * e64.abs() + max(atol * scale, torch.finfo(b.dtype).tiny)
            worst = max(worst, float(((a64 - b64).abs() / legit)[finite].max()))
    return worst


def beyond_eager_error(observed: Any, after: list[Any]) -> float:
    """How far the change stands out from eager's own rounding error, in units of what the second opinion
    allows (> 1: it does): the largest, over every floating output, of the change's RMSE over the output, its
    worst element, and its RMSE over every slice along every dimension, each divided by 3x eager's own
    distance from float64 in the same place (plus one unit roundoff of the values there). Eager's distance is
    the second opinion's own (``eager_error``): on CUDA, where a convolution or GEMM runs under its TF32 flag,
    at least TF32 rounding's. Where float64 is missing or untrusted, inf: only the legitimate error decides."""
    import torch

    from pytest_inductor_templates.check.diff import same_classes
    from pytest_inductor_templates.check.second_opinion import (
        MIN_SLICE,
        SLICE_FACTOR,
        SLICE_QUANTILE,
        eager_error,
        untrusted,
    )

    if observed.float64.outputs() is None:
        return math.inf
    worst = 0.0
    for call, (before_out, after_out, e_out) in enumerate(zip(observed.actual, after, observed.expected, strict=True)):
        reference = observed.reference(call)
        refs, tf32s = reference.leaves or {}, reference.tf32_leaves or {}
        for (path, b), (_, a), (_, e) in zip(leaves(before_out), leaves(after_out), leaves(e_out), strict=True):
            if not hasattr(b, "dtype") or (a.shape == b.shape and torch.equal(a, b)):
                continue
            if not floating(b):
                return math.inf  # an integer or bool changed: no rounding excuses it
            ref, tf32 = refs.get(path), tf32s.get(path)
            if ref is None or a.shape != b.shape or untrusted(e, ref, reference.precision, tf32 is not None):
                return math.inf
            b64, a64, e64 = (t.detach().cpu().double() for t in (b, a, e))
            if not same_classes(b64, a64):
                return math.inf  # a NaN or Inf added, removed or changed (NaN to Inf, say): no rounding excuses it
            finite = b64.isfinite() & a64.isfinite() & e64.isfinite()
            zero = torch.zeros((), dtype=torch.float64)
            change = torch.where(finite, (a64 - b64).abs(), zero)
            own = torch.where(finite, eager_error(e, ref, tf32), zero)
            values = torch.where(finite, e64.abs(), zero)
            roundoff = torch.finfo(e.dtype).eps / 2
            rms = lambda t, dims=None: t.pow(2).mean(dim=dims).sqrt()  # noqa: E731
            ratios = [
                rms(change) / (SLICE_FACTOR * rms(own) + roundoff * rms(values)),
                change.max() / (SLICE_FACTOR * own.max() + roundoff * values.max()),
            ]
            for dim, size in enumerate(change.shape):
                if change.dim() > 1 and size > 1 and change.numel() // size >= MIN_SLICE:
                    others = [d for d in range(change.dim()) if d != dim]
                    slices = rms(own, others)
                    slices = slices.clamp(min=float(slices.float().quantile(SLICE_QUANTILE)))
                    ratio = rms(change, others) / (SLICE_FACTOR * slices + roundoff * rms(values, others))
                    ratios.append(ratio.max())
            worst = max(worst, *(float(r) for r in ratios))
    return worst


def evidence(observed: Any) -> list[dict[str, Any]]:
    """Per floating output of each call: its scale, compiled-vs-eager difference, and both sides' distance to
    float64 (RMSE and worst element)."""
    from pytest_inductor_templates.check.second_opinion import untrusted

    wide = observed.float64.outputs()
    rows = []
    for call, (a_out, e_out) in enumerate(zip(observed.actual, observed.expected, strict=True)):
        refs = dict(leaves(wide[call])) if wide is not None else {}
        for (path, a), (_, e) in zip(leaves(a_out), leaves(e_out), strict=True):
            if not hasattr(e, "dtype") or not floating(e):
                continue
            a64, e64 = a.detach().cpu().double(), e.detach().cpu().double()
            finite = a64.isfinite() & e64.isfinite()
            scale = float(e64[finite].abs().max()) if bool(finite.any()) else 0.0
            row: dict[str, Any] = {
                "call": call + 1,
                "output": path,
                "max_abs_eager": scale,
                "compiled_vs_eager_worst": float((a64 - e64)[finite].abs().max()) if bool(finite.any()) else 0.0,
            }
            ref = refs.get(path)
            if ref is not None and ref.shape == e.shape:
                r64 = ref.detach().cpu().double()
                both = finite & r64.isfinite()
                for side, t in (("compiled", a64), ("eager", e64)):
                    diff = (t - r64)[both]
                    row[f"{side}_vs_float64_rmse"] = float(diff.pow(2).mean().sqrt()) if diff.numel() else 0.0
                    row[f"{side}_vs_float64_worst"] = float(diff.abs().max()) if diff.numel() else 0.0
                row["float64_untrusted"] = untrusted(e, ref)
            rows.append(row)
    return rows
