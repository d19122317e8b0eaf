"""A comparison of two runs as a self-contained HTML page: both runs' machines, the gate's verdict (with
``--fail-on``), each template's geomean change, and one row per (template, sample, device), regressions first.

A view of ``compare.RunComparison``, as ``compare_output`` is; neither torch nor pytest is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from ..tables import seconds, speedup_text
from .compare import Row, RunComparison, change_text, percent_change, ratio_text, regressed
from .compare_output import geomean_line, notes
from .compile_changes import NOISE_SECONDS, CompileTime
from .files import Key
from .html_parts import Grid, bullets, document, facts, machine_facts, story

# a row's verdict: its tag, its CSS class, its rank in the default order (regressions first)
VERDICTS = {
    "newly failing": ("red", 0),
    "regression": ("red", 0),
    "slower": ("amber", 1),
    "no significant change": ("", 2),
    "faster": ("green", 3),
    "newly passing": ("green", 3),
}


@dataclass
class Gate:
    """What ``--fail-on`` asked (limits by condition) and what it found."""

    limits: dict[str, list[float]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    waived: list[str] = field(default_factory=list)  # beyond the limit, but within the interval or the noise


def _flags(row: Row, key: Key, comparison: RunComparison, gate: Gate, compile_time: CompileTime | None) -> list[str]:
    """The gate conditions this row meets."""
    found = []
    if any(k == key for k, _, _ in comparison.newly_failing):
        found.append("newly failing")
    for limit in gate.limits.get("speedup", []):
        if regressed(row.speedup_change, row.change_interval, limit):
            found.append(f"speedup fell beyond {limit:.0%}")
    for limit in gate.limits.get("memory", []):
        if row.memory_change is not None and row.memory_change < -limit:
            found.append(f"memory ratio fell beyond {limit:.0%}")
    for limit in gate.limits.get("compile-time", []):
        change = compile_time.change if compile_time else None
        if compile_time and change is not None and change > limit and compile_time.growth >= NOISE_SECONDS:
            found.append(f"compile time grew beyond {limit:.0%}")
    if gate.limits.get("graph-breaks") and any(c.key == key and c.gained for c in comparison.compiles.structure):
        found.append("gained graph breaks or recompiles")
    return found


def _verdict(row: Row, key: Key, comparison: RunComparison, flags: list[str]) -> str:
    if any(k == key for k, _, _ in comparison.newly_failing):
        return "newly failing"
    if flags:
        return "regression"
    if any(k == key for k, _, _ in comparison.newly_passing):
        return "newly passing"
    interval = row.change_interval
    if interval is not None and interval[1] < 0:
        return "slower"
    if interval is not None and interval[0] > 0:
        return "faster"
    return "no significant change"


def _number(text: str, value: float | None) -> list[object]:
    return [None, escape(text), None, value]


def _row_story(template: str, row: Row, verdict: str, flags: list[str], compile_time: CompileTime | None) -> str:
    return story(
        f"{template} / {row.sample} [{row.device}]: {verdict}",
        [
            ("outcome", f"{row.base_outcome or 'pass'} -> {row.new_outcome or 'pass'}"),
            ("gate", "; ".join(flags) or None),
            ("base speedup", speedup_text(row.base) if row.base else None),
            ("new speedup", speedup_text(row.new) if row.new else None),
            ("change [95% interval]", change_text(row.speedup_change, row.change_interval)),
            ("compiled time", percent_change(row.time_change)),
            ("eager time", percent_change(row.eager_change)),
            ("memory ratio", f"{ratio_text(row.base_memory_ratio)} -> {ratio_text(row.new_memory_ratio)}"),
            ("compile", None if compile_time is None else _compile_text(compile_time)),
            ("new reason", row.new.reason if row.new and row.new.reason else None),
            ("new diagnosis", row.new.diagnosis if row.new else None),
            ("node id (new)", row.new.nodeid if row.new else None),
        ],
    )


def _compile_text(time: CompileTime) -> str:
    return f"{seconds(time.base)} -> {seconds(time.new)} ({percent_change(time.change)}, {time.state})"


def grid_of(comparison: RunComparison, gate: Gate) -> Grid:
    """One row per (template, sample, device) timed in either run, regressions first, then by speedup change."""
    grid = Grid(
        [("template", "text"), ("sample [device]", "text"), ("verdict", "cell"), ("base speedup", "num"),
         ("new speedup", "num"), ("change [95% interval]", "num"), ("compiled time", "num"), ("eager time", "num"),
         ("memory ratio", "num"), ("compile time", "num"), ("outcome", "text")],
        classes={verdict: css for verdict, (css, _) in VERDICTS.items()},
        failing=["newly failing", "regression"],
        filters=[("failing", "regressions and new failures"), *((v, v) for v in VERDICTS)],
        templates=[t.template for t in comparison.templates],
        template_filter="row",
    )  # fmt: skip
    compile_times = {t.key: t for t in comparison.compiles.times}
    ranked = []
    for template in comparison.templates:
        for row in template.rows:
            key = (row.sample, template.template, row.device)
            compile_time = compile_times.get(key)
            flags = _flags(row, key, comparison, gate, compile_time)
            verdict = _verdict(row, key, comparison, flags)
            told = grid.story(_row_story(template.template, row, verdict, flags, compile_time))
            outcome = f"{row.base_outcome or 'pass'} -> {row.new_outcome or 'pass'}"
            cells = [
                escape(template.template),
                escape(f"{row.sample} [{row.device}]"),
                [verdict, escape("\n".join(dict.fromkeys([verdict, *flags]))), told, VERDICTS[verdict][1]],
                _number(speedup_text(row.base) if row.base else "n/a", row.base_speedup),
                _number(speedup_text(row.new) if row.new else "n/a", row.new_speedup),
                _number(change_text(row.speedup_change, row.change_interval), row.speedup_change),
                _number(percent_change(row.time_change), row.time_change),
                _number(percent_change(row.eager_change), row.eager_change),
                _number(f"{ratio_text(row.base_memory_ratio)} -> {ratio_text(row.new_memory_ratio)}",
                        row.memory_change),
                _number(_compile_text(compile_time) if compile_time else "n/a",
                        compile_time.change if compile_time else None),
                escape(outcome if row.base_outcome != row.new_outcome else row.new_outcome or "pass"),
            ]  # fmt: skip
            change = row.speedup_change if row.speedup_change is not None else 0.0
            ranked.append(((VERDICTS[verdict][1], change), cells))
    grid.rows = [cells for _, cells in sorted(ranked, key=lambda found: found[0])]
    return grid


def _verdict_section(gate: Gate) -> str:
    if not gate.limits or not any(gate.limits.values()):
        return "<p>No <code>--fail-on</code> given: no verdict (every change is listed below).</p>"
    asked = ", ".join(
        f"{kind}:{limit:.0%}" if kind in ("speedup", "compile-time", "memory") else kind
        for kind, limits in gate.limits.items()
        for limit in limits
    )
    if gate.failures:
        head = f'<p class="verdict-fail">FAILED (--fail-on {escape(asked)}): {len(gate.failures)} condition(s) met</p>'
        return head + bullets(gate.failures) + _waived(gate)
    return f'<p class="verdict-pass">passed (--fail-on {escape(asked)})</p>' + _waived(gate)


def _waived(gate: Gate) -> str:
    if not gate.waived:
        return ""
    return "<p>Not flagged (beyond the limit, but within the 95% interval or the compile-time noise):</p>" + bullets(
        gate.waived
    )


def compare_page(comparison: RunComparison, gate: Gate) -> str:
    """The whole comparison page."""
    base, new = comparison.base, comparison.new
    machines = "".join(
        f"<div><h3>{which}: {escape(run.path)}</h3>{facts(machine_facts(run))}</div>"
        for which, run in (("base", base), ("new", new))
    )
    geomeans = [f"{t.template}: {geomean_line(t)}" for t in comparison.templates]
    body = [
        f"<h1>pytest-inductor-templates compare: {escape(base.path)} -> {escape(new.path)}</h1>",
        f'<section id="verdict"><h2>The gate</h2>{_verdict_section(gate)}</section>',
        f'<section id="header"><h2>Machines and notes</h2><div class="machines">{machines}</div>',
        bullets(notes(comparison), "warnings"),
        "</section>",
        f'<section id="geomeans"><h2>Per template</h2>{bullets(geomeans)}</section>',
        '<section id="cells"><h2>Changes per cell (regressions first)</h2>',
        "<p>Click a column's header to sort by it; a row's verdict opens to its figures.</p>",
        grid_of(comparison, gate).html(),
        "</section>",
    ]
    return document(f"compare {base.path} -> {new.path}", "".join(body))
