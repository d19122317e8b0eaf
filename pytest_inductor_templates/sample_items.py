"""Sample items in the pytest session: one collector per sample, items per (kind, column, device)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .bench_runner import fail_untimed, median_of, stats_info, time_model, use_synchronizing_timer
from .effect_report import effect_info, record_effects
from .environment import Device
from .matrix import Case
from .outcomes import UNTIMEABLE, Outcome, conclude
from .sample_runner import PreparedTriple, SampleCase
from .samples.base import Sample

CASE_KEY = pytest.StashKey[SampleCase]()
ROOT_NODEID = "inductor-samples"
SAMPLE_MARKER = "inductor_sample"


def check(inductor_sample: PreparedTriple, request: pytest.FixtureRequest) -> None:
    """The sample's model under test matches eager on each of its input sets (and its template took effect)."""
    result = inductor_sample.check()
    selection = inductor_sample.case.selection
    no_effect = record_effects(request.node, inductor_sample.effects, selection.label, inductor_sample.require_effect)
    if no_effect is not None and result.outcome is Outcome.PASS:
        result = no_effect
    conclude(result, request.node, request.config.option.tbstyle == "long")


def bench(inductor_sample: PreparedTriple, benchmark: Any, request: pytest.FixtureRequest) -> None:
    """Time one call of the sample's model (compiled, or eager for the eager row) through pytest-benchmark."""
    triple, item = inductor_sample, request.node
    result = triple.broken() or triple.result or triple.check()  # the check item ran first, unless deselected
    if result.outcome in UNTIMEABLE:
        fail_untimed(item, lambda: conclude(result, item, long_traceback=False))
    item.user_properties.extend(result.properties())
    inputs, model, device = triple.inputs[0], triple.model, triple.case.device
    selection = triple.case.selection
    benchmark.group = f"{triple.sample.id}[{device.name}]"
    benchmark.extra_info.update(
        sample=triple.sample.id,
        template=selection.label,
        device=device.name,
        gpu=device.description if device.type == "cuda" else None,
        settings=dict(selection.effective_settings),
        **result.json_info(),
        **effect_info(triple.effects),
    )
    steady = model.steady()  # compiled by the check; timed without per-call scaffolding
    timing = time_model(benchmark, item, lambda: triple.call(steady, inputs), device.type)
    if selection.compiles:
        benchmark.extra_info.update(stats_info(model.stats))
    benchmark.extra_info.update(timing)
    item.user_properties.append(("inductor_median_s", median_of(benchmark)))


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
        for case, case_problem in self.cases:
            problem = case_problem or self.sample.device_problem(case.device.type)
            for kind, function in KINDS:
                item = SampleItem.from_parent(self, name=f"{kind}[{case.id}]", callobj=function)
                item.stash[CASE_KEY] = SampleCase(self.sample, case, kind)
                item.add_marker(SAMPLE_MARKER)
                if self.config.pluginmanager.hasplugin("xdist"):  # --dist loadgroup keeps a triple on one worker
                    item.add_marker(pytest.mark.xdist_group(f"{self.sample.id}[{case.id}]"))
                if problem:
                    item.add_marker(pytest.mark.skip(reason=problem))
                elif kind == "bench":
                    use_synchronizing_timer(item, case.device.type)
                item.user_properties += [
                    ("inductor_sample", self.sample.id),
                    ("inductor_template", case.selection.label),
                    ("inductor_device", case.device.name),
                    ("inductor_kind", kind),
                ]
                if case.fallback_note:
                    item.user_properties.append(("inductor_fallback", case.fallback_note))
                yield item


class SamplesCollector(pytest.Collector):
    """All samples of the session, under the node id ``inductor-samples``."""

    def __init__(self, *, samples: list[Sample], cases: list[Case], visible: list[Device], **kwargs: Any) -> None:
        super().__init__(nodeid=ROOT_NODEID, **kwargs)
        self.samples = samples
        self.cases = [(case, case.problem(visible)) for case in cases]

    def collect(self) -> Iterator[pytest.Collector]:
        for sample in self.samples:
            yield SampleCollector.from_parent(self, name=sample.id, sample=sample, cases=self.cases)


def collect_sample_items(
    session: pytest.Session, samples: list[Sample], cases: list[Case], visible: list[Device]
) -> list[pytest.Item]:
    """Every sample item, in matrix order, reported to the terminal like collected tests."""
    root = SamplesCollector.from_parent(session, name=ROOT_NODEID, samples=samples, cases=cases, visible=visible)
    items: list[pytest.Item] = []
    for collector in root.collect():
        collected = list(collector.collect())
        session.ihook.pytest_collectreport(report=pytest.CollectReport(collector.nodeid, "passed", None, collected))
        items += collected
    return items
