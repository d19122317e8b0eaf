"""The building blocks of the HTML pages: one self-contained document (inline CSS and JavaScript from ``page/``, the
grid's rows as embedded JSON), the run's header (machine, selection, date, warnings), a table, a list, a story.
Neither torch nor pytest is imported here."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from html import escape
from importlib import resources
from typing import Any

from ..cpu_speed import Steadiness, unsteady_note
from .compare import timed_as
from .files import Run

Cell = list[Any] | str | None  # a grid cell: [class, text, story, sort keys...], a plain name, or nothing


@cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath("page", name).read_text(encoding="utf-8")


def _script_json(value: Any) -> str:
    """JSON that is safe inside a <script> element."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


@dataclass
class Grid:
    """A sortable, filterable table painted in the browser from its rows.

    ``columns``: (label, kind) with kind ``text`` (a name), ``num`` (one figure) or ``cell`` (a matrix cell whose
    sort figure the page's select picks); ``classes``: a cell's tag (its outcome) -> its CSS classes;
    ``filters``: the outcome select's (tag, label) choices; ``template_filter``: ``column`` hides the other
    templates' columns, ``row`` keeps the rows whose first column is the template."""

    columns: list[tuple[str, str]]
    rows: list[list[Cell]] = field(default_factory=list)
    stories: list[str] = field(default_factory=list)
    classes: dict[str, str] = field(default_factory=dict)
    failing: list[str] = field(default_factory=list)
    filters: list[tuple[str, str]] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)
    template_filter: str = "column"
    figures: list[str] = field(default_factory=list)  # the sort figures of ``cell`` columns

    def story(self, html: str) -> int:
        self.stories.append(html)
        return len(self.stories) - 1

    def html(self) -> str:
        data = {
            "columns": [{"label": label, "kind": kind, "numeric": kind == "num"} for label, kind in self.columns],
            "rows": self.rows,
            "stories": self.stories,
            "classes": self.classes,
            "failing": self.failing,
            "templateFilter": self.template_filter,
        }
        outcome = "".join(f'<option value="{escape(v)}">{escape(label)}</option>' for v, label in self.filters)
        template = "".join(f'<option value="{escape(t)}">{escape(t)}</option>' for t in self.templates)
        figure = "".join(f'<option value="{i}">{escape(f)}</option>' for i, f in enumerate(self.figures))
        controls = [
            f'<label>outcome <select id="filter-outcome"><option value="">any</option>{outcome}</select></label>',
            f'<label>template <select id="filter-template"><option value="">all</option>{template}</select></label>',
            '<label>text <input id="filter-text" type="search" placeholder="sample, reason, ..."></label>',
        ]
        if self.figures:
            controls.append(f'<label>template columns sort by <select id="sort-figure">{figure}</select></label>')
        head = "".join(f"<th>{escape(label)}</th>" for label, _ in self.columns)
        return (
            f'<div class="controls">{"".join(controls)}<span id="count"></span></div>'
            f'<table class="grid" id="grid"><thead><tr>{head}</tr></thead><tbody></tbody></table>'
            '<button type="button" id="more" hidden></button>'
            '<aside id="story" hidden><button type="button">close</button><div class="content"></div></aside>'
            f'<script type="application/json" id="grid-data">{_script_json(data)}</script>'
        )


def document(title: str, body: str) -> str:
    """One self-contained page: no request leaves it (inline style and script, SVG drawn inline)."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_asset('page.css')}</style></head>"
        f"<body>{body}<script>{_asset('page.js')}</script></body></html>"
    )


def table(header: Sequence[str], rows: Sequence[Sequence[str]], figures: Sequence[int] = ()) -> str:
    """A plain table of escaped texts; the columns in ``figures`` right-aligned."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f'<td{" class=fig" if i in figures else ""}>{escape(c)}</td>' for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )  # fmt: skip
    return f'<table class="summary"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def bullets(lines: Sequence[str], css: str = "") -> str:
    if not lines:
        return ""
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    return f'<ul class="{css}">{items}</ul>' if css else f"<ul>{items}</ul>"


def facts(pairs: Sequence[tuple[str, str | None]]) -> str:
    """A two-column table of what is known; pairs without a value are left out."""
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in pairs if v)
    return f'<table class="meta">{rows}</table>'


def story(title: str, pairs: Sequence[tuple[str, str | None]]) -> str:
    """A cell's story: a heading and its facts (those with a value)."""
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in pairs if v)
    return f"<h3>{escape(title)}</h3><dl>{rows}</dl>"


def cpu_line(info: dict[str, Any]) -> str | None:
    """The CPU-speed probe's verdict (the run header's line), where the run probed."""
    loops, share, seconds = info.get("cpu_probe_loops"), info.get("cpu_slow_share"), info.get("cpu_probe_seconds")
    if not isinstance(loops, int) or not isinstance(share, int | float) or not isinstance(seconds, int | float):
        return None
    return Steadiness(seconds, loops, share).line()


def machine_facts(run: Run) -> list[tuple[str, str | None]]:
    """The machine a run timed on, as the header shows it."""
    info = run.data.get("machine_info", {})

    def text(name: str) -> str | None:
        value = info.get(name)
        return None if value is None else str(value)

    load = info.get("load_average")
    return [
        ("GPU", run.gpu or "none"),
        ("compute capability", text("gpu_compute_capability")),
        ("driver", text("gpu_driver")),
        ("CUDA", text("cuda")),
        ("torch", text("torch")),
        ("Triton", text("triton")),
        ("CPUs usable", text("usable_cpus")),
        ("timing threads", text("timing_threads")),
        ("load average at start", f"{load:.2f}" if isinstance(load, int | float) else None),
        ("CPU speed", cpu_line(info) or "not probed"),
        ("compiled items timed", _timed(run)),
        ("TF32", run.tf32),
        ("pytest-xdist workers", None if run.xdist_workers is None else str(run.xdist_workers)),
    ]


def _timed(run: Run) -> str | None:
    """How the run's compiled entries were timed: ``in 4 processes``, or each way with how many entries."""
    ways = Counter(timed_as(r) for r in run.records if r.kind == "bench" and r.speedup is not None)
    if len(ways) < 2:
        return next(iter(ways), None)
    return ", ".join(f"{way} ({count})" for way, count in ways.most_common())


def run_warnings(run: Run) -> list[str]:
    """What changes how a run's figures read: cut short, an unsteady CPU, templates left out."""
    found = []
    if run.partial:
        found.append(f"partial run ({run.partial}): the items that had not ended are missing")
    if (moved := unsteady_note(run.data.get("machine_info", {}))) is not None:
        found.append(moved[0].upper() + moved[1:])
    found += [f"template {r['template']} not run on this machine: {r['reason']}" for r in run.left_out]
    return found
