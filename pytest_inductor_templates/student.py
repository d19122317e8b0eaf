"""Student's t quantiles for the 95% bands over a few timings: where the plugin makes a band over N timings (or
processes), and where ``compare`` reads a record's band back as a standard error."""

from __future__ import annotations

Z_975 = 1.959964  # the normal's 97.5th percentile
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365)  # Student's t, 97.5th percentile, 1 to 7 degrees of freedom


def t_975(count: int) -> float:
    """The 97.5th percentile of Student's t for a mean over ``count`` values (``count - 1`` degrees of freedom;
    from 8 values on, 7's: a band over many timings is kept as over eight)."""
    if count < 2:
        raise ValueError(f"a t band needs at least 2 values, got {count}")
    return T_975[min(count - 2, len(T_975) - 1)]


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
