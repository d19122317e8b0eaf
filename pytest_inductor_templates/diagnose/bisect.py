"""The bisector's questions answered at the least cost, in torch's order: ``CompilerBisector.do_bisect`` asks them
one by one (``stage.find_stage``) and ``Answers`` answers each

- from the item's own result (the inductor stage fails: the item has just failed there),
- without compiling, where the check cannot change the answer (``skips``: the CUDA-graph switch of a template
  with no CUDA graphs, the random-op fallback of a graph with no random operators, the layout switch of a graph
  without convolutions, precision casts of a graph without float16 or bfloat16, stride padding on the CPU),
- from an answered step inside a bisection step's range whose answer implies its own (answers are monotone in a
  step's midpoint, as torch's binary search assumes): a step a helper is slow on is settled so,
- else by a check in the asking process, while helper processes (``helpers``), each with a bisector state of
  its own set to its question's, answer the questions torch may ask next (the later stages, the later subsystems'
  switches, both halves of a bisection step, and their halves where there are more helpers than halves); an
  answer a helper has, or is working on, is taken from it. A lowering step the asking process would check on the
  whole model (it holds no kept graph) goes to a helper that holds one, and is waited for, also while that helper
  finishes another lowering step from its graph (on opus-mt a whole-model step took 10.5-13.8 s, one from the kept
  graph 4-5 s).

torch still asks in its order and stops at its first answer, so the answer is the serial one (for a fault whose
answers are monotone, as torch's bisection assumes); the processes in all are at most
``DiagnosisRequest.processes`` and the usable CPUs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..compile.phase_times import OWN_PARTS, PARTS, compile_parts
from .helpers import Helpers
from .questions import Question, remember_applications
from .steplog import StepLog

RANDOM_SUBSYSTEM = "inductor_fallback_random"
CUDAGRAPHS_SUBSYSTEM = "cudagraphs"
PADDING_SUBSYSTEM = "inductor_comprehensive_padding"
LAYOUT_SUBSYSTEM = "inductor_layout_optimization"
CASTS_SUBSYSTEM = "inductor_emulate_precision_casts"


def skips(cudagraphs: bool, device_type: str, facts: Any) -> dict[str, str]:
    """The switches that cannot change the answer, with why (``facts``: ``capture.GraphFacts``, or None when the
    graphs could not be read: then only the CUDA-graph switch is judged)."""
    from torch._inductor import config

    found = {}
    if not cudagraphs:
        found[CUDAGRAPHS_SUBSYSTEM] = "the template runs no CUDA graphs"
    if device_type == "cpu" and getattr(config, "disable_padding_cpu", False):
        found[PADDING_SUBSYSTEM] = "Inductor pads no strides on the CPU (disable_padding_cpu)"
    if facts is None:
        return found
    if not facts.random_ops:
        found[RANDOM_SUBSYSTEM] = "the graph has no random operators"
    if not facts.convolutions:
        found[LAYOUT_SUBSYSTEM] = "the graph has no convolution (layout optimization acts on convolutions)"
    if not facts.low_precision:
        found[CASTS_SUBSYSTEM] = "the graph computes no float16 or bfloat16 (precision casts act on those)"
    return found


class Answers:
    """``fails(question)`` for the bisector (True: still fails; None: the check could not run), at the least cost;
    every answer is logged as a ``bisect_check``."""

    def __init__(
        self,
        check: Callable[[], bool | None],
        log: StepLog,
        skipped: dict[str, str],
        reproduced: str | None,
        helpers: Helpers | None,
        counts: Any,
        holds_graph: Callable[[], bool] = lambda: False,
    ) -> None:
        self.check = check  # the check in this process, under the bisector's state here
        self.holds_graph = holds_graph  # whether this process's lowering steps compile a kept graph
        self.log = log
        self.skipped = skipped
        self.reproduced = reproduced  # the item's own failure, or None
        self.helpers = helpers
        self.counts = counts
        self.known: dict[Question, bool | None] = {}  # torch asks some again (each later switch after a stage's
        # subsystems fixed nothing): the same answer, not checked again

    def _free(self, question: Question) -> str | None:
        """Why ``question`` needs no check, or None."""
        if question.run_state == "test_disable" and question.subsystem in self.skipped:
            return self.skipped[question.subsystem]  # type: ignore[index]
        if question.backend == "inductor" and question.subsystem is None and self.reproduced is not None:
            return "the item's own check failed there"
        return None

    def _answered(self) -> dict[Question, bool | None]:
        """Every answer so far: this process's, and the helpers' whose checks ran."""
        helpers = self.helpers.answers if self.helpers is not None else {}
        return {**{q: a.get("failing") for q, a in helpers.items() if not a.get("error")}, **self.known}

    def _known(self, question: Question) -> bool | None:
        """``question``'s answer where it is known (here, from a helper, or implied), else None."""
        answered = self._answered()
        if question in answered:
            return answered[question]
        implied = self._implied(question)
        return implied["failing"] if implied is not None else None

    def _settled(self, question: Question) -> bool:
        """Whether a helper asked ``question`` would be wasted: its answer is known (here, from a helper, or without
        a check), or it is the count of a switch known not to fix the fault (torch counts only after one that does;
        a check that could not run counts as still failing)."""
        helpers = self.helpers.answers if self.helpers is not None else {}
        if question in self.known or question in helpers or self._free(question) is not None:
            return True
        if self._implied(question) is not None:
            return True
        if question.run_state != "find_max_bounds":
            return False
        switch = Question(question.backend, question.subsystem, "test_disable")
        if self._free(switch) is not None:
            return True
        if switch in self.known:
            return self.known[switch] is not False
        answer = helpers.get(switch)
        return answer is not None and not answer.get("error") and answer.get("failing") is not False

    def _implied(self, question: Question) -> dict[str, Any] | None:
        """The answer to a bisection step that an answered step inside its range implies, or None. A step asks
        whether the fault still shows with the applications up to its midpoint enabled, so the answer is monotone
        in the midpoint (torch's binary search assumes it): one that fails implies that every larger midpoint
        fails, one that passes that every smaller one passes. So a step whose check is slow (on opus-mt, one
        range's code generation took 103 s where the others' took 2 s) is settled as soon as a helper answers a
        step below it that implies it. Only steps inside its range count (a fault whose answers are not monotone
        then still bisects as the serial order would within the range); the last steps, over three applications or
        fewer, are checked: torch records what each application was there."""
        midpoint = question.midpoint
        if question.run_state != "bisect" or midpoint is None or question.high - question.low <= 2:  # type: ignore[operator]
            return None
        for step, failing in self._answered().items():
            if (step.backend, step.subsystem, step.run_state) != (question.backend, question.subsystem, "bisect"):
                continue
            if step == question or step.midpoint is None or failing is None:
                continue
            if not question.low <= step.low <= step.high <= question.high:  # type: ignore[operator]
                continue
            if (failing and step.midpoint <= midpoint) or (not failing and step.midpoint >= midpoint):
                return {"failing": failing, "implied_by": [step.low, step.high]}
        return None

    def __call__(self) -> bool | None:
        question = Question.now()
        if question not in self.known:
            self.known[question] = self._answer(question)
        return self.known[question]

    def _answer(self, question: Question) -> bool | None:
        from torch._inductor.compiler_bisector import CompilerBisector

        where = {"backend": question.backend, "subsystem": question.subsystem, "run_state": question.run_state}
        if question.low is not None:  # a bisection step: its range of applications
            where.update(low=question.low, high=question.high)
        if (why := self._free(question)) is not None:
            self.counts.skipped_checks += 1
            self.log.write("bisect_check", **where, failing=True, answered=why)
            return True
        answer = None
        if self.helpers is not None and question.run_state in ("find_max_bounds", "bisect"):
            self.helpers.cancel_unless(question.covers)  # helpers on what torch can no longer ask are stopped
        if self.helpers is not None:  # an answer in hand is taken as it is: offering the helpers the questions after
            # it would hand them torch's other branch, which it does not take (on opus-mt, a helper's 12 s check)
            answer = self.helpers.answered(question) or self._implied(question)
            if answer is None:
                ahead = question.questions_ahead(len(self.helpers.processes), self._settled, self._known)
                if self._hand_over(question):
                    self.helpers.offer([question, *ahead], for_holder=question)
                else:
                    if self._from_graph_elsewhere(question):  # why it is not handed over: what the holders are on
                        where["holders_on"] = [asdict(q) for q in self.helpers.holders_on()]
                    self.helpers.offer(ahead)
                answer = self.helpers.take(question, lambda: self._implied(question))
        if answer is not None and answer.get("error") is not None:  # the helper's check could not run there:
            self.log.write("helper", pid=answer.get("pid"), error=answer["error"], question=asdict(question))
            answer = None  # asked here, where the serial order would have asked it
        if answer is None:
            return self._here(question, where)
        if answer.get("range") is not None:  # find_max_bounds: the range the helper's compile counted
            CompilerBisector.update_bisect_range(question.backend, question.subsystem, *answer["range"])
        if answer.get("debug_info"):  # the last bisection steps: what each application was
            remember_applications(question.backend, question.subsystem, answer["debug_info"])  # type: ignore[arg-type]
        fields = {
            k: answer.get(k)
            for k in ("seconds", "pid", *PARTS, *OWN_PARTS, "kernels", "implied_by")
            if answer.get(k) is not None
        }
        self.log.write("bisect_check", **where, failing=answer.get("failing"), **fields)
        return answer.get("failing")

    def _from_graph_elsewhere(self, question: Question) -> bool:
        """Whether ``question`` is a lowering step this process would check on the whole model (it holds no kept
        graph), where a helper holding one would compile the graph alone."""
        from .inner_graph import from_the_graph

        return from_the_graph(question) and not self.holds_graph()

    def _hand_over(self, question: Question) -> bool:
        """Whether ``question`` goes to a helper rather than being checked here: a lowering step this process would
        check on the whole model, while a helper holds a kept graph standing for it (waited for where it is on
        another lowering step: on opus-mt a step from the kept graph took 4-5 s, one of the whole model 10-14 s)."""
        assert self.helpers is not None
        return self._from_graph_elsewhere(question) and self.helpers.holding_graph()

    def _here(self, question: Question, where: dict[str, Any]) -> bool | None:
        from ..compile.failures import first_line

        parts: dict[str, Any] = {}
        serving = self.helpers.serving() if self.helpers is not None else contextlib.nullcontext()
        try:
            with compile_parts(parts), serving:
                failing = self.check()
        except BaseException as error:  # a raise would leave the bisector enabled
            self.log.write("bisect_check", **where, failing=None, error=first_line(error))
            return None
        self.log.write("bisect_check", **where, failing=failing, **parts)
        return failing
