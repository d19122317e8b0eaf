"""The work behind the user-facing fixtures: compiled_model and inductor_check."""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from .bench_runner import fail_untimed, median_of, stats_info, time_model
from .check_runner import CheckSubject, run_check
from .compiled import CompiledModel, EagerModel, no_grad_call
from .effect_report import default_code_of, effect_info, effects_of, record_effects
from .effects import Effect
from .environment import Device
from .isolation import CompileWatcher, isolated_compile_state
from .matrix import Case
from .outcomes import UNTIMEABLE, CheckResult, Outcome, conclude
from .results import speedup_of
from .samples.base import Inputs
from .selection import Selection
from .session import InductorSession, torch_device
from .tolerances import Tolerance

TOLERANCE_MARKER = "inductor_tolerance"


class RecompileLimitWarning(UserWarning):
    """Dynamo hit its recompile limit and fell back to running the code eagerly."""


class CompiledModelFactory:
    """``compiled_model(module_or_function)`` returns it compiled with the test's selection."""

    def __init__(self, selection: Selection, watcher: CompileWatcher) -> None:
        self.selection = selection
        self._watcher = watcher

    def __call__(self, target: Any) -> CompiledModel | EagerModel:
        if not self.selection.compiles:
            return EagerModel(target)
        return CompiledModel(target, self.selection, self._watcher)


def device_of(state: InductorSession, request: pytest.FixtureRequest) -> Device:
    """The matrix device of a user test (the first selected one when it takes no inductor_device)."""
    callspec = getattr(request.node, "callspec", None)
    chosen = callspec.params.get("inductor_device") if callspec else None
    if chosen is None:
        return state.devices[0]
    return next(d for d in state.devices if torch_device(d) == chosen)


def tolerance_of(state: InductorSession, request: pytest.FixtureRequest) -> Tolerance | None:
    """The test's ``@pytest.mark.inductor_tolerance(rtol=, atol=)``, else the session's."""
    marker = request.node.get_closest_marker(TOLERANCE_MARKER)
    if marker is None:
        return state.tolerance
    try:
        return Tolerance(float(marker.kwargs["rtol"]), float(marker.kwargs["atol"]))
    except (KeyError, TypeError, ValueError):
        pytest.fail(f"@pytest.mark.{TOLERANCE_MARKER} takes rtol= and atol= numbers", pytrace=False)


@contextlib.contextmanager
def compile_scope(
    state: InductorSession, request: pytest.FixtureRequest, selection: Selection
) -> Iterator[CompileWatcher]:
    """Skip where the cell cannot run; isolate compile state; warn on recompile-limit hits."""
    device = device_of(state, request)
    case = Case(selection, device)
    request.node.user_properties += [("inductor_template", selection.label), ("inductor_device", device.name)]
    if reason := case.problem(state.visible):
        pytest.skip(reason)
    if note := case.fallback_note:
        request.node.user_properties.append(("inductor_fallback", note))
    with isolated_compile_state() as watcher:
        yield watcher
    for hit in watcher.recompile_limit_hits:
        warnings.warn(RecompileLimitWarning(hit), stacklevel=1)


@dataclass
class UserCheck:
    """A user test's model, compiled and checked against eager, with the template's effect judged."""

    result: CheckResult
    effects: list[Effect]
    compiled: Any
    make_eager: Callable[[], Any]


