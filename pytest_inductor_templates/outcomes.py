"""Check outcomes, the one-line reasons, and how a result ends a pytest item."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import pytest


class Outcome(str, Enum):
    """How a checked item ended."""

    PASS = "pass"
    ACCURACY_FAIL = "accuracy_fail"
    COMPILE_FAIL = "compile_fail"
    RUNTIME_FAIL = "runtime_fail"
    EAGER_FAIL = "eager_fail"
    EAGER_NONDETERMINISTIC = "eager_nondeterministic"
    NO_EFFECT = "no_effect"  # only with --inductor-require-effect: the template changed nothing
    SKIPPED = "skipped"


SHORT_NAMES = {  # an outcome in a table cell
    "pass": "pass",
    "accuracy_fail": "ACCURACY",
    "compile_fail": "COMPILE",
    "runtime_fail": "RUNTIME",
    "eager_fail": "EAGER",
    "eager_nondeterministic": "nondet",
    "no_effect": "NO-EFFECT",
    "skipped": "skip",
}
UNTIMEABLE = (Outcome.EAGER_FAIL, Outcome.COMPILE_FAIL, Outcome.RUNTIME_FAIL)  # nothing that ran to time


@dataclass
class CheckResult:
    """The verdict of one check, with a one-line reason and the full explanation."""

    outcome: Outcome
    reason: str = ""
    details: str = ""
    level: int | None = None  # tightest GraphNet tolerance level at which the item passes
    error: BaseException | None = None  # the exception behind a compile or runtime failure
    second_opinions: list[str] = field(default_factory=list)  # leaves that passed on the fp64 reference

    def properties(self) -> list[tuple[str, Any]]:
        """What goes on the test report (user_properties, so JUnit XML and JSON get it too)."""
        props: list[tuple[str, Any]] = [("inductor_outcome", self.outcome.value)]
        if self.reason:
            props.append(("inductor_reason", self.reason))
        if self.level is not None:
            props.append(("inductor_tolerance_level", self.level))
        if self.second_opinions:
            props.append(("inductor_fp64_second_opinion", ", ".join(self.second_opinions)))
        return props

    def json_info(self) -> dict[str, Any]:
        """The outcome as benchmark extra_info (plain keys)."""
        return {key.removeprefix("inductor_"): value for key, value in self.properties()}


def first_line(error: BaseException) -> str:
    text = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


_STAGES = (
    ("LoweringException", "lowering"),
    ("CppCompileError", "C++ compilation"),
    ("CompilationError", "Triton compilation"),
    ("NoValidChoicesError", "autotuning"),
)


def compile_stage(error: BaseException, backend: str) -> str:
    """Where compilation failed: Dynamo's tracing, or the backend (and the backend's step when known)."""
    seen: BaseException | None = error
    while seen is not None:
        for class_name, stage in _STAGES:
            if type(seen).__name__ == class_name:
                return f"backend {backend!r}, {stage}"
        seen = seen.__cause__ or seen.__context__
    return f"backend {backend!r}"


def innermost(error: BaseException) -> BaseException:
    """The backend's own exception inside Dynamo's BackendCompilerFailed wrapper."""
    return getattr(error, "inner_exception", None) or error


def conclude(result: CheckResult, item: pytest.Item, long_traceback: bool) -> None:
    """Record the result on the item and end it: pass, fail with the explanation, or skip."""
    item.user_properties.extend(result.properties())
    if result.outcome is Outcome.PASS:
        return
    if result.outcome is Outcome.EAGER_NONDETERMINISTIC:  # not the compiler's fault: reported at the test
        raise pytest.skip.Exception(f"eager_nondeterministic: {result.reason}", _use_item_location=True)
    if long_traceback and result.error is not None:
        raise result.error
    pytest.fail(f"{result.outcome.value}: {result.details or result.reason}", pytrace=False)
