"""One check: eager twice, the compiled model on every input set, every output compared and explained."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..compile.failures import compile_stage, first_line, innermost
from ..compile.outputs import leaves, map_tensors
from ..record import Outcome
from .diff import Mismatch, OutputDiff, compare_outputs, round_to_tf32, tf32_enabled
from .inputs import Inputs
from .outcomes import CheckResult
from .tolerances import Tolerance

MAX_LEAVES_SHOWN = 8
SUPPRESSED = "; Dynamo ran the code eagerly instead (torch._dynamo.config.suppress_errors, TORCHDYNAMO_SUPPRESS_ERRORS)"
EXACT = Tolerance(0.0, 0.0)


@dataclass
class CheckSubject:
    """What one check runs."""

    make_eager: Callable[[], Any]  # a fresh eager model, in the state the compiled one started from
    model: Any  # the model under test: a CompiledModel (or an EagerModel for the eager row), not yet called
    inputs: list[Inputs]  # the first call's inputs, then later calls'
    tolerance: Tolerance | None = None
    backend: str = "inductor"
    call: Callable[[Any, Inputs], Any] = lambda model, inputs: model(*inputs.args, **inputs.kwargs)


def later_inputs(first: Inputs) -> Inputs:
    """A second input of the same shapes and dtypes with other values: floating tensors rolled by one."""

    def roll(t: Any) -> Any:
        return t.reshape(-1).roll(1).reshape(t.shape) if t.is_floating_point() and t.numel() > 1 else t

    return Inputs(map_tensors(roll, first.args), map_tensors(roll, first.kwargs))


def _to_float64(inputs: Inputs, tf32: bool = False) -> Inputs:
    def widen(t: Any) -> Any:
        import torch

        if not t.is_floating_point():
            return t
        wide = t.to(torch.float64)
        return round_to_tf32(wide) if tf32 else wide

    return Inputs(map_tensors(widen, inputs.args), map_tensors(widen, inputs.kwargs))


def _float64_model(subject: CheckSubject, tf32: bool) -> Any:
    """The eager model in float64; with ``tf32`` its floating parameters and buffers rounded to TF32 first."""
    import torch

    model = subject.make_eager()
    if not isinstance(model, torch.nn.Module):
        return model
    model = model.to(torch.float64)
    if tf32:
        with torch.no_grad():
            for tensor in [*model.parameters(), *model.buffers()]:
                if tensor.is_floating_point():
                    tensor.copy_(round_to_tf32(tensor))
    return model


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


def run_check(subject: CheckSubject) -> CheckResult:
    """Run eager (twice) and the model under test on every input set in order, and judge the outputs."""
    inputs = subject.inputs if len(subject.inputs) > 1 else [subject.inputs[0], later_inputs(subject.inputs[0])]
    eager, eager_again = subject.make_eager(), subject.make_eager()
    try:
        expected = [subject.call(eager, x) for x in inputs]
        repeat = subject.call(eager_again, inputs[0])
    except Exception as error:
        reason = f"eager raised: {first_line(error)}"
        return CheckResult(Outcome.EAGER_FAIL, reason, reason, error=error)
    self_check = compare_outputs(repeat, expected[0], subject.tolerance, names=("eager run 2", "eager run 1"))
    if not self_check.ok:
        reason = f"eager disagrees with itself on the same input: {self_check.mismatches[0].message}"
        return CheckResult(Outcome.EAGER_NONDETERMINISTIC, reason, _explain(reason, self_check.mismatches))

    actual = []
    for number, x in enumerate(inputs, start=1):
        try:
            actual.append(subject.call(subject.model, x))
        except Exception as error:
            return _failure(subject, error, number)
        if (backend_error := _backend_failure(subject)) is not None:  # the call returned: eager ran instead
            return _compile_fail(subject, backend_error, backend_error, SUPPRESSED)
        if number == 1:
            first_copy = map_tensors(lambda t: t.detach().clone(), actual[0])

    @cache
    def reference64(tf32: bool) -> list[Any] | None:
        try:
            model = _float64_model(subject, tf32)
            return [subject.call(model, _to_float64(x, tf32)) for x in inputs]
        except Exception:  # no fp64 reference for this model: the dtype tolerance alone decides
            return None

    def reference_for(index: int, tf32: bool = False) -> Callable[[], Any]:
        return lambda: (reference64(tf32) or [None] * len(inputs))[index]

    as_returned = [first_copy, *actual[1:]]  # the first output as it was before any later call
    on_cuda = any(getattr(leaf, "is_cuda", False) for _, leaf in leaves(expected[0]))
    tf32 = tf32_enabled() and on_cuda
    comparisons: list[tuple[str, OutputDiff]] = [
        (
            f"call {n} of {len(inputs)}",
            compare_outputs(
                a, e, subject.tolerance, reference_for(n - 1), reference_for(n - 1, True) if tf32 else None
            ),
        )
        for n, (a, e) in enumerate(zip(as_returned, expected, strict=True), start=1)
    ]
    overwritten = compare_outputs(actual[0], first_copy, EXACT)
    levels = [c.level for _, c in comparisons]
    level = None if None in levels else max(levels)  # type: ignore[type-var]
    second_opinions = sorted({path for _, c in comparisons for path in c.second_opinions})
    for what, comparison in comparisons:
        if not comparison.ok:
            reason = f"{what}: {comparison.mismatches[0].message}"
            details = _explain(f"compiled output differs from eager on {what}:", comparison.mismatches)
            return CheckResult(Outcome.ACCURACY_FAIL, reason, details, level, second_opinions=second_opinions)
    if not overwritten.ok:
        mismatches = [Mismatch(m.path, "overwritten", m.message) for m in overwritten.mismatches]
        what = "the first call's output changed after a later call (overwritten in place)"
        return CheckResult(
            Outcome.ACCURACY_FAIL, f"{what}: {mismatches[0].message}", _explain(what + ":", mismatches), level
        )
    return CheckResult(Outcome.PASS, level=level)
