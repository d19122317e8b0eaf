"""Student's t quantiles for the 95% bands over a few timings, and the least width of a band on CUDA: where the
plugin makes a band over N timings (or processes), and where ``compare`` reads a record's band back as a standard
error."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z_975 = 1.959964  # the normal's 97.5th percentile
T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
    2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # Student's t, 97.5th percentile, 1 to 30 degrees of freedom  # fmt: skip
BAND_DEGREES = 7  # a band over eight or more values takes 7 degrees of freedom's t: kept as over eight (wider)


def t_975(count: int) -> float:
    """The 97.5th percentile of Student's t for a mean over ``count`` values (``count - 1`` degrees of freedom;
    from 8 values on, ``BAND_DEGREES``': a band over many timings is kept as over eight)."""
    if count < 2:
        raise ValueError(f"a t band needs at least 2 values, got {count}")
    return T_975[min(count - 1, BAND_DEGREES) - 1]


def degrees_of(quantile: float) -> float | None:
    """The degrees of freedom of the Student's t a band was made with, from its 97.5th percentile (as ``t_975``
    gives them); infinite for the normal's; None for any other."""
    if math.isclose(quantile, Z_975, rel_tol=1e-6):
        return math.inf
    return next((float(df) for df, t in enumerate(T_975, start=1) if math.isclose(quantile, t, rel_tol=1e-4)), None)


def t_975_of(degrees: float) -> float:
    """The 97.5th percentile of Student's t for ``degrees`` degrees of freedom, rounded down (never narrower); 30's
    from 30 on, the normal's for infinitely many."""
    if math.isinf(degrees):
        return Z_975
    whole = max(1, math.floor(degrees + 1e-9))  # ten, not 9.999...: the sum of two sixes
    return T_975[min(whole, len(T_975)) - 1]


def welch_degrees(errors: Sequence[float], degrees: Sequence[float]) -> float:
    """The degrees of freedom of a sum of independent estimates, each with its standard error and degrees of freedom
    (Welch and Satterthwaite): two bands over six values each give ten, not five."""
    total = sum(error**2 for error in errors) ** 2
    parts = sum(error**4 / df for error, df in zip(errors, degrees, strict=True) if math.isfinite(df))
    return total / parts if parts > 0 else math.inf


BAND_FLOOR = 0.01  # on CUDA a speedup's band is at least this wide each side (log scale)
LAUNCH_BOUND_BAND_FLOOR = 0.02  # ... and this wide where the host's CPU speed is in the figure (launch-bound)


def band_floor(launch_bound: bool | None) -> float:
    """The least half-width of a speedup's band (log scale): on CUDA (``launch_bound`` known) ``BAND_FLOOR``, or
    ``LAUNCH_BOUND_BAND_FLOOR`` launch-bound; elsewhere none."""
    if launch_bound is None:
        return 0.0
    return LAUNCH_BOUND_BAND_FLOOR if launch_bound else BAND_FLOOR


TRIM = 0.2  # a band over six or more values is over their 20%-trimmed mean: the farthest fifth each side left out
TRIM_FROM = 6  # ... from this many on (over five, one left out each side would keep three: a wider band than four's)


def trimmed(count: int) -> int:
    """How many of ``count`` values a band over them leaves out at each end (a 20%-trimmed mean, rounded down: none
    of up to five, one of six to nine, two of ten to fourteen)."""
    return int(TRIM * count) if count >= TRIM_FROM else 0


def band_units(processes: int | None, loads: int | None) -> int:
    """The count a speedup's band over its timings took Student's t for: the values it was over (the processes'
    means where several processes timed it, else one process's loads; 1: one timing, whose own interval is its
    band) less those its trimmed mean left out."""
    processes, loads = processes or 1, loads or 1
    count = processes if processes > 1 else loads
    return count - 2 * trimmed(count)
