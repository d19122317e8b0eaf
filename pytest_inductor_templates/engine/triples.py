"""Running one (sample, template, device) triple: build once, share between its items, release after."""

from __future__ import annotations

import contextlib
import gc
import os
import traceback
import weakref
from dataclasses import dataclass, field
from typing import Any

from .. import phases
from ..check.inputs import Inputs
from ..check.result import CheckResult
from ..compile import cache
from ..compile.compiled import CompiledModel, EagerModel
from ..compile.isolation import CompileWatcher, isolated_compile_state
from ..compile.phase_times import reset_dynamo
from ..diagnose import Diagnosis
from ..machine import device_scope
from ..memory import MiB, cuda_allocated, format_size, rss_bytes, storage_bytes
from ..outcomes import Outcome
from ..samples.base import Sample, SampleError
from ..templates.matrix import Case
from ..timing import host_lock
from ..timing.measure import TimingPlan
from ..timing.processes import Repeat
from ..tolerance import Tolerance
from .cell import CellResult, CheckPolicy, Footprint, Subject, Verdict, run_cell
from .diagnosis import DiagnosisPlan, diagnose_cell
from .pristine import Pristine, pristine_or_none


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


class TripleEnded(Exception):
    """An item's work on a triple ended without a result (its worker process crashed, or it timed out):
    ``result`` says which and why."""

    def __init__(self, result: CheckResult) -> None:
        super().__init__(result.reason)
        self.result = result


def exited(error: SystemExit) -> CheckResult:
    """The verdict on a sample that called ``sys.exit``: its process would have ended, so it crashed."""
    reason = f"the sample called sys.exit({error.code!r}) {phases.describe(phases.current(), 'while running')}"
    return CheckResult(Outcome.CRASHED, reason, reason)


@dataclass
class PreparedTriple:
    """A triple's model under test and inputs, built on first use and shared by the triple's items."""

    sample: Sample
    case: Case
    tolerance: Tolerance | None = None
    policy: CheckPolicy = field(default_factory=CheckPolicy)
    problem: Verdict | None = None  # why it was not built or could not be: the verdict of all its items
    model: Any = None  # the compiled model, or the eager one for the eager row
    inputs: list[Inputs] = field(default_factory=list)
    watcher: CompileWatcher | None = None
    verdict: Verdict | None = None  # the check's verdict, once it ran
    diagnosis: Diagnosis | None = None  # where and why its check failed, once asked
    footprint: Footprint | None = None
    tensors: list[weakref.ref[Any]] = field(default_factory=list)  # the built model's and inputs' tensors
    pristine: Pristine | None = None  # the built model as built, in host memory: fresh eager models copy it

    runs_in = "in this process"
    repeat_processes = 0  # the other processes its paired timing can be repeated in: none

    def result(self, plan: TimingPlan | None = None, limit: object = None, repeat: bool = False) -> CellResult:
        """The cell's result: checked on first request (by the check item, or by the bench item when the check
        item was deselected), the same verdict for every item afterwards; timed when ``plan`` is given; a ``repeat``
        of another process's timing is compiled and timed, not checked. (``limit`` is for the worker process: in
        this one a hung item is stopped only by pytest-timeout.)"""
        if self.problem is not None:
            unbuilt = self.problem.result.outcome is Outcome.EAGER_FAIL
            return CellResult(self.problem, footprint=self.footprint, unbuilt=unbuilt)
        try:
            cell = run_cell(self._subject(), self.policy, plan, self.verdict, repeat=repeat)
        except SystemExit as error:
            cell = CellResult(Verdict(exited(error)), self.stats)
        if not repeat:  # a repeat's stand-in verdict is no check's
            self.verdict = self.verdict or cell.verdict
        cell.footprint = self.footprint
        return cell

    def repeat(self, plan: TimingPlan, count: int, limit: object = None, after: int = 0) -> tuple[Repeat, ...]:
        """No repeats: in this process (``--inductor-isolation=none``) there is no other to repeat the timing in."""
        return ()

    def diagnose(self, plan: DiagnosisPlan, limit: object = None) -> Diagnosis:
        """Where and why the triple's check failed (asked once; the same for its later items)."""
        if self.diagnosis is None:
            assert self.verdict is not None
            tolerance = self.sample.tolerance or self.tolerance
            # in a child process, which holds the host's work lock per check (not for the whole diagnosis)
            as_built = self.pristine.model if self.pristine is not None else None  # the item's draw, not drawn again
            self.diagnosis = diagnose_cell(self.sample, self.case.selection, self.case.device, tolerance,
                                           self.verdict, plan, no_grad=True, policy=self.policy, as_built=as_built,
                                           built_inputs=self.inputs)  # fmt: skip
        return self.diagnosis

    def fresh_eager(self) -> Any:
        """A fresh eager model of the sample on the triple's device: the check's reference, paired timing's baseline.
        A copy of the model as it was built, where it could be kept; else the sample built again."""
        import torch

        if self.pristine is not None:
            try:
                return self.pristine.fresh()
            except Exception:  # a copy that failed where its trial did not: built again from now on
                self.pristine = None
        return self.sample.make_model(torch.device(self.case.device.name))

    def reload(self) -> CompiledModel:
        """The model under test compiled anew in this process, as a fresh process would compile it: Dynamo reset (its
        next call compiles from the compile cache), Inductor's in-memory caches cleared (the compiled module and its
        kernels loaded again), around a fresh copy of the model. The triple's own ``model`` is not to be called
        afterwards (the reset dropped its compiled code: a call would recompile, which its steady state refuses)."""
        reset_dynamo()
        cache.clear_in_memory()
        assert self.watcher is not None
        return CompiledModel(self.fresh_eager(), self.case.selection, self.watcher)

    def _subject(self) -> Subject:
        return Subject(
            make_eager=self.fresh_eager,
            model=self.model,
            inputs=self.inputs,
            selection=self.case.selection,
            device=self.case.device,
            watcher=self.watcher,
            tolerance=self.sample.tolerance or self.tolerance,
            check_call=self._call,
            timed_call=call_without_grad,
            reload=self.reload if self.case.selection.compiles else None,
        )

    def _call(self, model: Any, inputs: Inputs) -> Any:
        """A call of the check (or of a load), its phase announced: a compiled model compiles on its first call."""
        if not isinstance(model, CompiledModel):  # eager's reference, or the eager row's model
            phases.enter(phases.EAGER_CALL)
        elif not model.called:
            phases.enter(phases.COMPILING)  # until the backend has compiled: then it is a compiled call
        else:
            phases.enter(phases.COMPILED_CALL)
        return call_without_grad(model, inputs)

    @property
    def stats(self) -> Any:
        """The compiled model's compile stats (None for the eager row or a model that was not built)."""
        return self.model.stats if self.case.selection.compiles and self.model is not None else None


