"""The one check-and-judge step behind sample items and user tests: compare with eager, judge the effect."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..compile.effects import Effect, default_code_of, effects_of, verdict
from ..compile.isolation import CompileWatcher
from ..machine import Device
from ..outcomes import Outcome
from ..record import ItemRecord
from ..templates.selection import Selection
from .result import CheckResult
from .runner import CheckSubject, run_check


@dataclass
class Verdict:
    """A check's result and, for a compiled model that ran, whether its template took effect."""

    result: CheckResult
    effects: list[Effect] = field(default_factory=list)
    no_effect: str | None = None  # why the template had no effect, when it had none

    def fill(self, record: ItemRecord, stats: Any = None) -> None:
        """Write the verdict (and the compile figures in ``stats``) into ``record``."""
        result = self.result
        record.outcome, record.reason, record.tolerance_level = result.outcome, result.reason, result.level
        record.check_rule = result.rule or None
        record.fp64_second_opinion = "; ".join(result.second_opinions) or None
        if result.uncompared:
            record.uncompared = f"{', '.join(result.uncompared)}: NaN or Inf everywhere in eager, as in compiled"
        if self.effects:
            record.effect = verdict(self.effects)
            record.effect_evidence = "; ".join(map(str, self.effects))
        if stats is not None and result.outcome not in (Outcome.EAGER_FAIL, Outcome.COMPILE_FAIL):
            record.compile_seconds = round(stats.compile_seconds, 4)
            record.graphs, record.graph_breaks = stats.graphs, stats.graph_breaks
            record.recompiles, record.cudagraph_skips = stats.recompiles, stats.cudagraph_skips


def check_and_judge(
    subject: CheckSubject, selection: Selection, device: Device, watcher: CompileWatcher | None, require_effect: bool
) -> Verdict:
    """Run the check; for a model that compiled and ran, judge each aspect of its template; with
    ``require_effect``, a passing item whose template had no effect becomes ``no_effect``."""
    result = run_check(subject)
    if result.outcome not in (Outcome.PASS, Outcome.ACCURACY_FAIL):
        return Verdict(result)
    first = subject.inputs[0]
    call_first: Callable[[Any], Any] = lambda model: subject.call(model, first)  # noqa: E731
    default_code = default_code_of(selection, subject.make_eager, call_first, watcher)
    effects = effects_of(subject.model, selection, device, default_code, lambda: call_first(subject.model))
    if verdict(effects) != "no effect":
        return Verdict(result, effects)
    why = f"template {selection.label!r} had no effect: " + "; ".join(str(e) for e in effects if e.took_effect is False)
    if require_effect and result.outcome is Outcome.PASS:
        result = replace(result, outcome=Outcome.NO_EFFECT, reason=why, details=why)
    return Verdict(result, effects, why)
