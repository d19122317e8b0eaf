"""A run comparison written out: the terminal table, markdown and JSON, with the notes on what was not compared."""

from __future__ import annotations

import json
from typing import Any

from ..cpu_speed import unsteady_note
from ..tables import render, seconds, speedup_text
from . import compile_changes
from .compare import (
    PASS,
    Row,
    RunComparison,
    TemplateComparison,
    change_text,
    percent_change,
    ratio_text,
    weights_change,
)


def _time(value: float | None) -> str:
    return "n/a" if value is None else seconds(value)


def _outcome(row: Row) -> str:
    base, new = row.base_outcome or PASS, row.new_outcome or PASS
    return base if base == new else f"{base} -> {new}"


HEADER = [
    "sample [device]", "base speedup", "new speedup", "change [95% interval]", "base median", "new median",
    "compiled time", "eager time", "outcome",
]  # fmt: skip


def _cells(row: Row) -> list[str]:
    change = change_text(row.speedup_change, row.change_interval)
    if row.weights_differ:
        change = f"not compared: weights {row.base_weights or 'none'} -> {row.new_weights or 'none'}"
    return [
        f"{row.sample} [{row.device}]",
        speedup_text(row.base) if row.base else "n/a",
        speedup_text(row.new) if row.new else "n/a",
        change,
        _time(row.base.median if row.base else None),
        _time(row.new.median if row.new else None),
        percent_change(row.time_change),
        percent_change(row.eager_change),
        _outcome(row),
    ]


MEMORY_HEADER = "memory ratio (change)"  # a column of its own where a row has a memory ratio in either run


def _memory_cell(row: Row) -> str:
    """``1.02x -> 0.81x (-20.6%)``: both runs' memory ratios (eager peak / compiled peak) and the change."""
    ratios = f"{ratio_text(row.base_memory_ratio)} -> {ratio_text(row.new_memory_ratio)}"
    return f"{ratios} ({percent_change(row.memory_change)})"


def _table(template: TemplateComparison, markdown: bool) -> list[str]:
    """A template's rows, with the memory ratio column where any row has one."""
    if not template.rows:
        return []
    memory = any(r.base_memory_ratio is not None or r.new_memory_ratio is not None for r in template.rows)
    header = [*HEADER, MEMORY_HEADER] if memory else HEADER
    rows = [[*_cells(r), _memory_cell(r)] if memory else _cells(r) for r in template.rows]
    return render(header, rows, right=range(1, 8), markdown=markdown)


def _count(number: int, what: str) -> str:
    return f"{number} {what}{'' if number == 1 else 's'}"


def geomean_line(template: TemplateComparison) -> str:
    """The geomean's change and what it is over: the rows timed in both runs, of how many rows; the entries that
    only check, counted."""
    compared, rows = len(template.compared), len(template.rows)
    over = f"over {_count(compared, 'sample')} timed in both runs"
    if compared != rows:
        over += f" (of the {_count(rows, 'row')} below)"
    if template.check_only:
        over += f"; {_count(template.check_only, 'check-only entry')} (no timing) not listed"
    return (
        f"geomean speedup {ratio_text(template.base_geomean)} -> {ratio_text(template.new_geomean)} "
        f"({change_text(template.geomean_change, template.geomean_interval)}) {over}"
    )


