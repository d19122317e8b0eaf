"""pytest-html (4.x), where the user has it: its results table gains the plugin's columns (template, device, outcome,
speedup, memory ratio), and each item of the plugin its extras (reason, diagnosis, repro), through pytest-html's own
hooks, from the record each report carries. Registered only when pytest-html is loaded."""

from __future__ import annotations

from html import escape

import pytest

from ..record import ItemRecord
from ..report.records import counted
from ..tables import memory_cell, speedup_cell

COLUMNS = ("template", "device", "outcome", "speedup", "memory ratio")


def _record(report: pytest.TestReport) -> ItemRecord | None:
    return ItemRecord.from_properties(getattr(report, "user_properties", []))


def _cells(record: ItemRecord | None) -> list[str]:
    if record is None:
        return [""] * len(COLUMNS)
    outcome = record.outcome.value if record.outcome else ""
    speedup = speedup_cell(record) if record.kind == "bench" and record.template != "eager" else ""
    return [record.template, record.device, outcome, speedup, memory_cell(record) if speedup else ""]


def extras_text(record: ItemRecord) -> str | None:
    """The item's story as pytest-html shows an extra: its reason, diagnosis and repro; None when it has none."""
    lines = [
        f"{name}: {value}"
        for name, value in (
            ("outcome", record.outcome.value if record.outcome else None),
            ("reason", record.reason),
            ("rule", record.check_rule),
            ("second opinion", record.fp64_second_opinion),
            ("diagnosis", record.diagnosis),
            ("repro", f"python {record.repro}" if record.repro else None),
        )
        if value
    ]
    return "\n".join(lines) if record.reason or record.diagnosis or record.repro else None


class HtmlResultsColumns:
    """The plugin's hooks of pytest-html (a pytest plugin object)."""

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        at = min(2, len(cells))
        cells[at:at] = [f'<th class="sortable" data-column-type="inductor{i}">{c}</th>' for i, c in enumerate(COLUMNS)]

    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        at = min(2, len(cells))
        found = _cells(_record(report))
        cells[at:at] = [f'<td class="col-inductor{i}">{escape(c)}</td>' for i, c in enumerate(found)]

    @pytest.hookimpl(tryfirst=True)  # before pytest-html's own logreport stores the report
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not counted(report) or (record := _record(report)) is None or (text := extras_text(record)) is None:
            return
        from pytest_html import extras

        report.extras = [*getattr(report, "extras", []), extras.text(text, name="inductor-templates")]
