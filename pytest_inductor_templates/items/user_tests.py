"""The work behind the user-facing fixtures: compiled_model, inductor_check and inductor_benchmark."""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..check.inputs import Inputs
from ..check.result import CheckResult
from ..compile.compiled import CompiledModel, EagerModel
from ..compile.isolation import CompileWatcher, isolated_compile_state
from ..compile.precision import tf32_scope
from ..diagnose import Diagnosis, PickledModel
from ..engine.cell import Subject, Verdict, run_cell
from ..engine.diagnosis import diagnose_cell
from ..integrations.benchmark import feed, mark_timing, mark_untimed, name_benchmark, timing_plan
from ..machine import device_scope
from ..report.records import conclude, new_record, record_of, start, user_test_id
from ..templates.matrix import Case
from ..templates.selection import Selection
from ..tolerance import Tolerance, tolerance_from_marker
from .session import InductorSession, plugin_state, torch_device

TOLERANCE_MARKER = "inductor_tolerance"
CHECKING_FIXTURES = {"inductor_benchmark": "bench", "inductor_check": "check"}  # the record's kind


class RecompileLimitWarning(UserWarning):
    """Dynamo hit its recompile limit and fell back to running the code eagerly."""


class CompiledModelFactory:
    """``compiled_model(module_or_function)`` returns it compiled with the test's selection."""

    def __init__(self, selection: Selection, watcher: CompileWatcher) -> None:
        self.selection = selection
        self._watcher = watcher

    def __call__(self, target: Any) -> CompiledModel | EagerModel:
        require_callable(target, "compiled_model")
        if not self.selection.compiles:
            return EagerModel(target)
        return CompiledModel(target, self.selection, self._watcher)


def require_callable(target: Any, fixture: str) -> None:
    """Fail the test in one line when ``target`` is not a module or function (rather than deep inside Dynamo)."""
    if not callable(target):
        shown = repr(target) if len(repr(target)) <= 60 else repr(target)[:57] + "..."
        pytest.fail(
            f"{fixture} takes a torch.nn.Module or a function, got {type(target).__name__} {shown}", pytrace=False
        )


def case_of(state: InductorSession, node: pytest.Item) -> Case:
    """The matrix cell of a user test: its selection, and its device (the first selected one when it takes
    no inductor_device)."""
    callspec = getattr(node, "callspec", None)
    params = dict(callspec.params) if callspec is not None else {}
    selection = params.get("inductor_selection", state.columns[0])
    chosen = params.get("inductor_device")
    device = state.devices[0] if chosen is None else next(d for d in state.devices if torch_device(d) == chosen)
    return Case(selection, device)


def prepare_checking_tests(state: InductorSession, items: list[pytest.Item]) -> None:
    """Give every user test that checks a model (inductor_check, inductor_benchmark) its record, and a
    benchmarking one on CUDA the synchronizing timer."""
    for item in items:
        kind = next((k for f, k in CHECKING_FIXTURES.items() if f in getattr(item, "fixturenames", ())), None)
        if kind is None or record_of(item) is not None:
            continue
        case = case_of(state, item)
        start(item, new_record(case, user_test_id(item, case.selection), kind, "test"))
        if kind == "bench":
            mark_timing(item, case.device.type, plugin_state(item.config).timing.cpu_time)


def marker_tolerance(node: Any) -> Tolerance | None:
    """The test's ``@pytest.mark.inductor_tolerance(rtol=, atol=)``; a bad one fails with one line (at collection,
    where ``pytest_generate_tests`` asks first)."""
    marker = node.get_closest_marker(TOLERANCE_MARKER)
    if marker is None:
        return None
    try:
        return tolerance_from_marker(marker.args, marker.kwargs)
    except ValueError as error:
        problem = str(error)
    pytest.fail(f"@pytest.mark.{TOLERANCE_MARKER} {problem}", pytrace=False)  # outside except: no chained traceback


