"""A check's verdict: outcome, one-line reason, full explanation, and the rule that decided."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..outcomes import Outcome


@dataclass
class CheckResult:
    """The verdict of one check, with a one-line reason and the full explanation."""

    outcome: Outcome
    reason: str = ""
    details: str = ""
    level: int | None = None  # tightest GraphNet tolerance level at which the item passes
    rule: str = ""  # what decided a compared item: ``first comparison``, ``second opinion``, ``stale output``, ...
    error: BaseException | None = None  # the exception behind a compile or runtime failure
    second_opinions: list[str] = field(default_factory=list)  # the float64 figures of each output it cleared
    uncompared: list[str] = field(default_factory=list)  # floating outputs eager left NaN or Inf everywhere
    # the failing call's outputs the float64 second opinion failed ("call 1 of 2: out[0]") -> compiled's and eager's
    # own RMSE against the float64 run
    float64_rmse: dict[str, tuple[float, float]] = field(default_factory=dict)
