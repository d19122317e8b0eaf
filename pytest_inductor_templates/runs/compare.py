"""Comparing two saved runs: speedup changes per template (a ratio of ratios), time and correctness changes."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..record import EAGER, FAILURES, Outcome, geomean
from .files import Cell, Key, Run
from .tables import render


@dataclass
class Row:
    """One (sample, device) of one template in both runs."""

    sample: str
    device: str
    base_speedup: float | None
    new_speedup: float | None
    base_median: float | None
    new_median: float | None
    base_outcome: str | None
    new_outcome: str | None

    @property
    def speedup_change(self) -> float | None:
        """new speedup / base speedup - 1: each speedup is against eager of its own run."""
        if self.base_speedup is None or self.new_speedup is None:
            return None
        return self.new_speedup / self.base_speedup - 1

    @property
    def time_change(self) -> float | None:
        if not self.base_median or self.new_median is None:
            return None
        return self.new_median / self.base_median - 1


@dataclass
class TemplateComparison:
    template: str
    rows: list[Row] = field(default_factory=list)

    @property
    def compared(self) -> list[Row]:
        """The rows with a speedup in both runs: the geomeans are over these alone."""
        return [r for r in self.rows if r.speedup_change is not None]

    @property
    def base_geomean(self) -> float | None:
        return geomean(r.base_speedup for r in self.compared if r.base_speedup is not None)

    @property
    def new_geomean(self) -> float | None:
        return geomean(r.new_speedup for r in self.compared if r.new_speedup is not None)

    @property
    def geomean_change(self) -> float | None:
        base, new = self.base_geomean, self.new_geomean
        return None if base is None or new is None else new / base - 1


@dataclass
class RunComparison:
    base: Run
    new: Run
    templates: list[TemplateComparison]
    newly_failing: list[tuple[Key, str, str]]  # key, base outcome, new outcome
    newly_passing: list[tuple[Key, str, str]]
    only_in_base: list[Key]
    only_in_new: list[Key]

    def speedup_drops(self, limit: float) -> list[str]:
        """Why the speedup fell by more than ``limit`` (a fraction) on a sample or in a geomean."""
        found = []
        for template in self.templates:
            for row in template.rows:
                if row.speedup_change is not None and row.speedup_change < -limit:
                    found.append(
                        f"{template.template}: speedup on {row.sample} [{row.device}] fell {-row.speedup_change:.1%} "
                        f"({row.base_speedup:.2f}x -> {row.new_speedup:.2f}x)"
                    )
            change = template.geomean_change
            if change is not None and change < -limit:
                found.append(
                    f"{template.template}: geomean speedup fell {-change:.1%} "
                    f"({template.base_geomean:.2f}x -> {template.new_geomean:.2f}x)"
                )
        return found

    def correctness_drops(self) -> list[str]:
        return [f"{'/'.join(key)}: newly failing ({base} -> {new})" for key, base, new in self.newly_failing]


def _outcome_name(cell: Cell | None) -> str | None:
    outcome = cell.outcome if cell is not None else None
    return outcome.value if outcome is not None else None


def _failing(outcome: str | None) -> bool:
    return outcome is not None and Outcome(outcome) in FAILURES


def compare_runs(base: Run, new: Run) -> RunComparison:
    keys = list(dict.fromkeys([*base.cells, *new.cells]))
    templates: dict[str, TemplateComparison] = {}
    newly_failing, newly_passing, only_base, only_new = [], [], [], []
    for key in keys:
        sample, template, device = key
        b, n = base.cells.get(key), new.cells.get(key)
        if n is None:
            only_base.append(key)
            continue
        if b is None:
            only_new.append(key)
            continue
        base_outcome, new_outcome = _outcome_name(b), _outcome_name(n)
        if not _failing(base_outcome) and _failing(new_outcome):
            newly_failing.append((key, base_outcome or PASS, str(new_outcome)))
        elif _failing(base_outcome) and not _failing(new_outcome):
            newly_passing.append((key, str(base_outcome), new_outcome or PASS))
        if template == EAGER:
            continue
        templates.setdefault(template, TemplateComparison(template)).rows.append(
            Row(sample, device, b.speedup, n.speedup, b.median, n.median, base_outcome, new_outcome)
        )
    return RunComparison(base, new, list(templates.values()), newly_failing, newly_passing, only_base, only_new)


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x"


def _time(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


PASS = Outcome.PASS.value


def _outcome(row: Row) -> str:
    base, new = row.base_outcome or PASS, row.new_outcome or PASS
    return base if base == new else f"{base} -> {new}"


HEADER = ["sample [device]", "base speedup", "new speedup", "change", "base median", "new median", "time", "outcome"]


def _cells(row: Row) -> list[str]:
    return [
        f"{row.sample} [{row.device}]",
        _x(row.base_speedup),
        _x(row.new_speedup),
        _pct(row.speedup_change),
        _time(row.base_median),
        _time(row.new_median),
        _pct(row.time_change),
        _outcome(row),
    ]


def _geomean_line(template: TemplateComparison) -> str:
    return (
        f"geomean speedup {_x(template.base_geomean)} -> {_x(template.new_geomean)} "
        f"({_pct(template.geomean_change)}) over {len(template.compared)} sample(s)"
    )


def _notes(comparison: RunComparison) -> list[str]:
    notes = [f"base: {comparison.base.path} ({comparison.base.machine})"]
    notes.append(f"new:  {comparison.new.path} ({comparison.new.machine})")
    base_gpu, new_gpu = comparison.base.gpu, comparison.new.gpu
    if base_gpu != new_gpu:
        notes.append(
            f"note: the runs are from different GPUs ({base_gpu or 'no GPU'} vs {new_gpu or 'no GPU'}): speedups "
            "(each against eager of its own run) compare; absolute times do not"
        )
    for which, run in (("base", comparison.base), ("new", comparison.new)):
        if run.partial:
            notes.append(f"note: the {which} run is partial ({run.partial}): items it lacks show as only in the other")
    notes += [f"newly failing: {'/'.join(k)} ({b} -> {n})" for k, b, n in comparison.newly_failing]
    notes += [f"newly passing: {'/'.join(k)} ({b} -> {n})" for k, b, n in comparison.newly_passing]
    notes += [f"only in base: {'/'.join(k)}" for k in comparison.only_in_base]
    notes += [f"only in new: {'/'.join(k)}" for k in comparison.only_in_new]
    return notes


def as_table(comparison: RunComparison) -> str:
    lines = _notes(comparison)
    for template in comparison.templates:
        lines += ["", f"template {template.template}: {_geomean_line(template)}"]
        lines += render(HEADER, [_cells(r) for r in template.rows], right=range(1, 7))
    return "\n".join(lines)


def as_markdown(comparison: RunComparison) -> str:
    lines = ["## pytest-inductor-templates compare", ""]
    lines += [f"- {note}" for note in _notes(comparison)]
    for template in comparison.templates:
        lines += ["", f"### {template.template}: {_geomean_line(template)}", ""]
        lines += render(HEADER, [_cells(r) for r in template.rows], right=range(1, 7), markdown=True)
    return "\n".join(lines)


def as_json(comparison: RunComparison, failures: list[str]) -> str:
    data: dict[str, Any] = {
        "base": {"path": comparison.base.path, "machine_info": comparison.base.data.get("machine_info", {})},
        "new": {"path": comparison.new.path, "machine_info": comparison.new.data.get("machine_info", {})},
        "templates": {
            t.template: {
                "base_geomean": t.base_geomean,
                "new_geomean": t.new_geomean,
                "geomean_change": t.geomean_change,
                "rows": [
                    {**asdict(r), "speedup_change": r.speedup_change, "time_change": r.time_change} for r in t.rows
                ],
            }
            for t in comparison.templates
        },
        "newly_failing": [{"key": list(k), "base": b, "new": n} for k, b, n in comparison.newly_failing],
        "newly_passing": [{"key": list(k), "base": b, "new": n} for k, b, n in comparison.newly_passing],
        "only_in_base": [list(k) for k in comparison.only_in_base],
        "only_in_new": [list(k) for k in comparison.only_in_new],
        "failures": failures,
    }
    return json.dumps(data, indent=2)
