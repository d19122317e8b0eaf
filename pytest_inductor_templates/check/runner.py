"""One check: eager twice, the compiled model on every input set, every output compared and explained.

``observe`` makes the calls; ``judge`` decides from what they returned. Keeping them apart lets a
benchmark judge one set of calls many ways (``benchmarks/planted_faults.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..compile.failures import compile_stage, first_line, innermost
from ..compile.outputs import leaves, map_tensors
from ..outcomes import FIRST_COMPARISON, SECOND_OPINION, Outcome
from ..tolerance import Tolerance
from .diff import EXACT, Mismatch, OutputDiff, compare_outputs
from .float64 import Float64Run, float64_run, narrowest, tf32_applies, tf32_enabled
from .inputs import Inputs, later_inputs
from .result import CheckResult
from .second_opinion import Reference

MAX_LEAVES_SHOWN = 8
SUPPRESSED = "; Dynamo ran the code eagerly instead (torch._dynamo.config.suppress_errors, TORCHDYNAMO_SUPPRESS_ERRORS)"
STALE = "stale output"
OVERWRITTEN = "overwritten"


@dataclass
class CheckSubject:
    """What one check runs."""

    make_eager: Callable[[], Any]  # a fresh eager model, in the state the compiled one started from
    model: Any  # the model under test: a CompiledModel (or an EagerModel for the eager row), not yet called
    inputs: list[Inputs]  # the first call's inputs, then later calls'
    tolerance: Tolerance | None = None
    backend: str = "inductor"
    second_opinion: bool = True  # False: an output beyond the tolerance fails, no float64 second opinion asked
    call: Callable[[Any, Inputs], Any] = lambda model, inputs: model(*inputs.args, **inputs.kwargs)


@dataclass
class Observed:
    """What one check's calls returned."""

    expected: list[Any]  # eager's outputs, one per input set, from one model called in order, each as returned
    actual: list[Any]  # the model under test's outputs; the first as it was right after its call
    first_after: Any  # the first call's output object as it is after the later calls
    float64: Float64Run  # the float64 run of every input set, on demand
    tf32: Float64Run | None = None  # the same from TF32-rounded inputs and weights, where fp32 may run as TF32
    # (used only when the model runs a GEMM or convolution whose TF32 flag is on)
    eager_first_after: Any = None  # eager's first output object after its later calls, where it changed
    # (its output is state the model changes in place): what the model under test's must then match
    state: str = ""  # how eager changes its own state, where it does (``StateUse.note``)

    def reference(self, index: int) -> Reference:
        """The float64 outputs of call ``index`` (0-based) by path, or why there are none."""

        def by_path(run: Float64Run | None) -> dict[str, Any] | None:
            outputs = run.outputs() if run is not None else None
            return dict(leaves(outputs[index])) if outputs is not None else None

        float64 = by_path(self.float64)  # runs first: it names the operators the model runs
        tf32 = by_path(self.tf32) if self.tf32 is not None and tf32_applies(self.float64.ops) else None
        return Reference(float64, tf32, self.float64.reason, narrowest(self.float64.dtypes))


def _explain(what: str, mismatches: list[Mismatch]) -> str:
    lines = [m.message for m in mismatches[:MAX_LEAVES_SHOWN]]
    if len(mismatches) > MAX_LEAVES_SHOWN:
        lines.append(f"... and {len(mismatches) - MAX_LEAVES_SHOWN} more")
    return what + "\n" + "\n".join(lines)


def _backend_failure(subject: CheckSubject) -> BaseException | None:
    """What the backend raised while compiling the model under test, if it failed."""
    return getattr(getattr(subject.model, "stats", None), "compile_failure", None)


def _compile_fail(
    subject: CheckSubject, backend_error: BaseException, error: BaseException, note: str = ""
) -> CheckResult:
    reason = f"compile failed in {compile_stage(backend_error, subject.backend)}: {first_line(backend_error)}{note}"
    return CheckResult(Outcome.COMPILE_FAIL, reason, reason, error=error)


