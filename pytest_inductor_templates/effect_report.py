"""Effects on the test report: properties, the no-effect warning or failure, and the summary table."""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from .compiled import CompiledModel
from .effects import Effect, judge, recorded_cuda_graphs, verdict
from .environment import Device, package_missing
from .evidence import CompileEvidence, gather
from .outcomes import CheckResult, Outcome
from .selection import Selection

VERDICTS = ("effect", "no effect", "not observed")


class NoEffectWarning(UserWarning):
    """A template had no effect on an item: what ran is what default would have compiled."""


def baseline_of(selection: Selection) -> Selection:
    """The same compile call (backend, fullgraph, dynamic) with nothing selected: ``default``."""
    return dataclasses.replace(selection, template=None, mode=None, options=None, mode_options={})


def default_code_of(
    selection: Selection, make_model: Callable[[], Any], call: Callable[[Any], Any], watcher: Any
) -> Callable[[], str | None]:
    """A thunk compiling a fresh model under ``default`` and returning Inductor's code for it."""

    def default_code() -> str | None:
        baseline = CompiledModel(make_model(), baseline_of(selection), watcher)
        evidence = CompileEvidence()
        try:
            with gather(evidence):
                call(baseline)
        except Exception:
            return None
        return evidence.code

    return default_code


REPEAT_CALLS_FOR_CUDA_GRAPHS = 2  # a graph's (or a dynamic graph's shape's) first call warms up, the next records


def effects_of(
    model: Any,
    selection: Selection,
    device: Device,
    default_code: Callable[[], str | None] | None,
    call_again: Callable[[], Any] | None = None,
) -> list[Effect]:
    """The verdicts for a model that compiled and ran (none for the eager row or another backend's).

    Inductor's CUDA-graph trees record a graph the second time an input shape reaches it; where the check's
    calls recorded none and nothing was skipped, ``call_again`` (the first input set) is called up to twice.
    """
    if not isinstance(model, CompiledModel):
        return []
    index = int(device.name.partition(":")[2] or 0) if device.type == "cuda" else 0
    recorded = None
    if device.type == "cuda" and selection.cudagraphs:
        recorded = _cuda_graphs_recorded(model, index, call_again)
    backends = str(selection.effective_settings.get("max_autotune_gemm_backends", "")).upper()
    return judge(
        selection,
        model.stats,
        model.evidence,
        device.type,
        device.capability,
        recorded,
        default_code,
        package_missing("cutlass_library") if "CUTLASS" in backends else None,
    )


def _cuda_graphs_recorded(model: CompiledModel, index: int, call_again: Callable[[], Any] | None) -> int | None:
    """The CUDA graphs on device ``index``; where none is recorded yet and nothing was skipped, after
    calling ``call_again`` until one is (at most twice)."""
    recorded = recorded_cuda_graphs(index)
    for _ in range(REPEAT_CALLS_FOR_CUDA_GRAPHS):
        if call_again is None or recorded != 0 or model.stats.cudagraph_skips:
            break
        call_again()
        recorded = recorded_cuda_graphs(index)
    return recorded


def effect_info(effects: list[Effect]) -> dict[str, str]:
    """The verdict as benchmark extra_info."""
    if not effects:
        return {}
    return {"effect": verdict(effects), "effect_evidence": "; ".join(map(str, effects))}


def record_effects(item: pytest.Item, effects: list[Effect], template: str, require: bool) -> CheckResult | None:
    """Put the verdict on the item's report; a no-effect item warns, or, when required, gets a failure."""
    if not effects:
        return None
    item.user_properties += [(f"inductor_{k}", v) for k, v in effect_info(effects).items()]
    if verdict(effects) != "no effect":
        return None
    reason = f"template {template!r} had no effect: " + "; ".join(str(e) for e in effects if e.took_effect is False)
    if require:
        return CheckResult(Outcome.NO_EFFECT, reason, reason)
    warnings.warn(NoEffectWarning(reason), stacklevel=2)
    return None


class EffectReport:
    """Counts verdicts per template from the reports; lists the items without effect (a pytest plugin)."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = defaultdict(Counter)
        self.without: list[tuple[str, str]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props = dict(report.user_properties)
        if "inductor_effect" not in props or report.when != "call":
            return
        template, found = str(props.get("inductor_template")), str(props["inductor_effect"])
        self.counts[template][found] += 1
        if found == "no effect":
            self.without.append((report.nodeid, str(props.get("inductor_effect_evidence", ""))))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.counts:
            return
        terminalreporter.write_sep("=", "inductor-templates: did each template take effect")
        width = max(len(t) for t in [*self.counts, "template"]) + 2
        terminalreporter.write_line("template".ljust(width) + "  ".join(VERDICTS))
        for template, counts in self.counts.items():
            cells = "  ".join(str(counts[v]).rjust(len(v)) for v in VERDICTS)
            terminalreporter.write_line(template.ljust(width) + cells)
        if self.without:
            terminalreporter.write_sep("-", "no effect")
            for nodeid, evidence in self.without:
                terminalreporter.write_line(f"{nodeid}: {evidence}")
