"""The terminal summary, read from the session's records: sample grids, outcomes, effects, speedups, and the summary
per template."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterator

import pytest

from ..dashboard import summary_table
from ..outcomes import SHORT_NAMES, Outcome
from ..record import EAGER, ItemRecord, geomean
from ..tables import memory_cell, plural, render, speedup_cell, times, timings_text
from .book import RecordBook
from .records import CHECK_ENDED, diagnosis_total, matrix_params

VERDICTS = ("effect", "no effect", "not observed")
SPEEDUP_TITLE = (
    "speedup over eager (median of paired rounds, geometric mean over timings; ±half-width of its 95% interval)"
)
MEMORY_NOTE = (
    "memory columns: eager's peak CUDA memory in a steady call / the compiled model's (above 1x the compiled model "
    "needs less; the weights, inputs and frozen copies resident on the device count in both)"
)
XDIST_NOTE = (
    "pytest-xdist is active, so pytest-benchmark disabled timing: bench items ran once, untimed, and no "
    "speedups were computed; the checks ran as usual. Run without -n to time, or with -n at least the number of "
    "GPUs and every CUDA device in the matrix (no --inductor-devices, or cuda; the workers then share the GPUs and "
    "time their CUDA sample items), or with the CPU alone in the matrix."
)
EFFECT_TITLE = "did each template take effect (a warning: it fails an item only with --inductor-require-effect)"
NO_EFFECT_NOTE = (
    "no_effect counts the items failed for having no effect, under --inductor-require-effect; without it, a "
    "template without effect passes and warns (its count is in the effect table below)"
)
NOTHING_RAN = "--inductor-require-run: every item was skipped, so the run fails"
NOTHING_RAN_PASSES = "every item was skipped, so the run passes (--inductor-require-run would fail it)"
SKIPPED_TITLE = "skipped items of the plugin, with why"
CHECK_FAILED = "the triple's check did not pass (its check item says how)"  # one line for all such bench items
REASONS_SHOWN = 3  # the most common reasons a nothing-ran line names
SUMMARY_TITLE = "summary per template (as PyTorch's compiler dashboard: pass rate, geomean speedup, mean compile time)"


def processes_note(bench: list[ItemRecord]) -> list[str]:
    """How many timings (loads, processes) the speedups were over, where more than one: what their band then means."""
    repeated = [r for r in bench if len(r.process_speedups or []) > 1]
    counts = sorted({(r.timing_processes or 1, r.timing_loads or 1) for r in repeated})
    if not counts:
        return []
    many = " or ".join(timings_text(processes, loads) for processes, loads in counts)
    return [
        f"timed {many} (--inductor-timing-loads, --inductor-timing-processes): the speedup is the geometric mean of "
        "the timings' medians (of each process's, over several; from six processes on, their 20%-trimmed mean: the "
        "farthest fifth each side, rounded down, left out), its band from the spread between the processes (in one, "
        "between its loads); on CUDA over the timings whose CPU ran at full speed where they are more than half, "
        "and at least ±1% (±2% launch-bound); `report` shows each timing's figure"
    ]


def sample_grids(records: list[ItemRecord]) -> dict[str, list[str]]:
    """Per device: samples x templates, each cell the check's outcome."""
    cells: dict[str, dict[str, dict[str, Outcome]]] = defaultdict(lambda: defaultdict(dict))
    columns: dict[str, None] = {}
    for r in records:
        if r.source == "sample" and r.kind == "check" and r.outcome is not None:
            columns.setdefault(r.template)
            cells[r.device][r.sample][r.template] = r.outcome
    grids = {}
    for device, rows in cells.items():
        shown = [c for c in columns if any(c in row for row in rows.values())]
        body = [[sample, *(SHORT_NAMES[row[c]] if c in row else "-" for c in shown)] for sample, row in rows.items()]
        grids[device] = render(["sample", *shown], body)
    return grids


def outcome_table(records: list[ItemRecord]) -> list[str]:
    """Per template: items, the count of each outcome, the pass rate over the items that ran."""
    by_template: dict[str, Counter[Outcome]] = defaultdict(Counter)
    for r in records:
        if r.outcome is not None:
            by_template[r.template][r.outcome] += 1
    rows = []
    for template, counts in by_template.items():
        total = sum(counts.values())
        ran = total - counts[Outcome.SKIPPED]
        rate = f"{counts[Outcome.PASS] / ran:.0%}" if ran else "-"
        rows.append([template, str(total), *(str(counts[o]) for o in Outcome), rate])
    return render(
        ["template", "items", *(o.value for o in Outcome), "pass rate"], rows, right=range(1, len(Outcome) + 3)
    )


