"""Diagnoses after the run's items, cheapest first: with a run budget (``--inductor-diagnose-run-budget``) a failed
sample item's diagnosis waits until every item of its pytest process has run, and the failures are then diagnosed
smallest graph first, each claiming its seconds from the run's ledger, so that the budget explains as many failures as
it can. The items' records are amended (``diagnosis_deferred``); under pytest-xdist each worker diagnoses its own
failures and sends the amended records to the controller (``report.book.AMENDED``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from ..diagnose import Diagnosis
from ..engine.cell import Verdict
from ..engine.diagnosis import DiagnosisPlan, refused_diagnosis
from ..engine.triples import SampleCase
from ..limits import Limit
from ..record import ItemRecord


@dataclass
class Pending:
    """A failed sample item waiting for its diagnosis."""

    item: pytest.Item  # the item that failed first (its node id names the repro folder)
    case: SampleCase
    verdict: Verdict

    @property
    def cost(self) -> tuple[bool, int]:
        """The sort key, cheapest first: the sample's graph size (unknown sizes last)."""
        size = self.case.sample.graph_size
        return (size is None, size or 0)


@dataclass
class Deferred:
    """The failures of this pytest process whose diagnoses wait for the end of its items."""

    pending: dict[tuple[str, str], Pending] = field(default_factory=dict)

    def add(self, item: pytest.Item, case: SampleCase, verdict: Verdict) -> None:
        self.pending.setdefault(case.key, Pending(item, case, verdict))

    def run(
        self,
        plan_for: Callable[[pytest.Item, Verdict], DiagnosisPlan | None],
        diagnose: Callable[[SampleCase, DiagnosisPlan, Verdict, Limit], Diagnosis],
        amend: Callable[[SampleCase, Diagnosis], list[ItemRecord]],
        margin: float,
    ) -> list[ItemRecord]:
        """Diagnose every pending failure, cheapest first (``plan_for`` claims each from the run's ledger); the
        records amended."""
        amended: list[ItemRecord] = []
        for pending in sorted(self.pending.values(), key=lambda p: p.cost):
            plan = plan_for(pending.item, pending.verdict)
            if plan is None:
                continue
            if plan.refused is not None:
                diagnosis = refused_diagnosis(plan.refused)
            else:
                diagnosis = diagnose(pending.case, plan, pending.verdict, Limit(plan.budget_seconds + margin))
            amended += amend(pending.case, diagnosis)
        self.pending.clear()
        return amended
