"""How an item can end, the outcome groups the plugin acts on, and the names of the check's rules.

The vocabulary shared by the check, the record and every table. Neither torch nor pytest is imported here.
"""

from __future__ import annotations

from enum import Enum

FIRST_COMPARISON = "first comparison"  # check_rule: decided by the scale-aware tolerance alone
SECOND_OPINION = "second opinion"  # check_rule: an output beyond it was cleared by the float64 second opinion
SECOND_OPINION_OFF = "first comparison, second opinion off"  # check_rule: failed beyond the tolerance, no float64
# second opinion asked (--inductor-second-opinion off)


class Outcome(str, Enum):
    """How an item ended."""

    PASS = "pass"
    ACCURACY_FAIL = "accuracy_fail"
    COMPILE_FAIL = "compile_fail"
    RUNTIME_FAIL = "runtime_fail"
    EAGER_FAIL = "eager_fail"
    EAGER_NONDETERMINISTIC = "eager_nondeterministic"
    NO_EFFECT = "no_effect"  # only with --inductor-require-effect: the template changed nothing
    CRASHED = "crashed"  # the process running the item died (signal, exit, CUDA fault), or the item called sys.exit
    TIMEOUT = "timeout"  # the item ran past --inductor-timeout (or pytest-timeout's limit) and was stopped
    SKIPPED = "skipped"


SHORT_NAMES = {  # an outcome in a table cell
    Outcome.PASS: "pass",
    Outcome.ACCURACY_FAIL: "ACCURACY",
    Outcome.COMPILE_FAIL: "COMPILE",
    Outcome.RUNTIME_FAIL: "RUNTIME",
    Outcome.EAGER_FAIL: "EAGER",
    Outcome.EAGER_NONDETERMINISTIC: "nondet",
    Outcome.NO_EFFECT: "NO-EFFECT",
    Outcome.CRASHED: "CRASHED",
    Outcome.TIMEOUT: "TIMEOUT",
    Outcome.SKIPPED: "skip",
}
FAILURES = frozenset(Outcome) - {Outcome.PASS, Outcome.SKIPPED, Outcome.EAGER_NONDETERMINISTIC}
UNTIMEABLE = frozenset(  # nothing ran to time, or eager has no reproducible answer to compare with
    {Outcome.EAGER_FAIL, Outcome.COMPILE_FAIL, Outcome.RUNTIME_FAIL, Outcome.EAGER_NONDETERMINISTIC}
)
ENDED_EARLY = frozenset({Outcome.CRASHED, Outcome.TIMEOUT})  # the triple's later items are skipped
