"""The work behind the user-facing fixtures: compiled_model, inductor_check and inductor_benchmark."""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .check.inputs import Inputs
from .check.result import CheckResult
from .check.runner import CheckSubject
from .check.verdict import check_and_judge
from .compile.compiled import CompiledModel, EagerModel, no_grad_call
from .compile.isolation import CompileWatcher, isolated_compile_state
from .machine import device_scope
from .outcomes import UNTIMEABLE
from .record import user_test_name
from .report.item_records import conclude, record_of, start
from .session import InductorSession, torch_device
from .templates.matrix import Case
from .templates.selection import Selection
from .timing.bench import mark_timing, mark_untimed, time_into
from .timing.policy import TIMING_KEY
from .tolerance import Tolerance, tolerance_from_marker

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


def _matrix_params(node: pytest.Item) -> dict[str, Any]:
    callspec = getattr(node, "callspec", None)
    return dict(callspec.params) if callspec is not None else {}


def case_of(state: InductorSession, node: pytest.Item) -> Case:
    """The matrix cell of a user test: its selection, and its device (the first selected one when it takes
    no inductor_device)."""
    params = _matrix_params(node)
    selection = params.get("inductor_selection", state.columns[0])
    chosen = params.get("inductor_device")
    device = state.devices[0] if chosen is None else next(d for d in state.devices if torch_device(d) == chosen)
    return Case(selection, device)


def test_name(node: pytest.Item, selection: Selection) -> str:
    """The test's node id without the matrix's part of its parameters: the same for every template."""
    callspec = getattr(node, "callspec", None)
    if callspec is None:
        return node.nodeid
    device = callspec.params.get("inductor_device")
    matrix_id = f"{selection.label}-{device}" if device is not None else selection.label
    return user_test_name(node.nodeid.partition("[")[0], callspec.id, matrix_id)


def prepare_checking_tests(state: InductorSession, items: list[pytest.Item]) -> None:
    """Give every user test that checks a model (inductor_check, inductor_benchmark) its record, and a
    benchmarking one on CUDA the synchronizing timer."""
    for item in items:
        kind = next((k for f, k in CHECKING_FIXTURES.items() if f in getattr(item, "fixturenames", ())), None)
        if kind is None or record_of(item) is not None:
            continue
        case = case_of(state, item)
        start(item, case.record(test_name(item, case.selection), kind, "test"))
        if kind == "bench":
            mark_timing(item, case.device.type, paired=case.selection.compiles)


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


def tolerance_of(state: InductorSession, node: pytest.Item) -> Tolerance | None:
    """The test's ``@pytest.mark.inductor_tolerance(rtol=, atol=)``, else the session's."""
    return marker_tolerance(node) or state.tolerance


@contextlib.contextmanager
def compile_scope(state: InductorSession, node: pytest.Item) -> Iterator[CompileWatcher]:
    """Skip where the cell cannot run; make its device the current one; isolate compile state; warn on
    recompile-limit hits."""
    case = case_of(state, node)
    if reason := case.problem(state.visible):
        pytest.skip(reason)
    with device_scope(case.device), isolated_compile_state() as watcher:
        yield watcher
    for hit in watcher.recompile_limit_hits:
        warnings.warn(RecompileLimitWarning(hit), stacklevel=1)


def compiled_models(state: InductorSession, request: pytest.FixtureRequest) -> Iterator[CompiledModelFactory]:
    case = case_of(state, request.node)
    with compile_scope(state, request.node) as watcher:
        yield CompiledModelFactory(case.selection, watcher)


def _checked(
    state: InductorSession, node: pytest.Item, watcher: CompileWatcher, fixture: str, model: Any, inputs: Inputs
) -> Any:
    """Check a copy of ``model`` against fresh eager copies and judge its template's effect.

    Returns the verdict, the compiled model and a maker of fresh eager copies.
    """
    require_callable(model, fixture)
    case = case_of(state, node)
    pristine = copy.deepcopy(model)

    def make_eager() -> Any:
        return copy.deepcopy(pristine)

    compiled = CompiledModelFactory(case.selection, watcher)(make_eager())
    subject = CheckSubject(make_eager, compiled, [inputs], tolerance_of(state, node), case.selection.backend)
    verdict = check_and_judge(subject, case.selection, case.device, watcher, state.require_effect)
    return verdict, compiled, make_eager


def checks(state: InductorSession, request: pytest.FixtureRequest) -> Iterator[Callable[..., CheckResult]]:
    node = request.node
    with compile_scope(state, node) as watcher:

        def inductor_check(model: Any, *args: Any, **kwargs: Any) -> CheckResult:
            """Compile ``model`` with the test's template, run it and eager, compare, explain any mismatch."""
            verdict, compiled, _ = _checked(state, node, watcher, "inductor_check", model, Inputs(args, kwargs))
            conclude(node, verdict, compiled.stats)
            return verdict.result

        yield inductor_check


def readable_params(callspec: Any) -> dict[str, Any] | None:
    """The test's parameters as pytest-benchmark's JSON shows them: the matrix's by name, not as
    ``UNSERIALIZABLE[Selection(...)]``."""
    if callspec is None:
        return None
    readable = {"inductor_selection": lambda selection: selection.label, "inductor_device": str}
    return {k: readable[k](v) if k in readable else v for k, v in callspec.params.items()}


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
            verdict, compiled, make_eager = _checked(
                state, node, watcher, "inductor_benchmark", model, Inputs(args, kwargs)
            )
            record = record_of(node)
            assert record is not None
            if verdict.result.outcome in UNTIMEABLE:
                mark_untimed(node)
                conclude(node, verdict, compiled.stats)
            verdict.fill(record, compiled.stats)
            case = case_of(state, node)
            if benchmark.group is None:
                benchmark.group = f"{record.sample}[{record.device}]"
            benchmark.params = readable_params(getattr(node, "callspec", None))
            steady = compiled.steady()  # compiled by the check; timed without per-call scaffolding
            run, eager_run = lambda: steady(*args, **kwargs), None
            if case.selection.compiles:  # paired with a fresh eager model, called as the compiled one is
                eager = make_eager()
                eager_call = no_grad_call(eager) if case.selection.inference_only else eager
                eager_run = lambda: eager_call(*args, **kwargs)  # noqa: E731
            time_into(
                record, benchmark, node, run, case.device.type, eager_run, node.config.stash[TIMING_KEY].precision
            )
            conclude(node, verdict, compiled.stats)
            return verdict.result

        yield inductor_benchmark