def effect_table(records: list[ItemRecord]) -> list[str]:
    """Per template: how many items showed each effect verdict."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for r in records:
        if r.effect is not None:
            counts[r.template][r.effect] += 1
    rows = [[template, *(str(c[v]) for v in VERDICTS)] for template, c in counts.items()]
    return render(["template", *VERDICTS], rows, right=range(1, len(VERDICTS) + 1)) if rows else []


def nothing_to_take_effect(records: list[ItemRecord]) -> list[str]:
    """A line for each compiled template that sets no option (``default``, a backend alone): nothing of its own to
    take effect, and what its items compiled."""
    by_template: dict[str, list[ItemRecord]] = defaultdict(list)
    for r in records:
        if r.template != EAGER:
            by_template[r.template].append(r)
    lines = []
    for template, items in by_template.items():
        compiled = [r for r in items if r.graphs is not None]
        if not compiled or any(r.effect is not None or r.settings for r in items):
            continue
        graphs, breaks = sum(r.graphs or 0 for r in compiled), sum(r.graph_breaks or 0 for r in compiled)
        lines.append(
            f"{template}: sets no option of its own, so nothing to take effect: {plural(len(compiled), 'item')} "
            f"compiled {plural(graphs, 'graph')} ({plural(breaks, 'graph break')}) with the backend's defaults"
        )
    return lines


def _reason_key(reason: str) -> str:
    return CHECK_FAILED if reason.startswith(CHECK_ENDED) else reason


def skipped_lines(skipped: list[tuple[str, str]]) -> list[str]:
    """One line per reason: the item skipped for it, or how many were and the first of them."""
    by_reason: dict[str, list[str]] = defaultdict(list)
    for nodeid, reason in skipped:
        by_reason[_reason_key(reason)].append(nodeid)
    return [
        f"{ids[0]}: {reason}" if len(ids) == 1 else f"{len(ids)} items ({ids[0]}, ...): {reason}"
        for reason, ids in by_reason.items()
    ]


def nothing_ran_line(skipped: list[tuple[str, str]], require_run: bool, eager_rows: int = 0) -> str:
    """Why nothing ran, in one line: the most common reasons the items were skipped for, and what
    ``--inductor-require-run`` does with such a run (``eager_rows``: the samples' eager items that ran, as the
    reference of nothing)."""
    counts = Counter(_reason_key(reason) for _, reason in skipped)
    reasons = [f"{reason} ({plural(n, 'item')})" for reason, n in counts.most_common(REASONS_SHOWN)]
    if len(counts) > REASONS_SHOWN:
        reasons.append(f"and {plural(len(counts) - REASONS_SHOWN, 'other reason')}")
    ends = NOTHING_RAN if require_run else NOTHING_RAN_PASSES
    if eager_rows:
        but = f"every item but the samples' eager rows ({plural(eager_rows, 'item')}, the reference) was skipped"
        ends = ends.replace("every item was skipped", but)
    return f"{ends}: {'; '.join(reasons)}" if reasons else ends


def speedup_table(records: list[ItemRecord]) -> list[str]:
    """Samples (per device) x templates, cells of speedups over eager with their intervals (a failed item: its
    outcome), and beside a template whose items have memory ratios, a column of them; a geomean row."""
    compiled = [r for r in records if r.kind == "bench" and r.template != EAGER]
    if not compiled:
        return []
    templates = list(dict.fromkeys(r.template for r in compiled))
    measured = {r.template for r in compiled if r.memory_ratio is not None}
    columns = [(t, memory) for t in templates for memory in (False, True) if not memory or t in measured]
    cells = {(f"{r.sample} [{r.device}]", r.template): r for r in compiled}
    eager = {f"{r.sample} [{r.device}]": r for r in records if r.kind == "bench" and r.template == EAGER}

    def cell(row: str, template: str, memory: bool) -> str:
        record = cells.get((row, template))
        return memory_cell(record) if memory else speedup_cell(record, eager.get(row))

    rows = [[row, *(cell(row, t, memory) for t, memory in columns)] for row in dict.fromkeys(k for k, _ in cells)]
    figures = {(t, memory): [r.memory_ratio if memory else r.speedup for r in compiled if r.template == t]
               for t, memory in columns}  # fmt: skip
    means = [geomean(v for v in figures[column] if v is not None) for column in columns]
    rows.append(["geomean", *(times(m) if m is not None else "n/a" for m in means)])
    header = [f"{t} memory" if memory else t for t, memory in columns]
    table = render(["sample [device]", *header], rows, right=range(1, len(columns) + 1))
    return [*table, "", MEMORY_NOTE] if measured else table


class TerminalSummary:
    """Prints the plugin's tables at the end of the session (a pytest plugin object)."""

    def __init__(
        self,
        book: RecordBook,
        xdist_active: bool,
        require_run: bool = False,
        cases: Callable[[], list[tuple[str, str]]] = list,
    ) -> None:
        self.book = book
        self.xdist_active = xdist_active
        self.require_run = require_run
        self.cases = cases  # the matrix's (template, device): to tell the tests the plugin parametrized

    def plugin_skipped(self) -> list[tuple[str, str]]:
        """(node id, reason) of each skipped item of the plugin: an item with a record, or a test it parametrized."""
        recorded, cases = {r.nodeid for r in self.book.records}, self.cases()
        return [(n, why) for n, why in self.book.skipped if n in recorded or matrix_params(n, cases) is not None]

    @pytest.hookimpl(wrapper=True, trylast=True)  # inside pytest's own summary wrapper, outside the plain hooks
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, exitstatus: int) -> Iterator[None]:
        """After every other plugin's summary (pytest-benchmark's wide tables among them: the user sees this
        last, just above pytest's short test summary), and also when one of them raised (a performance
        regression under ``--benchmark-compare-fail``)."""
        try:
            return (yield)
        finally:
            self.write(terminalreporter, exitstatus)

    def write(self, terminalreporter: pytest.TerminalReporter, exitstatus: int) -> None:
        """The plugin's tables and lists."""
        records = self.book.records
        checked = [r for r in records if r.counts_as_check]
        section = terminalreporter.write_sep
        for device, lines in sample_grids(checked).items():
            self._lines(terminalreporter, f"sample checks on {device}", lines)
        if checked:
            warned = any(r.effect == "no effect" and r.outcome is not Outcome.NO_EFFECT for r in checked)
            notes = [NO_EFFECT_NOTE] if warned else []
            self._lines(terminalreporter, "check outcomes per template", [*outcome_table(checked), *notes])
        failing = [r for r in checked if r.failed]
        if failing:
            section("-", "failing items")
            for r in failing:
                terminalreporter.write_line(f"{r.outcome.value if r.outcome else '?'} {r.nodeid}: {r.reason}")
        diagnosed = [r for r in checked if r.diagnosis]
        if diagnosed:
            section("-", "diagnoses (where and why; --inductor-diagnose)")
            for r in diagnosed:
                repro = f"; repro: python {r.repro}" if r.repro else ""
                took = f" ({r.diagnosis_seconds:g} s)" if r.diagnosis_seconds is not None else ""
                terminalreporter.write_line(f"{r.nodeid}: {r.diagnosis}{took}{repro}")
            terminalreporter.write_line(diagnosis_total(records))
        uncompared = [r for r in checked if r.uncompared]
        if uncompared:
            section("-", "passed with nothing compared in some output")
            for r in uncompared:
                terminalreporter.write_line(f"{r.nodeid}: {r.uncompared}")
        plugin_skipped = self.plugin_skipped()
        self._lines(terminalreporter, SKIPPED_TITLE, skipped_lines(plugin_skipped))
        self._lines(terminalreporter, EFFECT_TITLE, [*effect_table(checked), *nothing_to_take_effect(checked)])
        without = [r for r in checked if r.effect == "no effect"]
        if without:
            section("-", "no effect")
            for r in without:
                terminalreporter.write_line(f"{r.nodeid}: {r.effect_evidence}")
        bench = [r for r in records if r.kind == "bench" and r.outcome is not Outcome.SKIPPED]
        if any(r.median is not None for r in bench):
            self._lines(terminalreporter, SPEEDUP_TITLE, [*speedup_table(records), *processes_note(bench)])
        elif self.xdist_active and bench:
            self._lines(terminalreporter, "timing", [XDIST_NOTE])
        self._lines(terminalreporter, SUMMARY_TITLE, summary_table(records))
        if self.book.nothing_ran(exitstatus) and (plugin_skipped or self.require_run):
            line = nothing_ran_line(self.book.skipped, self.require_run, self.book.eager_rows_ran)
            self._lines(terminalreporter, "nothing ran", [line])

    @staticmethod
    def _lines(terminalreporter: pytest.TerminalReporter, title: str, lines: list[str]) -> None:
        if lines:
            terminalreporter.write_sep("=", f"inductor-templates: {title}")
            for line in lines:
                terminalreporter.write_line(line)
