"""A comparison tolerance as the user gives it (option, ini, marker, sample) or the check derives it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


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


def smallest_normal(dtype: Any) -> float:
    import torch

    real = {torch.complex32: torch.float16, torch.complex64: torch.float32, torch.complex128: torch.float64}
    return float(torch.finfo(real.get(dtype, dtype)).tiny)


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
