"""The summary per template that PyTorch's compiler dashboard reports: pass rate, geomean speedup, mean compile
seconds (and the compile caches' states behind that mean), for the terminal and the command's ``report`` alike.

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


COLUMNS = (
    Column("cells", lambda t: str(len(t.verdicts))),
    Column("pass rate", pass_rate),
    Column("geomean speedup", lambda t: geomean_of([r.speedup for r in t.timed if r.speedup is not None])),
    Column(
        "mean compile",
        lambda t: mean_seconds([r.compile_seconds for r in t.verdicts if r.compile_seconds is not None]),
    ),
    Column("compile cache", cache_states),
)


def summary_table(records: list[ItemRecord], markdown: bool = False) -> list[str]:
    """One row per compiled template; no lines when no compiled template has a record."""
    templates = by_template(records)
    rows = [[name, *(c.cell(t) for c in COLUMNS)] for name, t in templates.items()]
    header = ["template", *(c.header for c in COLUMNS)]
    return render(header, rows, right=range(1, len(COLUMNS)), markdown=markdown) if rows else []
