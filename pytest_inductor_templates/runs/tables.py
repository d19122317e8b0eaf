"""One table renderer for the terminal and the command: aligned text columns, or a markdown table."""

from __future__ import annotations

from collections.abc import Sequence

from ..record import SHORT_NAMES, ItemRecord


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


def speedup_cell(record: ItemRecord | None) -> str:
    """A speedup in a table: ``1.23x``; a failed item's outcome instead; ``-`` where nothing ran."""
    if record is None:
        return "-"
    if record.failed and record.outcome is not None:
        return SHORT_NAMES[record.outcome]
    return f"{record.speedup:.2f}x" if record.speedup is not None else "n/a"
