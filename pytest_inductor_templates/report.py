"""Terminal reporting of check outcomes: a samples x templates grid, a per-template table, failing items."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import pytest

from .outcomes import SHORT_NAMES, Outcome

FAILURES = (Outcome.ACCURACY_FAIL, Outcome.COMPILE_FAIL, Outcome.RUNTIME_FAIL, Outcome.EAGER_FAIL, Outcome.NO_EFFECT)


@dataclass(frozen=True)
class Record:
    nodeid: str
    template: str
    device: str
    sample: str | None
    outcome: Outcome
    reason: str


def _first_line(report: pytest.TestReport) -> str:
    text = str(report.longrepr) if report.longrepr else ""
    if report.skipped and isinstance(report.longrepr, tuple):
        text = report.longrepr[2]
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


class OutcomeReport:
    """Collects the outcome of every checked item and prints the tables (a pytest plugin object)."""

    def __init__(self) -> None:
        self.records: list[Record] = []

    @staticmethod
    def complete(item: pytest.Item, report: pytest.TestReport) -> None:
        """Give a checked item an outcome when no check recorded one (skips, errors, bench items).

        It goes on the item too, so the later reports (and JUnit XML, which writes the last) carry it.
        """
        if "inductor_outcome" in dict(report.user_properties) or not counted(report):
            return
        outcome = Outcome.PASS if report.passed else Outcome.SKIPPED if report.skipped else Outcome.RUNTIME_FAIL
        recorded = [("inductor_outcome", outcome.value)]
        if not report.passed:
            recorded.append(("inductor_reason", _first_line(report)))
        report.user_properties.extend(recorded)
        item.user_properties.extend(recorded)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "inductor_outcome" not in props or not counted(report) or props.get("inductor_kind") == "bench":
            return
        self.records.append(
            Record(
                report.nodeid,
                str(props.get("inductor_template", "?")),
                str(props.get("inductor_device", "?")),
                props.get("inductor_sample"),
                Outcome(props["inductor_outcome"]),
                str(props.get("inductor_reason", "")),
            )
        )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.records:
            return
        write = terminalreporter.write_line
        for device, lines in self._grids().items():
            terminalreporter.write_sep("=", f"inductor-templates: sample checks on {device}")
            for line in lines:
                write(line)
        terminalreporter.write_sep("=", "inductor-templates: check outcomes per template")
        for line in self._table():
            write(line)
        failing = [r for r in self.records if r.outcome in FAILURES]
        if failing:
            terminalreporter.write_sep("-", "failing items")
            for record in failing:
                write(f"{record.outcome.value} {record.nodeid}: {record.reason}")

    def _grids(self) -> dict[str, list[str]]:
        cells: dict[str, dict[str, dict[str, Outcome]]] = defaultdict(lambda: defaultdict(dict))
        columns: dict[str, None] = {}
        for record in self.records:
            if record.sample is not None:
                columns.setdefault(record.template)
                cells[record.device][record.sample][record.template] = record.outcome
        grids = {}
        for device, rows in cells.items():
            shown = [c for c in columns if any(c in row for row in rows.values())]
            width = max(len(s) for s in rows) + 2
            widths = [max(len(c), 8) for c in shown]
            lines = [
                ("sample".ljust(width) + "  ".join(c.ljust(w) for c, w in zip(shown, widths, strict=True))).rstrip()
            ]
            for sample, row in rows.items():
                values = [SHORT_NAMES[row[c].value] if c in row else "-" for c in shown]
                lines.append(
                    (sample.ljust(width) + "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True))).rstrip()
                )
            grids[device] = lines
        return grids

    def _table(self) -> list[str]:
        by_template: dict[str, Counter[Outcome]] = defaultdict(Counter)
        for record in self.records:
            by_template[record.template][record.outcome] += 1
        names = [o.value for o in Outcome]
        width = max(max(len(t) for t in by_template), len("template")) + 2
        lines = ["template".ljust(width) + "items  " + "  ".join(names) + "  pass rate"]
        for template, counts in by_template.items():
            total = sum(counts.values())
            ran = total - counts[Outcome.SKIPPED]
            rate = f"{counts[Outcome.PASS] / ran:.0%}" if ran else "-"
            cells = "  ".join(str(counts[o]).rjust(len(o.value)) for o in Outcome)
            lines.append(f"{template.ljust(width)}{str(total).rjust(5)}  {cells}  {rate.rjust(9)}")
        return lines


def counted(report: pytest.TestReport) -> bool:
    """One report per item counts: the call, or the setup when the item went no further."""
    return report.when == "call" or (report.when == "setup" and not report.passed)
