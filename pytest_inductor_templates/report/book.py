"""Every item record of the session, as the test reports bring them (from xdist workers too)."""

from __future__ import annotations

import pytest

from ..record import ItemRecord
from .item_records import counted


class RecordBook:
    """Decodes the record of each item from its counted report (a pytest plugin object)."""

    def __init__(self) -> None:
        self.records: list[ItemRecord] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not counted(report):
            return
        record = ItemRecord.from_properties(report.user_properties)
        if record is not None:
            self.records.append(record)
