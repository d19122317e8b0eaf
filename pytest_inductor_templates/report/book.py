"""Every item record of the session, as the test reports bring them (from xdist workers too), and the
results file they are appended to as they arrive."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from ..diagnose import Diagnosis
from ..record import EAGER, ItemRecord
from ..runs.results_file import ResultsWriter
from .records import counted, diagnosis_seconds, first_line, write_diagnosis

TERMINATED = "terminated by SIGTERM"
NOTHING_FAILED = (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)


class Terminated(KeyboardInterrupt):
    """SIGTERM (what a CI cancel sends), raised as Ctrl-C is, so that pytest still writes its reports."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(TERMINATED)


def stop_on_sigterm() -> Callable[[], None]:
    """Make SIGTERM end the run as Ctrl-C does (JUnit XML, benchmark JSON and the results file's last line are
    written, marked interrupted); returns what restores the previous handler. Only where none was set."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) not in (
        signal.SIG_DFL,
        None,
    ):
        return lambda: None
    previous = signal.signal(signal.SIGTERM, _terminate)
    return lambda: signal.signal(signal.SIGTERM, previous)


AMENDED = "inductor_templates_amended"  # a pytest-xdist worker's workeroutput: its amended records, as dicts


class RecordBook:
    """Decodes the record of each item from its counted report (a pytest plugin object)."""

    def __init__(self, results: ResultsWriter | None = None, machine_info: Any = None) -> None:
        self.records: list[ItemRecord] = []
        self.ran = 0  # items that ran (not skipped), the plugin's or not, the samples' eager rows aside
        self.eager_rows_ran = 0  # the samples' eager reference items that ran: no template's result on their own
        self.skipped: list[tuple[str, str]] = []  # (node id, reason) of each skipped item, the plugin's or not
        self.interrupted: str | None = None  # why the run was cut short
        self.results = results
        self._machine_info = machine_info  # a thunk: torch is imported only when the results file starts
        self._started_with: dict[str, Any] = {}  # the machine_info the results file started with

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.results is not None:
            self._started_with = self._machine_info()
            self.results.start(self._started_with)

    def _learnt(self) -> dict[str, Any]:
        """What machine_info gained or changed since the results file started (the header's CPU-speed probe, run
        after it)."""
        if self._machine_info is None or not self._started_with:  # no results file was started
            return {}
        now = self._machine_info()
        return {key: value for key, value in now.items() if self._started_with.get(key) != value}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not counted(report):
            return
        record = ItemRecord.from_properties(report.user_properties)
        if report.skipped:
            self.skipped.append((report.nodeid, first_line(report).removeprefix("Skipped: ")))
        elif record is not None and record.source == "sample" and record.template == EAGER:
            self.eager_rows_ran += 1
        else:
            self.ran += 1
        if record is not None:
            self.records.append(record)
            if self.results is not None:
                self.results.add(record)

    def amend(self, nodeids: list[str], diagnosis: Diagnosis) -> list[ItemRecord]:
        """Write a diagnosis made after the run's items into the records of the items ``nodeids`` (a triple's failed
        check and bench items), each written to the results file again; the records amended."""
        amended = [r for r in self.records if r.nodeid in nodeids]
        for record in amended:
            write_diagnosis(record, diagnosis)
            record.diagnosis_deferred = True
            if self.results is not None:
                self.results.add(record)
        return amended

    def replace(self, record: ItemRecord) -> None:
        """Put ``record`` (amended in a pytest-xdist worker) in place of the one of its node id, and write it to the
        results file again."""
        if any(r.nodeid == record.nodeid for r in self.records):
            self.records = [record if r.nodeid == record.nodeid else r for r in self.records]
        else:
            self.records.append(record)
        if self.results is not None:
            self.results.add(record)

    @pytest.hookimpl(optionalhook=True)  # pytest-xdist's; in the controller
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        for data in getattr(node, "workeroutput", {}).get(AMENDED, []):
            self.replace(ItemRecord.from_dict(data))

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        self.stopped(excinfo.value)

    def stopped(self, stop: BaseException) -> None:
        """The run was cut short by ``stop`` (Ctrl-C, or SIGTERM raised as ``Terminated``)."""
        self.interrupted = TERMINATED if isinstance(stop, Terminated) else "interrupted (KeyboardInterrupt)"

    def nothing_ran(self, exitstatus: int) -> bool:
        """Whether every item was skipped (the samples' eager rows aside, where something else was: a template this
        machine lacks leaves them running, as the reference of nothing), and nothing else failed."""
        only_references = self.eager_rows_ran == 0 or bool(self.skipped)
        return self.ran == 0 and only_references and exitstatus in NOTHING_FAILED

    def fails_for_nothing_run(self, require_run: bool, exitstatus: int) -> bool:
        """Whether ``--inductor-require-run`` fails this run: every item was skipped, and nothing else failed."""
        return require_run and self.nothing_ran(exitstatus)

    def end(self, exitstatus: int, left_out: list[tuple[str, str]]) -> None:
        """Write the results file's last line (called at the end of the session)."""
        if self.results is not None:
            interrupted = self.interrupted or (
                "pytest ended with an internal error" if exitstatus == pytest.ExitCode.INTERNAL_ERROR else None
            )
            self.results.end(
                int(exitstatus), interrupted is None, left_out, interrupted, diagnosis_seconds(self.records),
                self._learnt(),
            )  # fmt: skip
