"""The record on a pytest item: started at collection, filled by the item, ended into its report.

Every item of the plugin (sample items, and user tests that use ``inductor_check`` or
``inductor_benchmark``) carries an ``ItemRecord`` in its stash. The item fills it and ends through
``conclude``; at report time ``complete`` gives an outcome to an item that got none (skipped, errored),
and writes the record into the report's ``user_properties``, the one transport to JUnit XML and to
pytest-xdist's controller.
"""

from __future__ import annotations

import warnings

import pytest

from ..check.verdict import Verdict
from ..outcomes import FAILURES, Outcome
from ..record import ItemRecord

RECORD_KEY = pytest.StashKey[ItemRecord]()


class NoEffectWarning(UserWarning):
    """A template had no effect on an item: what ran is what default would have compiled."""


def start(item: pytest.Item, record: ItemRecord) -> None:
    """Give ``item`` its record (identity filled in; outcome still unknown)."""
    record.nodeid = item.nodeid
    item.stash[RECORD_KEY] = record


def record_of(item: pytest.Item) -> ItemRecord | None:
    return item.stash.get(RECORD_KEY, None)


def conclude(item: pytest.Item, verdict: Verdict, stats: object = None) -> None:
    """Write ``verdict`` into the item's record and end the item: pass, fail with the explanation, or skip."""
    record = item.stash[RECORD_KEY]
    verdict.fill(record, stats)
    result = verdict.result
    if verdict.no_effect is not None and result.outcome is not Outcome.NO_EFFECT and record.counts_as_check:
        path, line, _ = item.reportinfo()
        warnings.warn_explicit(NoEffectWarning(verdict.no_effect), NoEffectWarning, str(path), (line or 0) + 1)
    if result.outcome is Outcome.PASS:
        return
    if result.outcome is Outcome.EAGER_NONDETERMINISTIC:  # not the compiler's fault: reported at the test
        raise pytest.skip.Exception(f"eager_nondeterministic: {result.reason}", _use_item_location=True)
    if result.outcome is Outcome.SKIPPED:  # not run on purpose (over --inductor-memory-budget)
        raise pytest.skip.Exception(result.reason, _use_item_location=True)
    if item.config.option.tbstyle == "long" and result.error is not None:
        raise result.error
    pytest.fail(f"{result.outcome.value}: {result.details or result.reason}", pytrace=False)


def counted(report: pytest.TestReport) -> bool:
    """One report per item counts: the call, or the setup when the item went no further."""
    return report.when == "call" or (report.when == "setup" and not report.passed)


def _first_line(report: pytest.TestReport) -> str:
    text = str(report.longrepr) if report.longrepr else ""
    if report.skipped and isinstance(report.longrepr, tuple):
        text = report.longrepr[2]
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def complete(item: pytest.Item, report: pytest.TestReport) -> None:
    """At the item's counted report: settle its outcome from the report where the item recorded none (or
    recorded a pass and failed later), and put the record on the report and the item (JUnit XML writes the
    properties of the item's last report)."""
    record = record_of(item)
    if record is None or not counted(report):
        return
    if report.skipped and record.outcome in (None, Outcome.PASS):
        record.outcome, record.reason = Outcome.SKIPPED, _first_line(report)
    elif report.failed and record.outcome not in FAILURES:
        record.outcome, record.reason = Outcome.RUNTIME_FAIL, _first_line(report)
    elif report.passed and record.outcome is None:
        record.outcome = Outcome.PASS
    if record.outcome is not Outcome.PASS:
        record.drop_speedup()
    properties = record.properties()
    report.user_properties.extend(properties)
    item.user_properties.extend(properties)
