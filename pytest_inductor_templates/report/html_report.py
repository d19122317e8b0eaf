"""``--inductor-html FILE``: the session's records written as the run's HTML page at its end, through the same
reading the command's ``report --format html`` does (the results file's layout, ``runs.files``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from ..record import FORMAT
from ..runs.files import RunError, from_data, write_text
from ..runs.html_page import run_page
from ..runs.results_file import MARK, VERSION, as_run_data
from .book import RecordBook


class HtmlReport:
    """Writes the page when the session ends and names it in the terminal summary (a pytest plugin object)."""

    def __init__(
        self,
        path: Path,
        book: RecordBook,
        machine_info: Callable[[], dict[str, Any]],
        left_out: Callable[[], list[tuple[str, str]]],
    ) -> None:
        self.path = path
        self.book = book
        self.machine_info = machine_info
        self.left_out = left_out
        self.started = datetime.now(timezone.utc).isoformat()
        self.error: str | None = None

    def page(self, exitstatus: int) -> str:
        """The page of the records so far; a run interrupted or ended by an internal error is partial."""
        header = {MARK: VERSION, "format": FORMAT, "started": self.started, "argv": sys.argv[1:]}
        header["machine_info"] = self.machine_info()
        interrupted = self.book.interrupted or (
            "pytest ended with an internal error" if exitstatus == pytest.ExitCode.INTERNAL_ERROR else None
        )
        end: dict[str, Any] = {"exitstatus": int(exitstatus), "complete": interrupted is None}
        if interrupted:
            end["interrupted"] = interrupted
        end["left_out"] = [{"template": name, "reason": why} for name, why in self.left_out()]
        data = as_run_data(header, [r.to_dict() for r in self.book.records], end)
        return run_page(from_data(str(self.path), data))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            write_text(str(self.path), self.page(exitstatus))
        except RunError as error:
            self.error = str(error)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.error is not None:
            terminalreporter.write_sep("-", f"inductor-templates: the HTML page was not written: {self.error}")
        else:
            terminalreporter.write_sep("-", f"inductor-templates: HTML page: {self.path.resolve().as_uri()}")
