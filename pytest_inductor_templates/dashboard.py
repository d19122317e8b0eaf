"""The summary per template that PyTorch's compiler dashboard reports: pass rate, geomean speedup, mean compile
seconds (and the compile caches' states behind that mean), geomean memory ratio, for the terminal and the command's
``report`` alike.

Each column is a function of one template's records; a column over a list of per-item values (a geomean, a mean)
is one line of ``COLUMNS``. Neither torch nor pytest is imported here.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from .outcomes import Outcome
from .record import EAGER, ItemRecord, geomean
from .tables import render, seconds, times


@dataclass(frozen=True)
class Template:
    """One compiled template's records: the record carrying each cell's verdict (its check item's, else its bench
    item's), and its timed records."""

    verdicts: list[ItemRecord]
    timed: list[ItemRecord]


def by_template(records: list[ItemRecord]) -> dict[str, Template]:
    """The compiled templates of ``records`` (the eager row left out), in the order they first appear."""
    verdicts: dict[tuple[str, str, str], ItemRecord] = {}
    for r in records:
        if r.template != EAGER and r.outcome is not None and (r.key not in verdicts or r.kind == "check"):
            verdicts[r.key] = r
    found: dict[str, Template] = {}
    for r in verdicts.values():
        found.setdefault(r.template, Template([], [])).verdicts.append(r)
    for r in records:
        if r.kind == "bench" and r.template in found:
            found[r.template].timed.append(r)
    return found


def values(records: list[ItemRecord], name: str) -> list[float]:
    """The record field ``name`` of each of ``records`` that has it."""
    return [value for r in records if (value := getattr(r, name)) is not None]


def pass_rate(template: Template) -> str:
    """``67% (2/3)``: the cells that passed of those that ran (not skipped)."""
    ran = [r for r in template.verdicts if r.outcome is not Outcome.SKIPPED]
    passed = sum(r.outcome is Outcome.PASS for r in ran)
    return f"{passed / len(ran):.0%} ({passed}/{len(ran)})" if ran else "-"


def geomean_of(values: list[float]) -> str:
    """``1.23x over 2``: the geometric mean of ratios (speedups, memory ratios) and how many it is over."""
    mean = geomean(values)
    return f"{times(mean)} over {len(values)}" if mean is not None else "n/a"


def mean_seconds(values: list[float]) -> str:
    """``2.31 s over 3``: the mean of durations and how many it is over."""
    return f"{seconds(statistics.fmean(values))} over {len(values)}" if values else "n/a"


def cache_states(template: Template) -> str:
    """``cold 2, warm 1``: the compile caches' state of the compiles behind the mean compile time."""
    states = Counter(r.cache_state for r in template.verdicts if r.cache_state is not None)
    return ", ".join(f"{state} {n}" for state, n in sorted(states.items())) or "-"


@dataclass(frozen=True)
class Column:
    header: str
    cell: Callable[[Template], str]
    optional: bool = False  # left out where it is n/a in every row (memory ratios: measured on CUDA only)
    figure: bool = True  # right-aligned


COLUMNS = (
    Column("cells", lambda t: str(len(t.verdicts))),
    Column("pass rate", pass_rate),
    Column("geomean speedup", lambda t: geomean_of(values(t.timed, "speedup"))),
    Column("mean compile", lambda t: mean_seconds(values(t.verdicts, "compile_seconds"))),
    Column("compile cache", cache_states, figure=False),
    Column("geomean memory ratio", lambda t: geomean_of(values(t.timed, "memory_ratio")), optional=True),
)


def summary_rows(records: list[ItemRecord]) -> tuple[list[Column], list[list[str]]]:
    """The columns shown (an optional one only where some row has it) and one row per compiled template, its name
    first."""
    templates = by_template(records)
    cells = {c.header: [c.cell(t) for t in templates.values()] for c in COLUMNS}
    shown = [c for c in COLUMNS if not (c.optional and all(cell == "n/a" for cell in cells[c.header]))]
    return shown, [[name, *(cells[c.header][i] for c in shown)] for i, name in enumerate(templates)]


def summary_table(records: list[ItemRecord], markdown: bool = False) -> list[str]:
    """One row per compiled template; no lines when no compiled template has a record."""
    shown, rows = summary_rows(records)
    right = [i + 1 for i, c in enumerate(shown) if c.figure]
    return render(["template", *(c.header for c in shown)], rows, right=right, markdown=markdown) if rows else []
