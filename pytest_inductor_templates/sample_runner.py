"""Running one (sample, template, device) triple: build once, share between its items, release after."""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass, field
from typing import Any

from .checking import compare_outputs
from .compiled import CompiledModel
from .isolation import isolated_compile_state
from .matrix import Case
from .samples.base import Inputs, Sample, SampleError


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
    """A triple's models and inputs, built on first use and shared by the triple's items."""

    sample: Sample
    case: Case
    error: str | None = None
    model: Any = None  # the compiled model (or the eager one for the eager column)
    inputs: list[Inputs] = field(default_factory=list)
    _reference_model: Any = None

    def require(self) -> None:
        """Fail the calling item alone when the sample could not be built."""
        import pytest

        if self.error:
            pytest.fail(f"sample {self.sample.id} is broken: {self.error}", pytrace=False)

    def call(self, model: Any, inputs: Inputs) -> Any:
        import torch

        with torch.no_grad():
            return model(*inputs.args, **inputs.kwargs)

    def check(self) -> None:
        """Compare the model with a fresh eager instance on every input set, in order."""
        self.require()
        for inputs in self.inputs:
            expected = self.call(self._reference_model, inputs)
            actual = self.call(self.model, inputs)
            compare_outputs(actual, expected, self.sample.tolerance)


class TripleCache:
    """Holds the current triple; builds the next one only when the key changes, releasing the last."""

    def __init__(self) -> None:
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
        prepared = PreparedTriple(sample, case)
        watcher = self._scope.enter_context(isolated_compile_state())
        device = torch.device(case.device.name)
        try:
            prepared.inputs = sample.make_inputs(device)
            model = sample.make_model(device)
            prepared._reference_model = sample.make_model(device)
        except SampleError as error:
            prepared.error = str(error)
            return prepared
        except Exception as error:  # a sample that cannot even be built fails its own items only
            prepared.error = f"building it raised {type(error).__name__}: {error}"
            return prepared
        prepared.model = CompiledModel(model, case.selection, watcher) if case.selection.compiles else model
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