def check_user_model(
    state: InductorSession,
    node: pytest.Item,
    selection: Selection,
    watcher: CompileWatcher,
    tolerance: Tolerance | None,
    device: Device,
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> UserCheck:
    """Compile a copy of ``model``, check it against fresh eager copies, judge and record the effect.

    The result is the check's, or a no_effect failure where ``--inductor-require-effect`` asks for one.
    """
    pristine = copy.deepcopy(model)

    def make_eager() -> Any:
        return copy.deepcopy(pristine)

    compiled = CompiledModelFactory(selection, watcher)(make_eager())
    inputs = Inputs(args, kwargs)
    result = run_check(CheckSubject(make_eager, compiled, [inputs], tolerance, selection.backend))
    if result.outcome not in (Outcome.PASS, Outcome.ACCURACY_FAIL):
        return UserCheck(result, [], compiled, make_eager)
    call = lambda model: model(*inputs.args, **inputs.kwargs)  # noqa: E731
    default_code = default_code_of(selection, make_eager, call, watcher)
    effects = effects_of(compiled, selection, device, default_code, lambda: call(compiled))
    no_effect = record_effects(node, effects, selection.label, state.require_effect)
    if no_effect is not None and result.outcome is Outcome.PASS:
        result = no_effect
    return UserCheck(result, effects, compiled, make_eager)


def compiled_models(
    state: InductorSession, request: pytest.FixtureRequest, selection: Selection
) -> Iterator[CompiledModelFactory]:
    with compile_scope(state, request, selection) as watcher:
        yield CompiledModelFactory(selection, watcher)


def checks(
    state: InductorSession, request: pytest.FixtureRequest, selection: Selection
) -> Iterator[Callable[..., CheckResult]]:
    tolerance = tolerance_of(state, request)
    device = device_of(state, request)
    long_traceback = request.config.option.tbstyle == "long"
    with compile_scope(state, request, selection) as watcher:

        def inductor_check(model: Any, *args: Any, **kwargs: Any) -> CheckResult:
            """Compile ``model`` with the test's template, run it and eager, compare, explain any mismatch."""
            checked = check_user_model(state, request.node, selection, watcher, tolerance, device, model, args, kwargs)
            conclude(checked.result, request.node, long_traceback)
            return checked.result

        yield inductor_check


def benchmark_name(node: pytest.Item, selection: Selection) -> str:
    """The test's node id without the matrix's part of its parameters: the same for every template."""
    callspec = getattr(node, "callspec", None)
    if callspec is None:
        return node.nodeid
    device = callspec.params.get("inductor_device")
    matrix_id = f"{selection.label}-{device}" if device is not None else selection.label
    rest = callspec.id.removesuffix(matrix_id).rstrip("-") if callspec.id.endswith(matrix_id) else callspec.id
    base = node.nodeid[: node.nodeid.index("[")] if "[" in node.nodeid else node.nodeid
    return f"{base}[{rest}]" if rest else base


def readable_params(callspec: Any) -> dict[str, Any] | None:
    """The test's parameters as pytest-benchmark's JSON shows them: the matrix's by name, not as
    ``UNSERIALIZABLE[Selection(...)]``."""
    if callspec is None:
        return None
    readable = {"inductor_selection": lambda selection: selection.label, "inductor_device": str}
    return {k: readable[k](v) if k in readable else v for k, v in callspec.params.items()}


def benchmarks(
    state: InductorSession, request: pytest.FixtureRequest, selection: Selection, benchmark: Any
) -> Iterator[Callable[..., CheckResult]]:
    tolerance = tolerance_of(state, request)
    device = device_of(state, request)
    long_traceback = request.config.option.tbstyle == "long"
    node = request.node
    with compile_scope(state, request, selection) as watcher:
        calls = 0

        def inductor_benchmark(model: Any, *args: Any, **kwargs: Any) -> CheckResult:
            """Check ``model`` compiled against eager, then time both; the compiled one through pytest-benchmark."""
            nonlocal calls
            calls += 1
            if calls > 1:
                pytest.fail("inductor_benchmark times one model per test, as pytest-benchmark does", pytrace=False)
            checked = check_user_model(state, node, selection, watcher, tolerance, device, model, args, kwargs)
            result, effects, compiled = checked.result, checked.effects, checked.compiled
            name = benchmark_name(node, selection)
            node.user_properties += [("inductor_sample", name), ("inductor_kind", "bench")]
            if result.outcome in UNTIMEABLE:
                fail_untimed(node, lambda: conclude(result, node, long_traceback))
            eager = checked.make_eager()
            if benchmark.group is None:
                benchmark.group = f"{name}[{device.name}]"
            benchmark.extra_info.update(
                sample=name,
                template=selection.label,
                device=device.name,
                gpu=device.description if device.type == "cuda" else None,
                settings=dict(selection.effective_settings),
                **result.json_info(),
                **effect_info(effects),
            )
            benchmark.params = readable_params(getattr(node, "callspec", None))
            steady = compiled.steady()  # compiled by the check; timed without per-call scaffolding
            eager_call = no_grad_call(eager) if selection.inference_only else eager  # as the compiled one runs
            timing = time_model(
                benchmark, node, lambda: steady(*args, **kwargs), device.type, lambda: eager_call(*args, **kwargs)
            )
            benchmark.extra_info.update(stats_info(compiled.stats), **timing)
            median, eager_median = median_of(benchmark), timing.get("eager_median")
            benchmark.extra_info["speedup"] = speedup_of(eager_median, median, result.outcome.value)
            node.user_properties += [("inductor_median_s", median), ("inductor_eager_median_s", eager_median)]
            conclude(result, node, long_traceback)
            return result

        yield inductor_benchmark
