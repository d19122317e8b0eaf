"""Running one (sample, template, device) triple: build once, share between its items, release after."""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field
from typing import Any

from .check_runner import CheckSubject, run_check
from .compiled import CompiledModel, EagerModel
from .effect_report import default_code_of, effects_of
from .effects import Effect
from .isolation import CompileWatcher, isolated_compile_state
from .matrix import Case
from .outcomes import CheckResult, Outcome
from .samples.base import Inputs, Sample, SampleError
from .tolerances import Tolerance


@dataclass(frozen=True)
class SampleCase:
    """What one sample item runs: a sample, a (column, device) case, and the item kind."""

    sample: Sample
    case: Case
    kind: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.sample.id, self.case.id)


@dataclass
class PreparedTriple:
    """A triple's model under test and inputs, built on first use and shared by the triple's items."""

    sample: Sample
    case: Case
    tolerance: Tolerance | None = None
    require_effect: bool = False  # --inductor-require-effect
    error: str | None = None  # why the sample could not be built
    model: Any = None  # the compiled model, or the eager one for the eager row
    inputs: list[Inputs] = field(default_factory=list)
    result: CheckResult | None = None  # the check item's verdict, once it ran
    effects: list[Effect] = field(default_factory=list)  # whether the template took effect, once checked
    watcher: CompileWatcher | None = None

    def broken(self) -> CheckResult | None:
        """The eager_fail verdict of a sample that could not be built, or None."""
        if self.error is None:
            return None
        reason = f"sample {self.sample.id} is broken: {self.error}"
        return CheckResult(Outcome.EAGER_FAIL, reason, reason)

    @staticmethod
    def call(model: Any, inputs: Inputs) -> Any:
        import torch

        with torch.no_grad():
            return model(*inputs.args, **inputs.kwargs)

    def check(self) -> CheckResult:
        """The model under test against fresh eager instances, on every input set in order."""
        import torch

        device = torch.device(self.case.device.name)
        subject = CheckSubject(
            make_eager=lambda: self.sample.make_model(device),
            model=self.model,
            inputs=self.inputs,
            tolerance=self.sample.tolerance or self.tolerance,
            backend=self.case.selection.backend,
            call=self.call,
        )
        self.result = self.broken() or run_check(subject)
        if self.result.outcome in (Outcome.PASS, Outcome.ACCURACY_FAIL):
            self.effects = effects_of(
                self.model,
                self.case.selection,
                self.case.device,
                default_code_of(
                    self.case.selection,
                    lambda: self.sample.make_model(device),
                    lambda model: self.call(model, self.inputs[0]),
                    self.watcher,
                ),
                lambda: self.call(self.model, self.inputs[0]),
            )
        return self.result


class TripleCache:
    """Holds the current triple; builds the next one only when the key changes, releasing the last."""

    def __init__(self, tolerance: Tolerance | None = None, require_effect: bool = False) -> None:
        self.tolerance = tolerance
        self.require_effect = require_effect
        self.current: PreparedTriple | None = None
        self._key: tuple[str, str] | None = None
        self._scope = contextlib.ExitStack()

    def get(self, item_case: SampleCase) -> PreparedTriple:
        if item_case.key != self._key:
            self.release()
            self._key = item_case.key
            self.current = self._build(item_case)
        assert self.current is not None
        return self.current

    def _build(self, item_case: SampleCase) -> PreparedTriple:
        import torch

        sample, case = item_case.sample, item_case.case
        prepared = PreparedTriple(sample, case, self.tolerance, self.require_effect)
        watcher = self._scope.enter_context(isolated_compile_state())
        prepared.watcher = watcher
        device = torch.device(case.device.name)
        try:
            prepared.inputs = sample.make_inputs(device)
            model = sample.make_model(device)
        except SampleError as error:
            prepared.error = str(error)
            return prepared
        except Exception as error:  # a sample that cannot even be built fails its own items only
            prepared.error = f"building it raised {type(error).__name__}: {error}"
            return prepared
        prepared.model = CompiledModel(model, case.selection, watcher) if case.selection.compiles else EagerModel(model)
        return prepared

    def release(self) -> None:
        """Drop the current triple's models and compiled state; free CUDA memory it held."""
        if self._key is None:
            return
        device_type = self.current.case.device.type if self.current else "cpu"
        self.current, self._key = None, None
        self._scope.close()
        if device_type == "cuda":
            import torch

            gc.collect()
            torch.cuda.empty_cache()
