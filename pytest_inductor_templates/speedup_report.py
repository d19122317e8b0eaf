"""Terminal summary of timed items: a samples x templates speedup table per run, and the xdist note."""

from __future__ import annotations

import pytest

from .report import counted
from .results import Entry, fill_speedups, speedup_table

XDIST_NOTE = (
    "pytest-xdist is active, so pytest-benchmark disabled timing: bench items ran once, untimed, and no "
    "speedups were computed; the checks ran as usual. Run without -n to time."
)


class SpeedupReport:
    """Collects the bench items' medians and outcomes from their reports (a pytest plugin object)."""

    def __init__(self, xdist_active: bool) -> None:
        self.entries: list[Entry] = []
        self.xdist_active = xdist_active
        self.bench_items = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if props.get("inductor_kind") != "bench" or not counted(report):
            return
        self.bench_items += not report.skipped
        median = props.get("inductor_median_s")
        outcome = props.get("inductor_outcome")
        if median is None and outcome in (None, "pass"):
            return  # not timed (benchmarks disabled or skipped): nothing to tabulate
        self.entries.append(
            Entry(
                sample=str(props.get("inductor_sample")),
                template=str(props.get("inductor_template")),
                device=str(props.get("inductor_device")),
                median=median,
                outcome=outcome,
                eager_median=props.get("inductor_eager_median_s"),
                fullname=report.nodeid,
                reason=str(props.get("inductor_reason", "")),
            )
        )

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.xdist_active and self.bench_items:
            terminalreporter.write_sep("=", "inductor-templates: timing")
            terminalreporter.write_line(XDIST_NOTE)
            return
        lines = speedup_table(fill_speedups(self.entries))
        if lines and any(e.median is not None for e in self.entries):
            terminalreporter.write_sep("=", "inductor-templates: speedup over eager (eager median / median)")
            for line in lines:
                terminalreporter.write_line(line)
