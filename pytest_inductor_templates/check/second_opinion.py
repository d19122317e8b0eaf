"""The float64 second opinion on one floating output that failed the first comparison.

In the spirit of PyTorch's own harness (``torch._dynamo.utils.same``): when compiled and eager differ by
more than the first comparison allows, both are measured against a float64 run of the same model, and the
compiled output passes when it is about as close to float64 as eager is: in RMSE, in its worst element,
and in every slice along every dimension (a row, a channel, a batch entry), so that a fault confined to one
part of the output is not averaged away. The float64 run is trusted only when eager itself is close to it:
it may be a different program (a mask compared with ``==``, an integer cast, a data-dependent branch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..outcomes import FIRST_COMPARISON, SECOND_OPINION
from ..tolerance import smallest_normal
from .float64 import TF32_EPSILON
from .tolerances import machine_epsilon

RMSE_FACTOR = 3.0  # compiled's RMSE against float64 may be this many times eager's (same(): 2, or 3 in low precision)
WORST_FACTOR = 3.0  # its worst element this many times eager's worst
SLICE_FACTOR = 3.0  # and each slice's RMSE this many times eager's in the same slice, or in its 90th-percentile
SLICE_QUANTILE = 0.9  # slice along that dimension, whichever is larger (scaled as ``_worst_slice`` says)
MIN_SLICE = 64  # slices of fewer elements are too noisy to compare on their own
# Each bound also allows one rounding of what it measures: the unit roundoff (half the machine epsilon) times
# the output's RMS (RMSE), its largest |eager| (worst element), the slice's RMS (slice).
# The float64 run is a fair reference when eager's worst error against it is within TRUST_ROUNDOFFS unit
# roundoffs of the output's largest |eager| (float32: 9.8e-4 of it), and never beyond TRUST_AT_MOST of it
# (bfloat16, float16, TF32); beyond, the float64 run computes something else than eager.
TRUST_ROUNDOFFS = 2.0**14
TRUST_AT_MOST = 0.25


@dataclass(frozen=True)
class Opinion:
    """The second opinion on one output: cleared or not, the rule that decided, the figures behind it."""

    cleared: bool
    rule: str  # ``second opinion`` when cleared; which bound failed; ``first comparison`` when no trusted reference
    evidence: str
    distances: Distances | None = None  # the figures of an output it failed (a diagnosis reads them)


@dataclass(frozen=True)
class Reference:
    """The float64 outputs of one call by path (and under TF32, those from TF32-rounded inputs), or why none."""

    leaves: dict[str, Any] | None
    tf32_leaves: dict[str, Any] | None = None
    reason: str | None = None
    precision: Any = None  # the least precise floating dtype eager computed in (its inputs, parameters, buffers)


@dataclass(frozen=True)
class Distances:
    """How far compiled and eager are from the float64 run, on one output: RMSE and worst element."""

    compiled_rmse: float
    eager_rmse: float
    compiled_worst: float
    eager_worst: float
    left_out: int = 0  # elements NaN or Inf in eager (and compiled) but finite in float64, left out
    eager_own_rmse: float | None = None  # under TF32, eager's own RMSE (``eager_rmse`` is then TF32's allowance)

    @property
    def own_rmse(self) -> tuple[float, float]:
        """Compiled's and eager's own RMSE against float64 (eager's without TF32's allowance)."""
        return self.compiled_rmse, self.eager_own_rmse if self.eager_own_rmse is not None else self.eager_rmse

    def __str__(self) -> str:
        left_out = f" (leaving out {self.left_out} elements where eager is NaN or Inf and float64 is finite)"
        return (
            f"against float64{left_out if self.left_out else ''}, compiled vs eager: "
            f"RMSE {self.compiled_rmse:.3g} vs {self.eager_rmse:.3g}, "
            f"worst element {self.compiled_worst:.3g} vs {self.eager_worst:.3g}"
        )


def _double(t: Any) -> Any:
    import torch

    t = t.detach().cpu()
    return (torch.view_as_real(t) if t.is_complex() else t).double()


def _rms(t: Any) -> float:
    return float(t.pow(2).mean().sqrt()) if t.numel() else 0.0


def untrusted(expected: Any, ref: Any, precision: Any = None, tf32: bool = False) -> str | None:
    """Why the float64 output ``ref`` is no fair reference for eager's ``expected``, or None when it is. The
    bound is in roundoffs of ``expected``'s dtype, or of ``precision`` where eager computed in a less precise
    one (a bfloat16 model that returns float32 is only as close to float64 as bfloat16 allows), or of TF32's
    with ``tf32`` (a float32 model whose convolutions or GEMMs may run in TF32); and never below the smallest
    normal number of ``expected``'s dtype, under which it has no precision (float64 keeps 1e-80 where float32
    flushes it to 0). Where eager is NaN or Inf and float64 is finite (eager overflowed in its own dtype: a
    float32 mask value that bfloat16 cannot hold), float64 is still a reference for the other elements: only
    they are compared, and compiled has to be non-finite in the same places before a second opinion is asked."""
    e, r = _double(expected), _double(ref)
    if r.shape != e.shape:
        return f"float64 run not trusted: its output has shape {list(r.shape)}, eager's {list(e.shape)}"
    finite = e.isfinite()
    if not bool(r.isfinite()[finite].all()):
        count = int((~r.isfinite() & finite).sum())
        return f"float64 run not trusted: it is not finite in {count} places where eager is"
    scale = float(e[finite].abs().max()) if bool(finite.any()) else 0.0
    worst = float((e - r)[finite].abs().max()) if bool(finite.any()) else 0.0
    epsilon = max(
        machine_epsilon(expected.dtype),
        machine_epsilon(precision) if precision is not None else 0.0,
        TF32_EPSILON if tf32 else 0.0,
    )
    if worst > max(min(TRUST_ROUNDOFFS * epsilon / 2, TRUST_AT_MOST) * scale, smallest_normal(expected.dtype)):
        relative = f" ({worst / scale:.2g}x max|eager|)" if scale else ""
        return f"float64 run not trusted: eager is {worst:.3g} from it at worst{relative}: it computes something else"
    return None


def eager_error(expected: Any, ref: Any, tf32: Any = None) -> Any:
    """Eager's distance from the float64 output ``ref`` by element, in float64 (0 where eager is not finite):
    what the second opinion lets compiled be, up to its factors. With ``tf32`` (the float64 run from TF32-rounded
    inputs and weights), at least TF32 rounding's own distance: under TF32, eager may be that far."""
    import torch

    e, r = _double(expected), _double(ref)
    finite = e.isfinite()
    zero = torch.zeros((), dtype=torch.float64)
    error = torch.where(finite, (e - r).abs(), zero)
    if tf32 is not None:  # where the TF32 run is not finite it allows nothing (an Inf would allow anything)
        tf32_error = (_double(tf32) - r).abs()
        error = torch.maximum(error, torch.where(finite & tf32_error.isfinite(), tf32_error, zero))
    return error