def broken(sample: Sample, error: str, where: str = "") -> Verdict:
    """The verdict on a sample that could not be built: its eager side fails."""
    reason = f"sample {sample.id} is broken: {error}"
    return Verdict(CheckResult(Outcome.EAGER_FAIL, reason, "\n".join(filter(None, [reason, where]))))


def _tensors(model: Any, inputs: list[Inputs]) -> list[Any]:
    """The tensors a triple builds: its model's parameters and buffers, and its inputs (a GraphNet sample's weights
    are inputs), each once."""
    import torch
    from torch.utils._pytree import tree_leaves

    found = [*model.parameters(), *model.buffers()] if isinstance(model, torch.nn.Module) else []
    found += [t for i in inputs for t in tree_leaves((i.args, i.kwargs)) if isinstance(t, torch.Tensor)]
    return list({id(t): t for t in found}.values())


def _mib(size: int | None) -> float | None:
    return round(size / MiB, 1) if size is not None else None


def _alive(refs: list[weakref.ref[Any]]) -> list[Any]:
    return [t for t in (ref() for ref in refs) if t is not None]


class TripleCache:
    """Holds the current triple; builds the next one only when the key changes, releasing the last."""

    def __init__(
        self, tolerance: Tolerance | None = None, policy: CheckPolicy | None = None, memory_budget: int | None = None
    ) -> None:
        self.tolerance = tolerance
        self.policy = policy or CheckPolicy()
        self.memory_budget = memory_budget  # bytes a sample's tensors may take (--inductor-memory-budget)
        self.current: PreparedTriple | None = None
        self._key: tuple[str, str] | None = None
        self._scope = contextlib.ExitStack()

    def diagnose(
        self, item_case: SampleCase, plan: DiagnosisPlan, verdict: Verdict | None, limit: object = None
    ) -> Diagnosis:
        """The diagnosis of the item's triple: the current one's, or, for a triple released since (a diagnosis
        after the run's items), an unbuilt one's whose check gave ``verdict`` (a diagnosis draws its own)."""
        if item_case.key == self._key and self.current is not None:
            self.current.verdict = self.current.verdict or verdict
            return self.current.diagnose(plan)
        triple = PreparedTriple(item_case.sample, item_case.case, self.tolerance, self.policy, verdict=verdict)
        return triple.diagnose(plan)

    def get(self, item_case: SampleCase) -> PreparedTriple:
        """The item's triple, built when it is not the current one (work: no other process of the session times
        meanwhile, ``timing.host_lock``)."""
        if item_case.key != self._key:
            with host_lock.work():
                self.release()
                self._key = item_case.key
                self.current = self._build(item_case)
        assert self.current is not None
        return self.current

    def _build(self, item_case: SampleCase) -> PreparedTriple:
        import torch

        sample, case = item_case.sample, item_case.case
        prepared = PreparedTriple(sample, case, self.tolerance, self.policy)
        rss, cuda = rss_bytes(), cuda_allocated(case.device)
        prepared.footprint = Footprint(os.getpid(), _mib(rss), _mib(cuda))
        phases.enter(phases.BUILDING)
        watcher = self._scope.enter_context(isolated_compile_state(self.policy.fresh_cache))
        prepared.watcher = watcher
        device = torch.device(case.device.name)
        try:
            refused = self._refusal(sample)
            if refused is not None:
                prepared.problem = Verdict(CheckResult(Outcome.SKIPPED, refused, refused))
                return prepared
            with device_scope(case.device):
                model, prepared.inputs = sample.make_model_and_inputs(device)
        except SampleError as error:
            prepared.problem = broken(sample, str(error))
            return prepared
        except Exception as error:  # a sample that cannot even be built fails its own items only
            raised = f"building it raised {type(error).__name__}: {error}"
            prepared.problem = broken(sample, raised, traceback.format_exc())
            return prepared
        except SystemExit as error:
            prepared.problem = Verdict(exited(error))
            return prepared
        prepared.tensors = [weakref.ref(t) for t in _tensors(model, prepared.inputs)]
        prepared.pristine = pristine_or_none(model)
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
        with host_lock.work(), device_scope(device) if device is not None else contextlib.nullcontext():
            self._scope.close()
            cuda = device is not None and device.type == "cuda"
            if cuda or any(ref() is not None for ref in tensors):  # a cycle holds them, or something else does
                gc.collect()
            if cuda:
                import torch

                torch.cuda.empty_cache()
        return storage_bytes(_alive(tensors))