def _failure(subject: CheckSubject, error: Exception, call_number: int) -> CheckResult:
    import torch._dynamo.exc

    backend_error = _backend_failure(subject)
    if backend_error is not None:
        return _compile_fail(subject, backend_error, error)
    if isinstance(error, torch._dynamo.exc.TorchDynamoException):
        reason = f"compile failed in Dynamo (tracing): {first_line(innermost(error))}"
        return CheckResult(Outcome.COMPILE_FAIL, reason, reason, error=error)
    reason = f"the compiled model raised on call {call_number}: {first_line(error)}"
    return CheckResult(Outcome.RUNTIME_FAIL, reason, reason, error=error)


def _copy(outputs: Any) -> Any:
    """``outputs`` with every tensor copied: the values as they are now."""
    return map_tensors(lambda t: t.detach().clone(), outputs)


def _state_of(model: Any) -> dict[str, Any]:
    """A module's parameters and buffers by name (nothing for a plain function)."""
    import torch

    if isinstance(getattr(model, "target", None), torch.nn.Module):  # a CompiledModel or EagerModel
        model = model.target
    if not isinstance(model, torch.nn.Module):
        return {}
    return {**dict(model.named_parameters()), **dict(model.named_buffers())}


def _same(a: Any, b: Any) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    return a.is_floating_point() and bool(((a == b) | (a.isnan() & b.isnan())).all())


@dataclass
class StateUse:
    """How eager's first call changed the model's own parameters and buffers, and which outputs are them."""

    before: dict[str, Any]  # a copy of the state each compared call starts from
    changed: list[str]  # the names of the state tensors the call changed in place
    returned: list[str]  # ``out[1] is buffer acc``: outputs that are (views of) the model's state

    @classmethod
    def around(cls, model: Any, call: Callable[[], Any]) -> tuple[StateUse, Any]:
        state = _state_of(model)
        before = {name: t.detach().clone() for name, t in state.items()}
        outputs = call()
        changed = [name for name, t in state.items() if not _same(t, before[name])]
        storages = {}
        for name, t in state.items():
            with contextlib.suppress(RuntimeError, NotImplementedError):  # no single storage: sparse and the like
                storages.setdefault((t.device, t.untyped_storage().data_ptr()), name)
        returned = []
        for path, leaf in leaves(outputs):
            with contextlib.suppress(AttributeError, RuntimeError, NotImplementedError):
                if (name := storages.get((leaf.device, leaf.untyped_storage().data_ptr()))) is not None:
                    returned.append(f"{path} is {name}")
        return cls(before, changed, returned), outputs

    @property
    def note(self) -> str:
        """What the record says of a model that changes its own state, or nothing."""
        if not self.changed:
            return ""
        shown = ", ".join(self.changed[:MAX_LEAVES_SHOWN]) + (", ..." if len(self.changed) > MAX_LEAVES_SHOWN else "")
        returned = "; " + ", ".join(self.returned[:MAX_LEAVES_SHOWN]) if self.returned else ""
        return (
            f"state restored: the model changes its own state in place ({shown}{returned}); eager's repeat call "
            "and the compiled model started from the state eager's first call did, each output compared as returned"
        )

    def restore(self, model: Any) -> None:
        """Put ``model``'s changed state back to what the compared calls started from."""
        import torch

        state = _state_of(model)
        if not self.changed or set(state) != set(self.before):
            return
        with torch.no_grad():
            for name in self.changed:
                state[name].copy_(self.before[name])