def _worst_slice(err_c: Any, err_e: Any, e: Any, roundoff: float) -> tuple[str, float, float] | None:
    """The slice (dimension and index) where compiled's RMSE is farthest beyond ``SLICE_FACTOR`` times eager's, scaled
    by how much farther compiled's median slice is from float64 than eager's."""
    worst: tuple[float, str, float, float] | None = None
    for dim, size in enumerate(err_c.shape):
        if err_c.dim() < 2 or size < 2 or err_c.numel() // size < MIN_SLICE:
            continue
        others = [d for d in range(err_c.dim()) if d != dim]
        c, w, values = (t.pow(2).mean(dim=others).sqrt() for t in (err_c, err_e, e))
        # eager's error in a slice can be one shared rounding (a row's sum broadcast along the row), by luck
        # near zero, while compiled's is by luck large: the bound is never below eager's 90th-percentile slice
        typical = float(w.quantile(SLICE_QUANTILE)) if w.numel() > 1 else float(w.max())
        # a reduction that Inductor adds up less accurately everywhere (8-lane AVX2 sums against ATen's cascade sums:
        # 2-4x eager's error on a row of 1024) is the whole-output RMSE's to judge; each row's error there is one
        # rounding of its sum, whose largest over 64 rows is beyond 3x eager's 90th-percentile row by chance alone.
        # So the bound grows by how much farther compiled's median slice is than eager's: a fault in fewer than
        # half the slices leaves that median as it was
        eager_median = float(w.median())
        everywhere = max(1.0, float(c.median()) / eager_median) if eager_median > 0 else 1.0
        excess = c - (SLICE_FACTOR * everywhere * w.clamp(min=typical) + roundoff * values)
        index = int(excess.argmax())
        if worst is None or float(excess[index]) > worst[0]:
            worst = (float(excess[index]), f"dim {dim} index {index}", float(c[index]), float(w[index]))
    if worst is None or worst[0] <= 0:
        return None
    return worst[1], worst[2], worst[3]


def opinion_on(path: str, actual: Any, expected: Any, reference: Reference) -> Opinion:
    """Whether the compiled ``actual`` is about as close to the float64 reference as eager ``expected`` is
    (CPU tensors of one floating dtype and shape, with NaN and Inf in the same places)."""
    ref = (reference.leaves or {}).get(path)
    if ref is None:
        why = reference.reason or "the float64 run gives no such output"
        return Opinion(False, FIRST_COMPARISON, f"no float64 second opinion: {why}")
    tf32 = (reference.tf32_leaves or {}).get(path)
    problem = untrusted(expected, ref, reference.precision, tf32=tf32 is not None)
    if problem is not None:
        return Opinion(False, FIRST_COMPARISON, problem)
    import torch

    a, e, r = _double(actual), _double(expected), _double(ref)
    finite = e.isfinite()
    if not bool((a.isfinite() == finite).all()):  # the first comparison fails these as nonfinite
        return Opinion(False, "nonfinite", "no float64 second opinion: NaN or Inf where eager has none, or the reverse")
    zero = torch.zeros((), dtype=torch.float64)
    err_c = torch.where(finite, (a - r).abs(), zero)
    err_e = eager_error(expected, ref, tf32)
    values = torch.where(finite, e, zero).abs()
    roundoff = machine_epsilon(expected.dtype) / 2
    left_out = int((~finite & r.isfinite()).sum())
    own = _rms(torch.where(finite, (e - r).abs(), zero)) if tf32 is not None else None
    distances = Distances(_rms(err_c), _rms(err_e), float(err_c.max()), float(err_e.max()), left_out, own)
    if distances.compiled_rmse > RMSE_FACTOR * distances.eager_rmse + roundoff * _rms(values):
        return Opinion(False, "second opinion: RMSE", f"{distances}: RMSE beyond {RMSE_FACTOR:g}x eager's", distances)
    if distances.compiled_worst > WORST_FACTOR * distances.eager_worst + roundoff * float(values.max()):
        return Opinion(
            False, "second opinion: worst element", f"{distances}: worst beyond {WORST_FACTOR:g}x eager's", distances
        )
    bad_slice = _worst_slice(err_c, err_e, values, roundoff)
    if bad_slice is not None:
        where, c, w = bad_slice
        return Opinion(
            False,
            "second opinion: slice",
            f"{distances}; at {where}: RMSE {c:.3g} vs {w:.3g}, beyond {SLICE_FACTOR:g}x eager's",
            distances,
        )
    return Opinion(True, SECOND_OPINION, f"{path}: {distances}")
