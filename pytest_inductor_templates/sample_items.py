"""Sample items in the pytest session: one collector per sample, items per (kind, column, device)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .environment import Device
from .matrix import Case
from .outcomes import Outcome, conclude
from .sample_runner import PreparedTriple, SampleCase
from .samples.base import Sample

CASE_KEY = pytest.StashKey[SampleCase]()
UNTIMEABLE = (Outcome.EAGER_FAIL, Outcome.COMPILE_FAIL, Outcome.RUNTIME_FAIL)
ROOT_NODEID = "inductor-samples"
SAMPLE_MARKER = "inductor_sample"


def check(inductor_sample: PreparedTriple, request: pytest.FixtureRequest) -> None:
    """The sample's model under test matches eager on each of its input sets."""
    conclude(inductor_sample.check(), request.node, request.config.option.tbstyle == "long")


def bench(inductor_sample: PreparedTriple, benchmark: Any, request: pytest.FixtureRequest) -> None:
    """Time one call of the sample's model (compiled, or eager for the eager row)."""
    import torch

    failed = inductor_sample.broken() or inductor_sample.result
    if failed is not None and failed.outcome in UNTIMEABLE:
        conclude(failed, request.node, long_traceback=False)
    inputs = inductor_sample.inputs[0]
    model = inductor_sample.model
    synchronize = torch.cuda.synchronize if inductor_sample.case.device.type == "cuda" else None

    def run() -> Any:
        out = inductor_sample.call(model, inputs)
        if synchronize is not None:
            synchronize()
        return out

    for _ in range(3):  # compile, autotune, record CUDA graphs: never timed
        run()
    benchmark.group = f"{inductor_sample.sample.id}[{inductor_sample.case.device.name}]"
    benchmark.extra_info.update(
        sample=inductor_sample.sample.id,
        template=inductor_sample.case.selection.label,
        device=inductor_sample.case.device.name,
    )
    if inductor_sample.result is not None:  # the check item of this triple ran first
        benchmark.extra_info.update(dict(inductor_sample.result.properties()))
    benchmark(run)


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
