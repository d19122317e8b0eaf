"""Sample items in the pytest session: one collector per sample, items per (kind, column, device)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from ..diagnose import Diagnosis
from ..engine.cell import CellResult
from ..engine.diagnosis import needs_diagnosis
from ..engine.triples import SampleCase
from ..integrations.benchmark import feed, mark_timing, mark_untimed, name_benchmark, timing_plan
from ..integrations.timeout import item_limit
from ..limits import Limit
from ..machine import Device
from ..outcomes import ENDED_EARLY
from ..record import ItemRecord
from ..report.book import AMENDED, RecordBook
from ..report.records import CHECK_ENDED, ROOT_NODEID, conclude, new_record, sample_item_name, start
from ..samples.base import Sample
from ..samples.sources import largest_graphs_first
from ..templates.matrix import Case
from ..timing.processes import loads_for, most_processes_for, processes_for
from .session import plugin_state

if TYPE_CHECKING:
    from ..timing.measure import Timing, TimingPlan

CASE_KEY = pytest.StashKey[SampleCase]()
DIAGNOSIS_MARGIN = 60.0  # seconds past a diagnosis's budget before its worker counts as stuck
SAMPLE_MARKER = "inductor_sample"


BROKEN_KEY = pytest.StashKey[dict[str, str]]()  # sample id -> the node id of the item that found it broken


def skip_if_broken(item: pytest.Item, sample: Sample) -> None:
    """Skip an item of a sample that an earlier item could not build: one failure per broken sample."""
    found = item.config.stash.setdefault(BROKEN_KEY, {}).get(sample.id)
    if found is not None:
        mark_untimed(item)
        pytest.skip(f"sample {sample.id} cannot be built: see {found}")


def conclude_sample(item: pytest.Item, triple: Any, cell: CellResult) -> None:
    """End a sample item, its failed check diagnosed where the triple lives (once for the triple's items); a sample
    found broken is noted, so that its later items skip."""
    if cell.unbuilt:
        item.config.stash.setdefault(BROKEN_KEY, {})[triple.sample.id] = item.nodeid

    def diagnosis() -> Diagnosis | None:
        if triple.diagnosis is not None or cell.ended:
            return triple.diagnosis
        state = plugin_state(item.config)
        if state.defers_diagnoses and needs_diagnosis(cell.verdict):  # after the run's items, cheapest first
            state.deferred.add(item, item.stash[CASE_KEY], cell.verdict)
            return None
        plan = state.diagnosis_plan(item, cell.verdict)
        return triple.diagnose(plan, Limit(plan.budget_seconds + DIAGNOSIS_MARGIN)) if plan is not None else None

    conclude(item, cell, diagnosis)


class DiagnosesAfterItems:
    """The diagnoses that waited for the end of this process's items, run as the session finishes: before
    pytest-benchmark writes its JSON (in its own wrapper of the hook), and in a pytest-xdist worker before it sends
    its output, which then carries the amended records to the controller's book (``report.book.AMENDED``). A run
    interrupted before them (Ctrl-C, SIGTERM) ends without them; one interrupted during them keeps those that ended,
    ends as interrupted, and still writes its reports."""

    def __init__(self, book: RecordBook) -> None:
        self.book = book

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Any:
        amended: list[ItemRecord] = []
        if exitstatus != pytest.ExitCode.INTERRUPTED and self.book.interrupted is None:
            try:
                diagnose_after_items(session.config, self.book, amended)
            except KeyboardInterrupt as stop:  # Ctrl-C or SIGTERM (report.book.Terminated): the reports still go out
                self.book.stopped(stop)
                session.exitstatus = pytest.ExitCode.INTERRUPTED
        if hasattr(session.config, "workerinput"):
            session.config.workeroutput[AMENDED] = [record.to_dict() for record in amended]
        return (yield)


def diagnose_after_items(config: pytest.Config, book: RecordBook, amended: list[ItemRecord]) -> None:
    """The diagnoses that waited for the end of this process's items (``items.deferred``), cheapest first, written
    into the book's records; the records amended go to ``amended`` as each diagnosis ends."""
    state = plugin_state(config)
    if not state.deferred.pending or state.resolved is None:
        return
    triples = state.resolved.triples
    try:
        state.deferred.run(state.diagnosis_plan, triples.diagnose, book.amend, DIAGNOSIS_MARGIN, amended)
    finally:
        triples.release()


def check(inductor_sample: Any, request: pytest.FixtureRequest) -> None:
    """The sample's model under test matches eager on each of its input sets (and its template took effect)."""
    skip_if_broken(request.node, inductor_sample.sample)
    limit = item_limit(request.node, plugin_state(request.config).session.timeout)
    conclude_sample(request.node, inductor_sample, inductor_sample.result(None, limit))


def bench(inductor_sample: Any, benchmark: Any, request: pytest.FixtureRequest) -> None:
    """Time one call of the sample's model (compiled, or eager for the eager row) through pytest-benchmark; a
    compiled model that passed its check is then timed in pairs with a fresh eager one: its speedup."""
    triple, item, state = inductor_sample, request.node, plugin_state(request.config)
    skip_if_broken(item, triple.sample)
    session = state.session
    earlier = triple.verdict
    if earlier is not None and earlier.result.outcome in ENDED_EARLY:  # its check item ended the triple
        mark_untimed(item)
        pytest.skip(f"{CHECK_ENDED} {earlier.result.outcome.value}: {earlier.result.reason}")
    name_benchmark(benchmark, f"{triple.sample.id}[{triple.case.device.name}]")
    device_type = triple.case.device.type
    chosen, available = state.options.timing_processes, 1 + triple.repeat_processes
    processes = min(processes_for(chosen, device_type), available)  # the paired timing's spans are shared among them
    loads = loads_for(state.options.timing_loads, device_type, processes)
    plan = timing_plan(benchmark, state.timing, session.times_without_benchmark(triple.case), processes, loads)
    limit = item_limit(item, session.timeout)
    cell = triple.result(plan, limit)
    most = min(most_processes_for(chosen, device_type), available)
    if cell.timing is not None and cell.timing.paired is not None and most > 1:
        cell = dataclasses.replace(cell, timing=repeated(triple, cell.timing, plan, processes, most, limit))
    if cell.timing is None:
        mark_untimed(item)
    else:
        feed(benchmark, cell.timing, triple.runs_in)
    conclude_sample(item, triple, cell)


def repeated(triple: Any, timing: Timing, plan: TimingPlan, processes: int, most: int, limit: Limit) -> Timing:
    """``timing`` (its own loads first) with its repeats in ``processes - 1`` other processes, then, while its band is
    wider than its target, in processes not asked before until ``most`` have timed it (a repeat that gave nothing
    is made up for), each timing its share of the first ``processes``' span."""
    timing = dataclasses.replace(timing, repeats=(*timing.repeats, *triple.repeat(plan, processes - 1, limit)))
    timed = len(set(timing.process_of))
    if timed < most and timing.unstable:
        more = triple.repeat(plan, most - timed, limit, after=processes - 1)
        timing = dataclasses.replace(timing, repeats=(*timing.repeats, *more))
    return timing


KINDS = (("check", check), ("bench", bench))


class SampleItem(pytest.Function):
    """A sample item: a plain test function whose report names the sample, kind and case."""

    def reportinfo(self) -> tuple[Any, int, str]:
        return self.path, 0, f"{self.parent.name}::{self.name}"


class SampleCollector(pytest.Collector):
    """One sample: its items for every case and kind, the items of one triple next to each other."""

    def __init__(self, *, sample: Sample, cases: list[tuple[Case, str | None]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sample = sample
        self.cases = cases  # each case with the reason it cannot run here, or None

    def collect(self) -> Iterator[pytest.Item]:
        fixtures = self.parent.fixtures  # type: ignore[attr-defined]
        for case, case_problem in self.cases:
            problem = case_problem or self.sample.device_problem(case.device.type)
            for kind, function in KINDS:
                name = sample_item_name(kind, case)
                known = fixtures.get(kind)
                fixtureinfo = dataclasses.replace(known, names_closure=list(known.names_closure)) if known else None
                item = SampleItem.from_parent(self, name=name, callobj=function, fixtureinfo=fixtureinfo)
                fixtures.setdefault(kind, item._fixtureinfo)
                item.stash[CASE_KEY] = SampleCase(self.sample, case, kind)
                start(item, new_record(case, self.sample.id, kind, "sample", self.sample.weights_mode))
                item.add_marker(SAMPLE_MARKER)
                if self.config.pluginmanager.hasplugin("xdist"):  # --dist loadgroup keeps a sample on one worker
                    item.add_marker(pytest.mark.xdist_group(self.sample.id))
                if problem:
                    item.add_marker(pytest.mark.skip(reason=problem))
                elif kind == "bench":
                    mark_timing(item, case.device.type, plugin_state(self.config).timing.cpu_time)
                yield item


class SamplesCollector(pytest.Collector):
    """All samples of the session, under the node id ``inductor-samples``."""

    def __init__(self, *, samples: list[Sample], cases: list[Case], visible: list[Device], **kwargs: Any) -> None:
        super().__init__(nodeid=ROOT_NODEID, **kwargs)
        self.samples = samples
        self.cases = [(case, case.problem(visible)) for case in cases]
        # kind -> the fixtures its items request, found for the first (every sample item has the same function of
        # its kind and sees the same fixtures: no module, class or directory of its own), as pytest itself hands a
        # parametrized function's fixture info to each of its items; 10,000 items read it once, not 10,000 times
        self.fixtures: dict[str, Any] = {}

    def collect(self) -> Iterator[pytest.Collector]:
        for sample in self.samples:
            yield SampleCollector.from_parent(self, name=sample.id, sample=sample, cases=self.cases)


def timed_by_the_plugin(item: pytest.Item) -> bool:
    """Whether ``item`` is a sample's bench item that its worker times although pytest-benchmark switched itself off
    (under pytest-xdist)."""
    item_case = item.stash.get(CASE_KEY, None)
    session = plugin_state(item.config).session
    return item_case is not None and item_case.kind == "bench" and session.times_without_benchmark(item_case.case)


def release_after(item: pytest.Item, nextitem: pytest.Item | None, triples: Any) -> None:
    """Release the item's triple when the next item belongs to another one."""
    following = nextitem.stash.get(CASE_KEY, None) if nextitem is not None else None
    if following is None or following.key != item.stash[CASE_KEY].key:
        triples.release()


def collect_sample_items(
    session: pytest.Session, samples: list[Sample], cases: list[Case], visible: list[Device]
) -> list[pytest.Item]:
    """Every sample item, in matrix order, reported to the terminal like collected tests; in a pytest-xdist worker
    (where xdist collects) the samples with the largest graphs first, so that the longest compiles start first."""
    if hasattr(session.config, "workerinput"):
        samples = largest_graphs_first(samples)
    root = SamplesCollector.from_parent(session, name=ROOT_NODEID, samples=samples, cases=cases, visible=visible)
    items: list[pytest.Item] = []
    for collector in root.collect():
        collected = list(collector.collect())
        session.ihook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, collected))
        items += collected
    return items
