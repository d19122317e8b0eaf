"""One run as a self-contained HTML page: the header, the summary per template (the dashboard's figures), charts of
speedups, memory ratios and compile times, and the samples x templates grid whose red cells open to their story.

A view of the records (``files.Run``), as ``markdown`` is; neither torch nor pytest is imported here.
"""

from __future__ import annotations

import json
from collections import Counter
from html import escape

from ..dashboard import by_template, summary_rows
from ..outcomes import FAILURES, SHORT_NAMES, Outcome
from ..record import EAGER, ItemRecord
from ..tables import processes_text, seconds, speedup_text, times
from . import svg
from .files import Cell, Run
from .html_parts import Grid, bullets, document, facts, machine_facts, run_warnings, story, table
from .markdown import MEMORY_LINE

FIGURES = ("speedup", "memory ratio", "compile seconds", "outcome (failures first)")
CLASSES = {o.value: "red" if o in FAILURES else "green" for o in Outcome}
CLASSES |= {Outcome.SKIPPED.value: "grey", Outcome.EAGER_NONDETERMINISTIC.value: "amber"}
RANK = {o.value: 0 if o in FAILURES else 1 for o in Outcome} | {"skipped": 2, "pass": 3}
EFFECT_HEADERS = {"effect": "took effect", "no effect": "no effect", "not observed": "effect not observed"}
CACHE_COLOURS = {"cold": "#2b6cb0", "warm": "#2f855a", "mixed": "#c05621", "uncached": "#718096"}


def rerun_line(record: ItemRecord) -> str:
    """How to run the item again: a user test by its node id; a sample item by ``-k`` (its node id is not a path)."""
    if record.source != "sample" or "::" not in record.nodeid:
        return f'pytest "{record.nodeid}"'
    _, sample, item = record.nodeid.split("::", 2)
    return f"pytest (this run's options) -k '{sample} and {item}'"


def _story(cell: Cell) -> str:
    record = cell.verdict
    outcome = record.outcome.value if record.outcome else "?"
    tolerance = None
    if record.tolerance_level is not None:
        tolerance = f"t = {record.tolerance_level} (the tightest GraphNet tolerance level at which every output passes)"
    compile_figures = None
    if record.compile_seconds is not None:
        compile_figures = (
            f"{seconds(record.compile_seconds)} ({record.cache_state}); graphs {record.graphs}, graph breaks "
            f"{record.graph_breaks}, recompiles {record.recompiles}"
        )
    return story(
        f"{record.sample} / {record.template} / {record.device}: {outcome}",
        [
            ("node id", record.nodeid),
            ("rerun", rerun_line(record)),
            ("outcome", outcome + (f" (decided by: {record.check_rule})" if record.check_rule else "")),
            ("reason", record.reason),
            ("tolerance", tolerance),
            ("second opinion (float64)", record.fp64_second_opinion),
            ("nothing compared", record.uncompared),
            ("diagnosis", record.diagnosis),
            ("stage", record.diagnosis_stage),
            ("setting", record.diagnosis_setting),
            ("first diverging op", record.diagnosis_op),
            ("kind", record.diagnosis_kind),
            ("figures", record.diagnosis_figures),
            ("repro", f"python {record.repro}" if record.repro else None),
            ("diagnosis took", f"{record.diagnosis_seconds:g} s" if record.diagnosis_seconds is not None else None),
            ("effect", f"{record.effect}: {record.effect_evidence}" if record.effect else None),
            ("compile", compile_figures),
            ("settings", json.dumps(record.settings) if record.settings else None),
            ("fallback", record.fallback),
        ],
    )


def _tells(record: ItemRecord) -> bool:
    """Whether a cell has a story to open to: a failure, or a pass that needed a second look."""
    return record.failed or bool(record.fp64_second_opinion or record.uncompared or record.diagnosis)


