"""Running one (sample, template, device) triple: build once, share between its items, release after."""

from __future__ import annotations

import contextlib
import gc
import traceback
from dataclasses import dataclass, field
from typing import Any

from ..check.outcomes import CheckResult
from ..check.runner import CheckSubject
from ..check.tolerances import Tolerance
from ..check.verdict import Verdict, check_and_judge
from ..compile.compiled import CompiledModel, EagerModel
from ..compile.isolation import CompileWatcher, isolated_compile_state
from ..record import Outcome
from ..templates.matrix import Case
from .base import Inputs, Sample, SampleError


@dataclass(frozen=True)
class SampleCase:
    """What one sample item runs: a sample, a (column, device) case, and the item kind."""

    sample: Sample
    case: Case
    kind: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.sample.id, self.case.id)


def call_without_grad(model: Any, inputs: Inputs) -> Any:
    """One call of a sample's model: samples run under ``torch.no_grad()``."""
    import torch

    with torch.no_grad():
        return model(*inputs.args, **inputs.kwargs)


@dataclass
class PreparedTriple:
    """A triple's model under test and inputs, built on first use and shared by the triple's items."""

    sample: Sample
    case: Case
    tolerance: Tolerance | None = None
    require_effect: bool = False  # --inductor-require-effect
    error: str | None = None  # why the sample could not be built
    error_traceback: str = ""  # where building it raised, for an error other than a SampleError
    model: Any = None  # the compiled model, or the eager one for the eager row
    inputs: list[Inputs] = field(default_factory=list)
    verdict: Verdict | None = None  # the check's verdict, once it ran
    watcher: CompileWatcher | None = None

    def judged(self) -> Verdict:
        """The triple's verdict: checked on first request (by the check item, or by the bench item when the
        check item was deselected), the same for every item afterwards."""
        if self.verdict is None:
            self.verdict = self._check()
        return self.verdict

    def _check(self) -> Verdict:
        if self.error is not None:
            reason = f"sample {self.sample.id} is broken: {self.error}"
            return Verdict(
                CheckResult(Outcome.EAGER_FAIL, reason, "\n".join(filter(None, [reason, self.error_traceback])))
            )
        import torch

        device = torch.device(self.case.device.name)
        subject = CheckSubject(
            make_eager=lambda: self.sample.make_model(device),
            model=self.model,
            inputs=self.inputs,
            tolerance=self.sample.tolerance or self.tolerance,
            backend=self.case.selection.backend,
            call=call_without_grad,
        )
        return check_and_judge(subject, self.case.selection, self.case.device, self.watcher, self.require_effect)


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
            prepared.error_traceback = traceback.format_exc()
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
