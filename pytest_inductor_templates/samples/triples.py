"""Running one (sample, template, device) triple: build once, share between its items, release after."""

from __future__ import annotations

import contextlib
import gc
import os
import traceback
import weakref
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import phases
from ..check.result import CheckResult
from ..check.runner import CheckSubject
from ..check.verdict import Verdict, check_and_judge
from ..compile.compiled import CompiledModel, EagerModel
from ..compile.isolation import CompileWatcher, isolated_compile_state
from ..machine import device_scope
from ..memory import MiB, cuda_allocated, format_size, rss_bytes
from ..outcomes import Outcome
from ..record import ItemRecord
from ..templates.matrix import Case
from ..timing.bench import time_into
from ..timing.paired import DEFAULT_PRECISION
from ..tolerance import Tolerance
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


class Triple(Protocol):
    """What a sample item uses of its triple: a ``PreparedTriple`` (built in this process, or in the sample
    worker, where the items' requests run it), or the pytest process's stand-in for the worker's, a
    ``worker.remote.RemoteTriple``."""

    verdict: Verdict | None
    pid: int | None
    rss_mib: float | None
    cuda_mib: float | None

    @property
    def sample(self) -> Sample: ...

    @property
    def case(self) -> Case: ...

    @property
    def stats(self) -> Any: ...

    def judged(self) -> Verdict: ...

    def time(self, record: ItemRecord, benchmark: Any, item: Any) -> None: ...


class TripleEnded(Exception):
    """An item's work on a triple ended without a result (its worker process crashed, or it timed out):
    ``result`` says which and why."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.reason)
        self.result = result


def exited(error: SystemExit) -> CheckResult:
    """The verdict on a sample that called ``sys.exit``: its process would have ended, so it crashed."""
    reason = f"the sample called sys.exit({error.code!r}) while {phases.current() or 'running'}"
    return CheckResult(Outcome.CRASHED, reason, reason)


@dataclass
class PreparedTriple:
    """A triple's model under test and inputs, built on first use and shared by the triple's items."""

    sample: Sample
    case: Case
    tolerance: Tolerance | None = None
    require_effect: bool = False  # --inductor-require-effect
    precision: float = DEFAULT_PRECISION  # paired timing's target (--inductor-speedup-precision)
    error: str | None = None  # why the sample could not be built
    error_traceback: str = ""  # where building it raised, for an error other than a SampleError
    refused: str | None = None  # why the sample was not built at all (--inductor-memory-budget)
    exit: CheckResult | None = None  # the sample called sys.exit while being built
    model: Any = None  # the compiled model, or the eager one for the eager row
    inputs: list[Inputs] = field(default_factory=list)
    verdict: Verdict | None = None  # the check's verdict, once it ran
    watcher: CompileWatcher | None = None
    pid: int | None = None  # the process that built it
    rss_mib: float | None = None  # this process's resident memory before the triple was built
    cuda_mib: float | None = None  # CUDA memory allocated on the device before the triple was built
    tensors: list[weakref.ref[Any]] = field(default_factory=list)  # the built model's and inputs' tensors

    def judged(self) -> Verdict:
        """The triple's verdict: checked on first request (by the check item, or by the bench item when the
        check item was deselected), the same for every item afterwards."""
        if self.verdict is None:
            try:
                with device_scope(self.case.device):
                    self.verdict = self._check()
            except SystemExit as error:
                self.verdict = Verdict(exited(error))
        return self.verdict

    def fresh_eager(self) -> Any:
        """A fresh eager model of the sample on the triple's device: the check's reference, paired timing's baseline."""
        import torch

        return self.sample.make_model(torch.device(self.case.device.name))

    def _check(self) -> Verdict:
        if self.refused is not None:
            return Verdict(CheckResult(Outcome.SKIPPED, self.refused, self.refused))
        if self.exit is not None:
            return Verdict(self.exit)
        if self.error is not None:
            reason = f"sample {self.sample.id} is broken: {self.error}"
            return Verdict(
                CheckResult(Outcome.EAGER_FAIL, reason, "\n".join(filter(None, [reason, self.error_traceback])))
            )
        subject = CheckSubject(
            make_eager=self.fresh_eager,
            model=self.model,
            inputs=self.inputs,
            tolerance=self.sample.tolerance or self.tolerance,
            backend=self.case.selection.backend,
            call=self._call,
        )
        return check_and_judge(subject, self.case.selection, self.case.device, self.watcher, self.require_effect)

    def _call(self, model: Any, inputs: Inputs) -> Any:
        """A call of the check, its phase announced: the model under test compiles on its first call."""
        if model is not self.model or not self.case.selection.compiles:
            phases.enter(phases.EAGER_CALL)
        elif not getattr(model, "called", True):
            phases.enter(phases.COMPILING)  # until the backend has compiled: then it is a compiled call
        else:
            phases.enter(phases.COMPILED_CALL)
        return call_without_grad(model, inputs)

    @property
    def stats(self) -> Any:
        """The compiled model's compile stats (None for the eager row or a model that was not built)."""
        return self.model.stats if self.case.selection.compiles and self.model is not None else None

    def time(self, record: ItemRecord, benchmark: Any, item: Any) -> None:
        """Time one call of the model under test (compiled by the check) through ``benchmark`` into ``record``;
        a compiled model that passed its check is then timed in pairs with a fresh eager one: its speedup."""
        phases.enter(phases.TIMING)
        with device_scope(self.case.device):
            steady, inputs = self.model.steady(), self.inputs[0]  # no per-call scaffolding
            eager_run = None
            if self.case.selection.compiles and record.outcome is Outcome.PASS:
                eager = self.fresh_eager()
                eager_run = lambda: call_without_grad(eager, inputs)  # noqa: E731
            run = lambda: call_without_grad(steady, inputs)  # noqa: E731
            time_into(record, benchmark, item, run, self.case.device.type, eager_run, self.precision)