def _cell(grid: Grid, cell: Cell | None, eager: Cell | None) -> list[object] | None:
    """[outcome, text, story, speedup, memory ratio, compile seconds, rank] of one matrix cell."""
    if cell is None:
        return None
    record, bench = cell.verdict, cell.bench
    outcome = record.outcome.value if record.outcome else "?"
    lines = [SHORT_NAMES[record.outcome] if record.outcome else "?"]
    if record.check_rule and record.check_rule != "first comparison":
        lines[0] += f" ({record.check_rule})"
    if record.effect:
        lines.append(record.effect)
    if record.template == EAGER and bench is not None and bench.median is not None:
        lines.append(f"eager {seconds(bench.median)}")
    elif bench is not None and bench.speedup is not None:
        lines.append(speedup_text(bench, eager.bench if eager else None))
        if (timings := processes_text(bench)) is not None:
            lines.append(timings)  # each timing's figure, as report's markdown gives it
    memory = bench.memory_ratio if bench is not None else None
    if memory is not None:
        lines.append(f"memory {times(memory)}")
    if record.compile_seconds is not None:
        lines.append(f"compile {seconds(record.compile_seconds)} ({record.cache_state})")
    told = grid.story(_story(cell)) if _tells(record) else None
    keys = [bench.speedup if bench is not None else None, memory, record.compile_seconds]
    return [outcome, escape("\n".join(lines)), told, *map(_key, keys), RANK.get(outcome, 1)]


def _key(value: float | None) -> float | None:
    """A sort figure, to four significant digits (the page is smaller, the order the same to the eye)."""
    return None if value is None else float(f"{value:.4g}")


def grid_of(run: Run) -> Grid:
    """The samples x templates grid (eager first), each row (sample, device, then a cell per template)."""
    found = list(dict.fromkeys(t for _, t, _ in run.cells))
    templates = [EAGER, *(t for t in found if t != EAGER)] if EAGER in found else found
    outcomes = list(dict.fromkeys(c.outcome.value for c in run.cells.values() if c.outcome is not None))
    filters = [("failing", "any failure"), *((o, o) for o in outcomes)]
    grid = Grid(
        [("sample", "text"), ("device", "text"), *((t, "cell") for t in templates)],
        classes=CLASSES,
        failing=sorted(o.value for o in FAILURES),
        filters=filters,
        templates=templates,
        figures=list(FIGURES),
    )
    for sample, device in dict.fromkeys((s, d) for s, _, d in run.cells):
        eager = run.cells.get((sample, EAGER, device))
        cells = [_cell(grid, run.cells.get((sample, t, device)), eager) for t in templates]
        grid.rows.append([escape(sample), escape(device), *cells])
    return grid


def _warnings(run: Run) -> list[str]:
    found = run_warnings(run)
    weights = Counter(r.sample_weights for r in run.records if r.sample_weights is not None)
    if weights.get("inputs"):
        found.append(
            f"GraphNet sample weights passed as forward inputs (--inductor-sample-weights=inputs) in "
            f"{weights['inputs']} item(s): freezing cannot fold them, and speedups differ from a deployed model's"
        )
    states = Counter(r.cache_state for t in by_template(run.records).values() for r in t.verdicts if r.cache_state)
    if len(states) > 1 or "mixed" in states:
        listed = ", ".join(f"{s} {n}" for s, n in sorted(states.items()))
        found.append(f"compiles in mixed cache states ({listed}): mean compile times mix cold and warm compiles")
    return found


def _selection(run: Run) -> list[tuple[str, str | None]]:
    section = run.data.get("inductor_templates", {})
    templates = list(dict.fromkeys(t for _, t, _ in run.cells))
    samples = {s for s, _, _ in run.cells}
    argv = section.get("argv")
    commit = run.data.get("commit_info", {}).get("id")
    return [
        ("run", run.path),
        ("date", run.data.get("datetime")),
        ("commit", commit[:12] if isinstance(commit, str) else None),
        ("templates", ", ".join(templates)),
        ("devices", ", ".join(dict.fromkeys(d for _, _, d in run.cells))),
        ("samples", f"{len(samples)} ({len(run.cells)} cells, {len(run.records)} items)"),
        ("command line", " ".join(argv) if isinstance(argv, list) else None),
        ("merged from", ", ".join(section["merged_from"]) if section.get("merged_from") else None),
    ]


