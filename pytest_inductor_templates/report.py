"""Terminal reporting: the samples x templates grid of check outcomes, per device."""

from __future__ import annotations

from collections import defaultdict

import pytest

SYMBOLS = {"passed": "pass", "failed": "FAIL", "skipped": "skip", "error": "ERROR"}


class SampleGrid:
    """Check outcomes of sample items, by device, sample and template (column); a pytest plugin object."""

    def __init__(self) -> None:
        self.cells: dict[str, dict[str, dict[str, str]]] = defaultdict(lambda: defaultdict(dict))
        self.columns: dict[str, None] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if props.get("inductor_kind") != "check":
            return
        if report.when == "call" or (report.when == "setup" and not report.passed):
            outcome = "error" if report.when == "setup" and report.failed else report.outcome
            column = str(props["inductor_template"])
            self.columns.setdefault(column)
            self.cells[str(props["inductor_device"])][str(props["inductor_sample"])][column] = outcome

    def lines(self, device: str) -> list[str]:
        rows = self.cells[device]
        columns = [c for c in self.columns if any(c in row for row in rows.values())]
        width = max(len(s) for s in rows) + 2
        header = ("sample".ljust(width) + "  ".join(c.ljust(max(len(c), 5)) for c in columns)).rstrip()
        lines = [header]
        for sample, row in rows.items():
            cells = [SYMBOLS[row[c]] if c in row else "-" for c in columns]
            lines.append(
                (
                    sample.ljust(width)
                    + "  ".join(v.ljust(max(len(c), 5)) for v, c in zip(cells, columns, strict=True))
                ).rstrip()
            )
        totals = []
        for column in columns:
            outcomes = [row[column] for row in rows.values() if column in row]
            ran = [o for o in outcomes if o != "skipped"]
            totals.append(f"{column} {sum(o == 'passed' for o in ran)}/{len(ran)} passed")
        return [*lines, "", "; ".join(totals)]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminal = terminalreporter
        for device in self.cells:
            terminal.write_sep("=", f"inductor-templates: sample checks on {device}")
            for line in self.lines(device):
                terminal.write_line(line)