def _tensors(model: Any, inputs: list[Inputs]) -> list[Any]:
    """The tensors a triple builds: its model's parameters and buffers, and its inputs (a GraphNet sample's weights
    are inputs), each once."""
    import torch
    from torch.utils._pytree import tree_leaves

    found = [*model.parameters(), *model.buffers()] if isinstance(model, torch.nn.Module) else []
    found += [t for i in inputs for t in tree_leaves((i.args, i.kwargs)) if isinstance(t, torch.Tensor)]
    return list({id(t): t for t in found}.values())


def _alive(refs: list[weakref.ref[Any]]) -> list[Any]:
    return [t for t in (ref() for ref in refs) if t is not None]


def _storage_bytes(tensors: list[Any]) -> int:
    """The bytes these tensors hold, each storage once (views and expanded tensors share one)."""
    import torch

    sizes = {}
    for t in tensors:
        if t.layout == torch.strided:
            sizes[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        else:  # sparse and other layouts have no single storage
            sizes[id(t)] = t.numel() * t.element_size()
    return sum(sizes.values())


class TripleCache:
    """Holds the current triple; builds the next one only when the key changes, releasing the last."""

    def __init__(
        self,
        tolerance: Tolerance | None = None,
        require_effect: bool = False,
        memory_budget: int | None = None,
        precision: float = DEFAULT_PRECISION,
    ) -> None:
        self.tolerance = tolerance
        self.require_effect = require_effect
        self.precision = precision  # paired timing's target (--inductor-speedup-precision)
        self.memory_budget = memory_budget  # bytes a sample's tensors may take (--inductor-memory-budget)
        self.current: PreparedTriple | None = None
        self._key: tuple[str, str] | None = None
        self._scope = contextlib.ExitStack()

    def get(self, item_case: SampleCase, limit: object = None) -> PreparedTriple:
        """The item's triple, built when it is not the current one. (``limit`` is for the worker process: in
        this one a hung item is stopped only by pytest-timeout.)"""
        if item_case.key != self._key:
            self.release()
            self._key = item_case.key
            self.current = self._build(item_case)
        assert self.current is not None
        return self.current

    def _build(self, item_case: SampleCase) -> PreparedTriple:
        import torch

        sample, case = item_case.sample, item_case.case
        prepared = PreparedTriple(sample, case, self.tolerance, self.require_effect, self.precision)
        rss, cuda = rss_bytes(), cuda_allocated(case.device)
        prepared.pid = os.getpid()
        prepared.rss_mib = round(rss / MiB, 1) if rss is not None else None
        prepared.cuda_mib = round(cuda / MiB, 1) if cuda is not None else None
        phases.enter(phases.BUILDING)
        watcher = self._scope.enter_context(isolated_compile_state())
        prepared.watcher = watcher
        device = torch.device(case.device.name)
        try:
            prepared.refused = self._refusal(sample)
            if prepared.refused is not None:
                return prepared
            with device_scope(case.device):
                prepared.inputs = sample.make_inputs(device)
                model = sample.make_model(device)
        except SampleError as error:
            prepared.error = str(error)
            return prepared
        except Exception as error:  # a sample that cannot even be built fails its own items only
            prepared.error = f"building it raised {type(error).__name__}: {error}"
            prepared.error_traceback = traceback.format_exc()
            return prepared
        except SystemExit as error:
            prepared.exit = exited(error)
            return prepared
        prepared.tensors = [weakref.ref(t) for t in _tensors(model, prepared.inputs)]
        prepared.model = CompiledModel(model, case.selection, watcher) if case.selection.compiles else EagerModel(model)
        return prepared

    def _refusal(self, sample: Sample) -> str | None:
        """Why ``sample`` is not built under the memory budget, or None."""
        if self.memory_budget is None:
            return None
        size = sample.tensor_bytes()
        if size is None or size <= self.memory_budget:
            return None
        return (
            f"its tensors take {format_size(size)}, more than --inductor-memory-budget "
            f"({format_size(self.memory_budget)}): not built"
        )

    @property
    def description(self) -> str:
        """Where the triples run, for the header."""
        return "samples run in this process (--inductor-isolation=none): a crash ends the run"

    def close(self) -> None:
        """Release the last triple (the end of the session)."""
        self.release()

    def release(self) -> int:
        """Drop the current triple's models, inputs and compiled state; free CUDA memory it held. Returns the bytes
        of the tensors it built that are still alive afterwards: held past the release by something the triple does
        not own (Inductor's freezing keeps a frozen model's parameters); 0 when all was freed."""
        if self._key is None:
            return 0
        device = self.current.case.device if self.current else None
        tensors = self.current.tensors if self.current else []
        if self.current is not None and self.current.stats is not None:
            # what the backend raised: its traceback's frames hold the model and its inputs, and Dynamo keeps the
            # recording backend (and so this error) alive past the release
            self.current.stats.compile_failure = None
        self.current, self._key = None, None
        phases.enter(phases.RELEASING)
        with device_scope(device) if device is not None else contextlib.nullcontext():
            self._scope.close()
            cuda = device is not None and device.type == "cuda"
            if cuda or any(ref() is not None for ref in tensors):  # a cycle holds them, or something else does
                gc.collect()
            if cuda:
                import torch

                torch.cuda.empty_cache()
        return _storage_bytes(_alive(tensors))