def _summary(run: Run) -> str:
    shown, rows = summary_rows(run.records)
    if not rows:
        return "<p>No compiled template has a record.</p>"
    templates = by_template(run.records)
    outcomes = list(dict.fromkeys(r.outcome.value for t in templates.values() for r in t.verdicts if r.outcome))
    effects = list(dict.fromkeys(r.effect for t in templates.values() for r in t.verdicts if r.effect))
    for row, template in zip(rows, templates.values(), strict=True):
        counted = Counter(r.outcome.value for r in template.verdicts if r.outcome)
        verdicts = Counter(r.effect for r in template.verdicts if r.effect)
        row += [str(counted[o]) for o in outcomes] + [str(verdicts[e]) for e in effects]
    header = ["template", *(c.header for c in shown), *outcomes, *(EFFECT_HEADERS.get(e, e) for e in effects)]
    figures = [i + 1 for i, c in enumerate(shown) if c.figure] + list(range(len(shown) + 1, len(header)))
    notes = [
        "pass rate: the cells that passed of those that ran (skipped left out); geomean speedup: over each "
        "template's cells that passed and were timed (a failed cell has no speedup); mean compile: over the cells "
        "that compiled, in the compile caches' states beside it",
    ]
    if any(c.header.startswith("geomean memory") for c in shown):
        notes.append(MEMORY_LINE.replace("`", ""))
    return table(header, rows, figures) + bullets(notes)


def _charts(run: Run) -> str:
    compiled = [r for r in run.records if r.kind == "bench" and r.template != EAGER]
    speedups: dict[str, list[svg.Point]] = {}
    memory: dict[str, list[tuple[float, float, str]]] = {}
    for r in compiled:
        if r.speedup is None:
            continue
        label = f"{r.sample} [{r.device}]: {speedup_text(r)}"
        colour = "#c05621" if r.unstable else "#2b6cb0"
        speedups.setdefault(r.template, []).append(svg.Point(r.speedup, r.speedup_low, r.speedup_high, label, colour))
        if r.memory_ratio is not None:
            memory.setdefault(r.template, []).append((r.speedup, r.memory_ratio, f"{r.sample} [{r.device}]"))
    compile_times: dict[str, list[svg.Point]] = {}
    for template, found in by_template(run.records).items():
        for r in found.verdicts:
            if r.compile_seconds is not None and r.compile_seconds > 0:
                label = f"{r.sample} [{r.device}]: {seconds(r.compile_seconds)} ({r.cache_state})"
                colour = CACHE_COLOURS.get(r.cache_state or "", "#718096")
                compile_times.setdefault(template, []).append(svg.Point(r.compile_seconds, label=label, colour=colour))
    parts = [
        svg.strip_chart(
            speedups,
            "speedup over eager (log scale)",
            caption="Each dot a sample's speedup (median of paired rounds; over several timings, their geometric "
            "mean), its line the 95% interval; orange: "
            "unstable (the interval stayed wider than the precision asked); the dashed line is 1x (no change). "
            f"Over {svg.DOTS} samples a template's row is a box (quartiles; whiskers 5th to 95th percentile).",
        )
        or "<p>No speedups: nothing was timed (or every timed cell failed).</p>",
        svg.scatter(
            memory,
            "speedup over eager",
            "memory ratio",
            caption="Memory ratio (eager's peak / the compiled model's; above 1x the compiled model needs less) "
            "against speedup, per sample.",
        )
        or "<p>No memory ratios: peaks are measured on CUDA only.</p>",
        svg.strip_chart(
            compile_times,
            "compile seconds (log scale)",
            unit=" s",
            mark=None,
            caption="Each dot a cell's compile time; blue cold, green warm, orange mixed cache, grey uncached (a "
            "backend other than Inductor).",
        ),
    ]
    return "".join(parts)


def run_page(run: Run) -> str:
    """The whole page of one run."""
    warnings = _warnings(run)
    body = [
        f"<h1>pytest-inductor-templates: {escape(run.path)}</h1>",
        '<section id="header"><h2>Machine and selection</h2>',
        facts(machine_facts(run) + _selection(run)),
        bullets(warnings, "warnings") if warnings else "",
        "</section>",
        f'<section id="summary"><h2>Summary per template</h2>{_summary(run)}</section>',
        f'<section id="charts"><h2>Pictures</h2>{_charts(run)}</section>',
        '<section id="cells"><h2>Samples x templates</h2>',
        "<p>Click a column's header to sort by it (again: the other way); a red cell opens to its story.</p>",
        grid_of(run).html(),
        "</section>",
    ]
    return document(f"pytest-inductor-templates: {run.path}", "".join(body))