def notes(comparison: RunComparison) -> list[str]:
    found = [f"base: {comparison.base.path} ({comparison.base.machine})"]
    found.append(f"new:  {comparison.new.path} ({comparison.new.machine})")
    if comparison.base.tf32 != comparison.new.tf32:
        found.append(
            f"note: TF32 {comparison.base.tf32} in base, {comparison.new.tf32} in new (--inductor-tf32): an outcome "
            "may change with the mode alone (TF32 off sees faults below TF32's rounding)"
        )
    for which, run in (("base", comparison.base), ("new", comparison.new)):
        if moved := unsteady_note(run.data.get("machine_info", {})):
            found.append(f"note: in the {which} run, {moved}")
        if run.partial:
            found.append(f"note: the {which} run is partial ({run.partial}): items it lacks show as only in the other")
    if comparison.weights_differ:
        found.append(
            "note: GraphNet sample weights were passed differently "
            f"({weights_change(comparison.weights_differ)}): those speedups are not compared, nor in the geomeans "
            "or the gate"
        )
    if differently := comparison.timed_differently:
        ways = "; ".join(f"{count} timed {base} in base, {new} in new" for (base, new), count in differently.items())
        found.append(
            f"note: compiled entries timed differently ({ways}; --inductor-timing-processes, --inductor-timing-loads): "
            "their bands are made differently (one timing's rounds, one process's loads, or the processes' means), so "
            "the same change may lie inside one run's band and outside the other's"
        )
    found += [f"newly failing: {'/'.join(k)} ({b} -> {n})" for k, b, n in comparison.newly_failing]
    found += [f"newly passing: {'/'.join(k)} ({b} -> {n})" for k, b, n in comparison.newly_passing]
    found += [f"only in base: {'/'.join(k)}" for k in comparison.only_in_base]
    found += [f"only in new: {'/'.join(k)}" for k in comparison.only_in_new]
    return found + comparison.compiles.notes()


def as_table(comparison: RunComparison) -> str:
    lines = notes(comparison)
    for template in comparison.templates:
        lines += ["", f"template {template.template}: {geomean_line(template)}"]
        lines += _table(template, markdown=False)
    return "\n".join(lines + compile_changes.lines(comparison.compiles, markdown=False))


def as_markdown(comparison: RunComparison) -> str:
    lines = ["## pytest-inductor-templates compare", ""]
    lines += [f"- {note}" for note in notes(comparison)]
    for template in comparison.templates:
        lines += ["", f"### {template.template}: {geomean_line(template)}", ""]
        lines += _table(template, markdown=True)
    return "\n".join(lines + compile_changes.lines(comparison.compiles, markdown=True))


def _row_json(row: Row) -> dict[str, Any]:
    fields = ("speedup", "speedup_low", "speedup_high", "unstable", "median", "eager_median", "compiled_median")
    fields += ("eager_peak_mib", "compiled_peak_mib", "memory_ratio")
    data: dict[str, Any] = {"sample": row.sample, "device": row.device}
    data |= {"base_sample_weights": row.base_weights, "new_sample_weights": row.new_weights}
    for side, record in (("base", row.base), ("new", row.new)):
        data |= {f"{side}_{name}": getattr(record, name) if record else None for name in fields}
        data[f"{side}_outcome"] = getattr(row, f"{side}_outcome")
    interval = row.change_interval
    data |= {"speedup_change": row.speedup_change, "time_change": row.time_change, "eager_change": row.eager_change}
    data["speedup_change_interval"] = list(interval) if interval else None
    data["memory_change"] = row.memory_change
    return data


def as_json(comparison: RunComparison, failures: list[str]) -> str:
    data: dict[str, Any] = {
        "base": {"path": comparison.base.path, "machine_info": comparison.base.data.get("machine_info", {})},
        "new": {"path": comparison.new.path, "machine_info": comparison.new.data.get("machine_info", {})},
        "templates": {
            t.template: {
                "base_geomean": t.base_geomean,
                "new_geomean": t.new_geomean,
                "geomean_change": t.geomean_change,
                "geomean_change_interval": t.geomean_interval,
                "rows": [_row_json(r) for r in t.rows],
                "check_only": t.check_only,
            }
            for t in comparison.templates
        },
        "newly_failing": [{"key": list(k), "base": b, "new": n} for k, b, n in comparison.newly_failing],
        "newly_passing": [{"key": list(k), "base": b, "new": n} for k, b, n in comparison.newly_passing],
        "only_in_base": [list(k) for k in comparison.only_in_base],
        "only_in_new": [list(k) for k in comparison.only_in_new],
        "compile": compile_changes.as_json(comparison.compiles),
        "failures": failures,
    }
    return json.dumps(data, indent=2)