def _eager_calls(subject: CheckSubject) -> tuple[list[Inputs], list[Any], Any, StateUse]:
    """The input sets, eager's outputs on them (each copied as it was returned), eager's first output object
    after the later calls, and how the first call changed the model's own state. Where the caller gave one
    set, the second is derived (``later_inputs``): the first candidate eager accepts."""
    plans = (
        [subject.inputs]
        if len(subject.inputs) > 1
        else [[subject.inputs[0], later] for later in later_inputs(subject.inputs[0])]
    )
    for number, inputs in enumerate(plans, start=1):
        try:
            eager = subject.make_eager()
            state, first = StateUse.around(eager, lambda: subject.call(eager, inputs[0]))  # noqa: B023
            expected = [_copy(first)]
            for x in inputs[1:]:
                expected.append(_copy(subject.call(eager, x)))
            return inputs, expected, first, state
        except Exception:
            if number == len(plans):
                raise
    raise AssertionError("unreachable")


@dataclass
class EagerSide:
    """Eager's half of a check, which does not depend on the model under test: the input sets, eager's outputs,
    how eager changes its own state, and the float64 runs. A diagnosis computes it once for all its checks."""

    inputs: list[Inputs]
    expected: list[Any]
    eager_first: Any  # eager's first output object after its later calls
    eager_changed: bool  # that object changed since (its output is state the model changes in place)
    state: StateUse
    float64: Float64Run
    tf32: Float64Run | None = None


def observe_eager(subject: CheckSubject) -> EagerSide | CheckResult:
    """Call eager (twice on the first input set: a model that disagrees with itself goes no further) on every
    input set; the float64 runs are made on demand. A failure to run is returned as its result."""
    try:
        inputs, expected, eager_first, state = _eager_calls(subject)
        again = subject.make_eager()
        state.restore(again)  # the same object again, or a model whose fresh copies share its state
        repeat = subject.call(again, inputs[0])
    except Exception as error:
        reason = f"eager raised: {first_line(error)}"
        return CheckResult(Outcome.EAGER_FAIL, reason, reason, error=error)
    self_check = compare_outputs(repeat, expected[0], subject.tolerance, names=("eager run 2", "eager run 1"))
    if not self_check.ok:
        same_state = ", from the same state (its changed state restored first)" if state.changed else ""
        reason = f"eager disagrees with itself on the same input{same_state}: {self_check.mismatches[0].message}"
        return CheckResult(Outcome.EAGER_NONDETERMINISTIC, reason, _explain(reason, self_check.mismatches))
    eager_changed = not compare_outputs(eager_first, expected[0], EXACT).ok  # its own state, changed since
    on_cuda = any(getattr(leaf, "is_cuda", False) for _, leaf in leaves(expected[0]))
    return EagerSide(
        inputs,
        expected,
        eager_first,
        eager_changed,
        state,
        float64_run(subject.make_eager, subject.call, inputs),
        float64_run(subject.make_eager, subject.call, inputs, tf32=True)
        if on_cuda and tf32_enabled() and subject.second_opinion
        else None,
    )


def observe_model(subject: CheckSubject, eager: EagerSide) -> Observed | CheckResult:
    """Call the model under test on eager's input sets, in order, from the state eager started from."""
    eager.state.restore(subject.model)  # the model under test starts from the state eager started from
    actual = []
    for number, x in enumerate(eager.inputs, start=1):
        try:
            actual.append(subject.call(subject.model, x))
        except Exception as error:
            return _failure(subject, error, number)
        if (backend_error := _backend_failure(subject)) is not None:  # the call returned: eager ran instead
            return _compile_fail(subject, backend_error, backend_error, SUPPRESSED)
        if number == 1:
            first_copy = _copy(actual[0])
    return Observed(
        eager.expected,
        [first_copy, *actual[1:]],
        actual[0],
        eager.float64,
        eager.tf32,
        eager.eager_first if eager.eager_changed else None,
        eager.state.note,
    )


def observe(subject: CheckSubject) -> Observed | CheckResult:
    """Call eager (twice on the first input set: a model that disagrees with itself goes no further) and the
    model under test on every input set, in order. A failure to run is returned as its result."""
    eager = observe_eager(subject)
    if isinstance(eager, CheckResult):
        return eager
    return observe_model(subject, eager)


