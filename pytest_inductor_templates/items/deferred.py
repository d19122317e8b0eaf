"""Diagnoses after the run's items, cheapest first: with a run budget (``--inductor-diagnose-run-budget``) a failed
sample item's diagnosis waits until every item of its pytest process has run, and the failures are then diagnosed
smallest graph first, each claiming its seconds from the run's ledger, so that the budget explains as many failures as
it can. The items' records are amended (``diagnosis_deferred``); under pytest-xdist each worker diagnoses its own
failures and sends the amended records to the controller (``report.book.AMENDED``)."""

from __future__ import annotations

import dataclasses
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
    """A failed sample item's triple waiting for its diagnosis."""

    item: pytest.Item  # the item that failed first (its node id names the repro folder)
    case: SampleCase
    verdict: Verdict  # without its exception, whose traceback would hold the model and inputs until the run's end
    nodeids: list[str] = field(default_factory=list)  # the triple's failed items, whose records wait for it

    @property
    def cost(self) -> int:
        """The sort key, cheapest first: the sample's graph size (a built-in's, unknown, as small)."""
        return self.case.sample.graph_size or 0


@dataclass
class Deferred:
    """The failures of this pytest process whose diagnoses wait for the end of its items."""

    pending: dict[tuple[str, str], Pending] = field(default_factory=dict)

    def add(self, item: pytest.Item, case: SampleCase, verdict: Verdict) -> None:
        if case.key not in self.pending:
            result = dataclasses.replace(verdict.result, error=None)
            self.pending[case.key] = Pending(item, case, dataclasses.replace(verdict, result=result))
        self.pending[case.key].nodeids.append(item.nodeid)

    def run(
        self,
        plan_for: Callable[[pytest.Item, Verdict], DiagnosisPlan | None],
        diagnose: Callable[[SampleCase, DiagnosisPlan, Verdict, Limit], Diagnosis],
        amend: Callable[[list[str], Diagnosis], list[ItemRecord]],
        margin: float,
        amended: list[ItemRecord],
    ) -> None:
        """Diagnose every pending failure, cheapest first (``plan_for`` claims each from the run's ledger), adding
        the records amended to ``amended`` as each ends (what a Ctrl-C leaves is kept); a diagnosis that raises is
        a failed one."""
        for pending in sorted(self.pending.values(), key=lambda p: p.cost):
            plan = plan_for(pending.item, pending.verdict)
            if plan is None:
                continue
            if plan.refused is not None:
                diagnosis = refused_diagnosis(plan.refused)
            else:
                try:
                    diagnosis = diagnose(pending.case, plan, pending.verdict, Limit(plan.budget_seconds + margin))
                except Exception as error:  # the worker raised: the diagnosis failed, the other failures go on
                    reason = f"{type(error).__name__}: {error}"
                    diagnosis = Diagnosis(f"diagnosis failed: {reason}", failed=reason)
            amended += amend(pending.nodeids, diagnosis)
        self.pending.clear()
