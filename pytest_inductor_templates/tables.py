"""One table renderer for the terminal and the command: aligned text columns, or a markdown table."""

from __future__ import annotations

from collections.abc import Sequence

from .outcomes import SHORT_NAMES
from .record import ItemRecord


def plural(count: int, word: str) -> str:
    """``1 item``, ``2 items``."""
    return f"{count} {word}{'s' if count != 1 else ''}"


def render(
    header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = (), markdown: bool = False
) -> list[str]:
    """``rows`` under ``header``; the columns in ``right`` are right-aligned (numbers)."""
    if markdown:
        rule = ["---:" if i in right else "---" for i in range(len(header))]
        return ["| " + " | ".join(row) + " |" for row in [list(header), rule, *map(list, rows)]]
    table = [list(header), *map(list, rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return [
        "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in table
    ]


def times(value: float) -> str:
    """A ratio with three significant digits: ``1.23x``, ``122x``, ``0.00412x`` (never ``0.00x``)."""
    return f"{value:.0f}x" if value >= 1000 else f"{value:.3g}x"


def percent(fraction: float) -> str:
    """A fraction as a percentage with two significant digits: ``2.1%``, ``12%``, ``0.43%``."""
    return f"{fraction * 100:.0f}%" if fraction >= 1 else f"{fraction * 100:.2g}%"


def band_percent(half_width: float, target: float | None, unstable: bool | None) -> str:
    """A band's half-width as ``percent`` writes it, with more digits where that would read as within the target
    of an ``unstable`` band (``2.04%``, not ``2%``, against 2%)."""
    shown = percent(half_width)
    for digits in (3, 4):
        if not unstable or target is None or float(shown.rstrip("%")) / 100 > target:
            break
        shown = f"{half_width * 100:.{digits}g}%"
    return shown


def seconds(value: float) -> str:
    """A duration with three significant digits in a fitting unit: ``2.31 s``, ``412 ms``, ``3.1 us``, ``80 ns``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


NOISE_SPAN = 2.0  # an interval whose high end is more than this times its low end is noise, not a figure
MEDIANS_MARGIN = 1.25  # eager's own median over the paired compiled one may sit this far outside the interval


def medians_ratio(record: ItemRecord, eager: ItemRecord | None) -> float | None:
    """Eager's pytest-benchmark median over the compiled item's, where both items have one."""
    if eager is None or not eager.median or not record.median:
        return None
    return eager.median / record.median


def speedup_text(record: ItemRecord, eager: ItemRecord | None = None) -> str:
    """``1.23x ±2.1%``: the speedup and the half-width of its 95% interval; ``unstable`` when the interval
    stayed wider than the target; ``noise [0.31x, 4.2x]`` when the interval spans more than 2x (no point
    figure then); ``n/a`` without a speedup. With the cell's ``eager`` item, a note where pytest-benchmark's
    medians of the two items contradict the interval (beyond ``MEDIANS_MARGIN`` outside it), unless the item is
    launch-bound: its two items were timed seconds apart, and a host CPU that changed speed meanwhile (on the H200
    hosts, by up to 2x for seconds at a time) moves a launch-bound median by as much; the paired rounds met both
    speeds alike."""
    if record.speedup is None:
        return "n/a"
    low, high = record.speedup_low, record.speedup_high
    if low is not None and high is not None and (low <= 0 or high / low > NOISE_SPAN):
        text = f"noise [{times(max(low, 0.0))}, {times(high)}]"
    else:
        text = times(record.speedup)
        if low is not None and high is not None:
            text += f" ±{band_percent((high - low) / 2 / record.speedup, record.speedup_target, record.unstable)}"
        text += " unstable" if record.unstable else ""
    ratio = medians_ratio(record, eager) if not record.launch_bound else None
    if ratio is not None and low is not None and high is not None:
        if ratio > high * MEDIANS_MARGIN or ratio < low / MEDIANS_MARGIN:
            text += f" (benchmark medians disagree: eager's own item gives {times(ratio)}; trust the paired figure)"
    return text


def timings_text(processes: int, loads: int) -> str:
    """``once``, ``in 8 loads``, ``in 3 processes``, ``in 2 processes of 4 loads``."""
    if processes == 1:
        return "once" if loads == 1 else f"in {loads} loads"
    return f"in {processes} processes" + (f" of {loads} loads" if loads > 1 else "")


def processes_text(record: ItemRecord) -> str | None:
    """``over 3 timings: 1.21x, 1.25x, 1.23x`` (the item's own first), where there was more than one (loads,
    processes); a timing the band left out (its CPU slow throughout) reads ``1.43x (slow CPU, left out)``."""
    if not record.process_speedups:  # set only where there were repeats
        return None
    counted = record.process_counted
    if counted is None or len(counted) != len(record.process_speedups):
        counted = [True] * len(record.process_speedups)
    figures = [
        times(speedup) + ("" if kept else " (slow CPU, left out)")
        for speedup, kept in zip(record.process_speedups, counted, strict=True)
    ]
    return f"over {len(record.process_speedups)} timings: {', '.join(figures)}"


def speedup_cell(record: ItemRecord | None, eager: ItemRecord | None = None) -> str:
    """A speedup in a table (``speedup_text``); a failed item's outcome instead; ``-`` where nothing ran."""
    if record is None:
        return "-"
    if record.failed and record.outcome is not None:
        return SHORT_NAMES[record.outcome]
    return speedup_text(record, eager)


def memory_cell(record: ItemRecord | None) -> str:
    """The memory ratio (eager peak / compiled peak) in a table: ``1.25x``; ``-`` where none was measured."""
    return times(record.memory_ratio) if record is not None and record.memory_ratio is not None else "-"