def _stale(observed: Observed, number: int, tolerance: Tolerance | None) -> list[Mismatch]:
    """Call ``number``'s outputs that are the previous call's values again, where eager's changed."""
    previous = number - 2  # 0-based index of the call before
    same = compare_outputs(observed.actual[number - 1], observed.actual[previous], tolerance)
    changed = compare_outputs(observed.expected[number - 1], observed.expected[previous], tolerance)
    if not same.ok or changed.ok:
        return []
    return [
        Mismatch(
            m.path,
            "stale",
            f"{m.path}: call {number} returned call {previous + 1}'s values again, while eager's output changed "
            + (f"(in {m.count} of {m.total} elements)" if m.total else f"({m.message.removeprefix(m.path + ': ')})"),
        )
        for m in changed.mismatches
    ]


def judge(observed: Observed, tolerance: Tolerance | None = None, second_opinion: bool = True) -> CheckResult:
    """The verdict on what the calls returned: every call's output against eager's (with the float64 second
    opinion, unless ``second_opinion`` is False: then an output beyond the tolerance fails), a stale later call,
    and the first output overwritten."""
    calls = len(observed.expected)
    comparisons: list[OutputDiff] = [
        compare_outputs(a, e, tolerance, lambda n=n: observed.reference(n), second_opinion_off=not second_opinion)
        for n, (a, e) in enumerate(zip(observed.actual, observed.expected, strict=True))
    ]
    levels = [c.level for c in comparisons]
    level = None if None in levels else max(levels)  # type: ignore[type-var]
    cleared = [f"call {n} of {calls}: {line}" for n, c in enumerate(comparisons, start=1) for line in c.second_opinions]
    for number, comparison in enumerate(comparisons, start=1):
        if comparison.ok:
            continue
        stale = _stale(observed, number, tolerance) if number > 1 else []
        if stale:
            what = f"call {number} of {calls} returned a stale output"
            reason = f"{what}: {stale[0].message}"
            return CheckResult(
                Outcome.ACCURACY_FAIL, reason, _explain(what + ":", stale), level, STALE, second_opinions=cleared
            )
        what = f"call {number} of {calls}"
        reason = f"{what}: {comparison.mismatches[0].message}"
        details = _explain(f"compiled output differs from eager on {what}:", comparison.mismatches)
        figures = {f"{what}: {m.path}": m.float64_rmse for m in comparison.mismatches if m.float64_rmse is not None}
        return CheckResult(
            Outcome.ACCURACY_FAIL, reason, details, level, comparison.rule, second_opinions=cleared,
            float64_rmse=figures,
        )  # fmt: skip
    if observed.eager_first_after is None:  # eager's first output kept its values: so must the compiled one's
        overwritten = compare_outputs(observed.first_after, observed.actual[0], EXACT)
        what = "the first call's output changed after a later call (overwritten in place)"
    else:  # eager's first output is its state, changed by the later call: the compiled one's must change alike
        overwritten = compare_outputs(observed.first_after, observed.eager_first_after, tolerance)
        what = (
            "the first call's output after a later call differs from eager's (the model's own state, changed in place)"
        )
    if not overwritten.ok:
        mismatches = [Mismatch(m.path, "overwritten", m.message) for m in overwritten.mismatches]
        return CheckResult(
            Outcome.ACCURACY_FAIL,
            f"{what}: {mismatches[0].message}",
            _explain(what + ":", mismatches),
            level,
            OVERWRITTEN,
            second_opinions=cleared,
        )
    rule = SECOND_OPINION if cleared else FIRST_COMPARISON
    uncompared = list(dict.fromkeys(path for c in comparisons for path in c.uncompared))
    return CheckResult(
        Outcome.PASS, observed.state, level=level, rule=rule, second_opinions=cleared, uncompared=uncompared
    )


def run_check(subject: CheckSubject) -> CheckResult:
    """Run eager (twice) and the model under test on every input set in order, and judge the outputs."""
    observed = observe(subject)
    if isinstance(observed, CheckResult):
        return observed
    return judge(observed, subject.tolerance, subject.second_opinion)
