"""Comparison tolerances: torch.testing's defaults per dtype, scaled to each output; overrides; GraphNet's levels."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# torch.testing.assert_close's defaults.
_DEFAULTS = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex32": (1e-3, 1e-5),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}
# GraphNet's levels: atol = 10^t and rtol = 10^(slope * t) per dtype; t = -5 gives the defaults.
_GRAPHNET_RTOL_SLOPE = {"float16": 3 / 5, "bfloat16": 1.796 / 5, "float32": 5.886 / 5, "float64": 7 / 5}
LEVELS = range(-10, 6)


@dataclass(frozen=True)
class Tolerance:
    """Relative and absolute tolerance: a pair passes when |a - e| <= atol + rtol * |e|.

    ``scaled``: atol is relative to the output's own magnitude (its largest finite |eager|), as the
    per-dtype defaults are; an explicit tolerance (session option, marker, sample) is absolute, as in
    torch.testing.
    """

    rtol: float
    atol: float
    scaled: bool = False

    def atol_for(self, scale: float, dtype: Any) -> float:
        """The absolute tolerance of one output whose largest finite |eager| is ``scale``: ``atol * scale``
        when scaled, never below the dtype's smallest normal number (where it has no relative precision)."""
        if not self.scaled:
            return self.atol
        return max(self.atol * scale, smallest_normal(dtype))

    def describe(self) -> str:
        return f"rtol {self.rtol:g}, atol {self.atol:g}" + (" x max|eager|" if self.scaled else "")


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def default_tolerance(dtype: Any) -> Tolerance:
    """torch.testing's tolerance for a floating or complex dtype, its atol scaled to each output's magnitude."""
    rtol, atol = _DEFAULTS.get(dtype_name(dtype), _DEFAULTS["float32"])
    return Tolerance(rtol, atol, scaled=True)


def smallest_normal(dtype: Any) -> float:
    import torch

    real = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}
    return float(torch.finfo(real.get(dtype, dtype)).tiny)


def machine_epsilon(dtype: Any) -> float:
    """The spacing of the dtype's numbers at 1.0."""
    import torch

    real = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}
    return float(torch.finfo(real.get(dtype, dtype)).eps)


def graphnet_tolerance(dtype: Any, level: int) -> Tolerance:
    """The tolerance of GraphNet's level ``t`` for ``dtype`` (absolute, as GraphNet grades)."""
    slope = _GRAPHNET_RTOL_SLOPE.get(dtype_name(dtype), _GRAPHNET_RTOL_SLOPE["float32"])
    return Tolerance(rtol=10 ** (slope * level), atol=10.0**level)


def explicit_tolerance(rtol: Any, atol: Any) -> Tolerance:
    """An absolute tolerance given by the user (option, ini, marker); ValueError names a value that is not a
    finite number >= 0 (NaN or Inf would turn the check off)."""
    for name, value in (("rtol", rtol), ("atol", atol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return Tolerance(float(rtol), float(atol))


def tolerance_from_marker(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tolerance:
    """The tolerance of ``@pytest.mark.inductor_tolerance(rtol=..., atol=...)``; ValueError says what is wrong."""
    if args or set(kwargs) != {"rtol", "atol"}:
        raise ValueError(f"takes rtol= and atol= only, got {_call(args, kwargs)}")
    return explicit_tolerance(kwargs["rtol"], kwargs["atol"])


def _call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    return "(" + ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())]) + ")"
