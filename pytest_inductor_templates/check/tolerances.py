"""Comparison tolerances: torch.testing's defaults per dtype, scaled to each output; overrides; GraphNet's levels."""

from __future__ import annotations

from typing import Any

from ..tolerance import Tolerance

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


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def default_tolerance(dtype: Any) -> Tolerance:
    """torch.testing's tolerance for a floating or complex dtype, its atol scaled to each output's magnitude."""
    rtol, atol = _DEFAULTS.get(dtype_name(dtype), _DEFAULTS["float32"])
    return Tolerance(rtol, atol, scaled=True)


def machine_epsilon(dtype: Any) -> float:
    """The spacing of the dtype's numbers at 1.0."""
    import torch

    real = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}
    return float(torch.finfo(real.get(dtype, dtype)).eps)


def graphnet_tolerance(dtype: Any, level: int) -> Tolerance:
    """The tolerance of GraphNet's level ``t`` for ``dtype`` (absolute, as GraphNet grades)."""
    slope = _GRAPHNET_RTOL_SLOPE.get(dtype_name(dtype), _GRAPHNET_RTOL_SLOPE["float32"])
    return Tolerance(rtol=10 ** (slope * level), atol=10.0**level)
