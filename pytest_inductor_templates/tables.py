"""One table renderer for the terminal and the command: aligned text columns, or a markdown table."""

from __future__ import annotations

from collections.abc import Sequence

from .outcomes import SHORT_NAMES
from .record import ItemRecord


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


def seconds(value: float) -> str:
    """A duration with three significant digits in a fitting unit: ``2.31 s``, ``412 ms``, ``3.1 us``, ``80 ns``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def speedup_text(record: ItemRecord) -> str:
    """``1.23x ±2.1%``: the speedup and the half-width of its 95% interval; ``unstable`` when the interval
    stayed wider than the target; ``n/a`` without a speedup."""
    if record.speedup is None:
        return "n/a"
    text = times(record.speedup)
    if record.speedup_low is not None and record.speedup_high is not None and record.speedup > 0:
        text += f" ±{percent((record.speedup_high - record.speedup_low) / 2 / record.speedup)}"
    return text + (" unstable" if record.unstable else "")


def speedup_cell(record: ItemRecord | None) -> str:
    """A speedup in a table (``speedup_text``); a failed item's outcome instead; ``-`` where nothing ran."""
    if record is None:
        return "-"
    if record.failed and record.outcome is not None:
        return SHORT_NAMES[record.outcome]
    return speedup_text(record)