@contextlib.contextmanager
def compile_scope(state: InductorSession, node: pytest.Item) -> Iterator[CompileWatcher]:
    """Skip where the cell cannot run; make its device the current one, in the session's TF32 mode; isolate compile
    state (with a fresh compile cache under --inductor-fresh-cache); warn on recompile-limit hits."""
    case = case_of(state, node)
    if reason := case.problem(state.visible):
        pytest.skip(reason)
    policy = state.policy
    with device_scope(case.device), tf32_scope(policy.tf32), isolated_compile_state(policy.fresh_cache) as watcher:
        yield watcher
    for hit in watcher.recompile_limit_hits:
        warnings.warn(RecompileLimitWarning(hit), stacklevel=1)


def compiled_models(state: InductorSession, request: pytest.FixtureRequest) -> Iterator[CompiledModelFactory]:
    case = case_of(state, request.node)
    with compile_scope(state, request.node) as watcher:
        yield CompiledModelFactory(case.selection, watcher)


def subject_of(
    state: InductorSession, node: pytest.Item, watcher: CompileWatcher, fixture: str, model: Any, inputs: Inputs
) -> tuple[Subject, Callable[[Verdict], Callable[[], Diagnosis | None]]]:
    """A copy of the test's ``model`` compiled with its selection, checked against fresh eager copies; and, for its
    verdict, the diagnosis of a failed check (of a pickled pristine copy, in a process of its own)."""
    require_callable(model, fixture)
    case = case_of(state, node)
    pristine = copy.deepcopy(model)

    def make_eager() -> Any:
        return copy.deepcopy(pristine)

    compiled = CompiledModelFactory(case.selection, watcher)(make_eager())
    tolerance = marker_tolerance(node) or state.tolerance
    subject = Subject(make_eager, compiled, [inputs], case.selection, case.device, watcher, tolerance)

    def diagnosis_of(verdict: Verdict) -> Callable[[], Diagnosis | None]:
        def diagnosis() -> Diagnosis | None:
            plan = plugin_state(node.config).diagnosis_plan(node, verdict)
            if plan is None:
                return None
            try:
                build = PickledModel.of(pristine, [inputs])
            except Exception as error:  # a lambda, a local class: no copy can reach another process
                why = f"the model cannot be pickled for the diagnosis's process: {type(error).__name__}: {error}"
                return Diagnosis(f"diagnosis failed: {why}", failed=why)
            return diagnose_cell(build, case.selection, case.device, tolerance, verdict, plan, False, state.policy)

        return diagnosis

    return subject, diagnosis_of


def checks(state: InductorSession, request: pytest.FixtureRequest) -> Iterator[Callable[..., CheckResult]]:
    node = request.node
    with compile_scope(state, node) as watcher:

        def inductor_check(model: Any, *args: Any, **kwargs: Any) -> CheckResult:
            """Compile ``model`` with the test's template, run it and eager, compare, explain any mismatch."""
            subject, diagnosis = subject_of(state, node, watcher, "inductor_check", model, Inputs(args, kwargs))
            cell = run_cell(subject, state.policy)
            conclude(node, cell, diagnosis(cell.verdict))
            return cell.verdict.result

        yield inductor_check


def benchmarks(
    state: InductorSession, request: pytest.FixtureRequest, benchmark: Any
) -> Iterator[Callable[..., CheckResult]]:
    node = request.node
    with compile_scope(state, node) as watcher:
        calls = 0

        def inductor_benchmark(model: Any, *args: Any, **kwargs: Any) -> CheckResult:
            """Check ``model`` compiled against eager, then time both; the compiled one through pytest-benchmark."""
            nonlocal calls
            calls += 1
            if calls > 1:
                pytest.fail("inductor_benchmark times one model per test, as pytest-benchmark does", pytrace=False)
            subject, diagnosis = subject_of(state, node, watcher, "inductor_benchmark", model, Inputs(args, kwargs))
            record = record_of(node)
            assert record is not None
            name_benchmark(benchmark, f"{record.sample}[{record.device}]", getattr(node, "callspec", None))
            plan = timing_plan(benchmark, plugin_state(node.config).timing)
            cell = run_cell(subject, state.policy, plan)
            if cell.timing is None:
                mark_untimed(node)
            else:
                feed(benchmark, cell.timing, "in this process")
            conclude(node, cell, diagnosis(cell.verdict))
            return cell.verdict.result

        yield inductor_benchmark
