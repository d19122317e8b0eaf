"""One question of torch's ``CompilerBisector`` ("does it still fail at this stage, with this subsystem in this
state?"), the questions it may ask after it, and a question answered in this process under a bisector state of the
process's own (what a helper process does: ``helpers``), with what that state learnt for the asking process."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..compile.phase_times import compile_parts


@dataclass(frozen=True)
class Question:
    """One question of the bisector: does it still fail at ``backend`` with ``subsystem`` in ``run_state``
    (over the application range ``low``..``high`` while bisecting)?"""

    backend: str
    subsystem: str | None = None
    run_state: str | None = None
    low: int | None = None
    high: int | None = None

    @classmethod
    def now(cls) -> Question:
        """The question the bisector is asking in this process."""
        from torch._inductor.compiler_bisector import CompilerBisector

        backend, subsystem = CompilerBisector.get_backend(), CompilerBisector.get_subsystem()
        assert backend is not None
        state = CompilerBisector.get_run_state(backend, subsystem) if subsystem else None
        low = high = None
        if state == "bisect":
            low, high = CompilerBisector.get_bisect_range(backend, subsystem)  # type: ignore[arg-type]
        return cls(backend, subsystem, state, low, high)

    def next_questions(self) -> list[Question]:
        """Questions torch may ask next that need nothing this one finds out, in its order: the later stages
        after a stage, the later switches after a subsystem's switch (if this one does not end the search), then
        the count of this subsystem's applications (if it does: bisecting it starts there), and both halves of a
        bisection step's range (one of them is asked next)."""
        from torch._inductor.compiler_bisector import BACKENDS, BinarySubsystem, BisectSubsystem

        if self.subsystem is None:
            later = list(BACKENDS)[list(BACKENDS).index(self.backend) + 1 :]
            return [Question(b) for b in later]
        if self.run_state == "bisect" and self.low is not None and self.high is not None:
            return self.after(True) + self.after(False)
        if self.run_state != "test_disable":
            return []
        subsystems = BACKENDS[self.backend]
        names = [s.name for s in subsystems]
        later = [Question(self.backend, n, "test_disable") for n in names[names.index(self.subsystem) + 1 :]]
        this = subsystems[names.index(self.subsystem)]
        if not isinstance(this, BisectSubsystem) or isinstance(this, BinarySubsystem):  # an on/off switch: no count
            return later
        return [*later, Question(self.backend, self.subsystem, "find_max_bounds")]

    def covers(self, other: Question) -> bool:
        """Whether torch may still ask ``other`` once it asks this question, a count or a bisection step (torch
        counts a subsystem's applications only once its switch fixed the fault, then bisects them, and asks nothing
        else after): this count or a step of its subsystem; for a step, a step of its subsystem within its range
        (every later step of torch's binary search is)."""
        if (other.backend, other.subsystem) != (self.backend, self.subsystem):
            return False
        if self.run_state == "find_max_bounds":
            return other.run_state in ("find_max_bounds", "bisect")
        if self.run_state != "bisect" or other.run_state != "bisect" or self.low is None or other.low is None:
            return False
        return self.low <= other.low <= other.high <= self.high  # type: ignore[operator]

    @property
    def midpoint(self) -> int | None:
        """A bisection step's midpoint: it asks whether the fault shows with the applications up to it enabled."""
        return (self.low + self.high) // 2 if self.low is not None and self.high is not None else None

    def after(self, failing: bool | None) -> list[Question]:
        """The one question torch asks after this bisection step once its answer is ``failing`` (the half of its
        range the fault is in: failing, up to the midpoint; passing, beyond it; none once the range is one
        application); none for another question or an unknown answer."""
        if self.run_state != "bisect" or self.midpoint is None or failing is None:
            return []
        low, high = (self.low, self.midpoint) if failing else (self.midpoint + 1, self.high)
        return [Question(self.backend, self.subsystem, "bisect", low, high)] if low < high else []  # type: ignore[operator]

    def questions_ahead(
        self,
        wanted: int,
        answered: Callable[[Question], bool] = lambda q: False,
        answer: Callable[[Question], bool | None] = lambda q: None,
    ) -> list[Question]:
        """The questions torch may ask after this one that need a check (not ``answered`` already or without one),
        level by level (the next ones, then theirs: a bisection step's halves, then their halves; after the
        subsystems' switches, their counts), whole levels until there are at least ``wanted``; each is a check of
        its own, whichever of them torch goes on to ask. An answered bisection step is followed by the one step its
        ``answer`` selects (where that is known), not by both halves."""
        ahead: list[Question] = []
        seen: set[Question] = set()
        level = self.next_questions()
        while level:
            fresh = [q for q in dict.fromkeys(level) if q not in seen]
            seen.update(fresh)
            ahead += [q for q in fresh if not answered(q)]
            if len(ahead) >= wanted:
                break
            following = [q.next_questions() if not answered(q) else q.after(answer(q)) for q in fresh]
            level = [n for successors in following for n in successors if n not in seen]
        return ahead


def stages_before_inductor() -> list[Question]:
    """The stages torch's bisector asks about before Inductor's, in its order (``eager``, ``aot_eager``, ...): each
    needs a check unless the fault is found before it, and none needs anything the diagnosis finds first."""
    from torch._inductor.compiler_bisector import BACKENDS

    return [Question(backend) for backend in BACKENDS if backend != "inductor"]


def _debug_info_file(backend: str, subsystem: str) -> str:
    from torch._inductor.compiler_bisector import CompilerBisector

    return os.path.join(CompilerBisector.get_dir(), backend, f"{subsystem}_call_counter_debug_info.txt")


def applications_seen(backend: str, subsystem: str, low: int, high: int) -> list[str]:
    """What this process's bisector recorded of each application of ``subsystem`` numbered ``low``..``high`` in
    its last check (``"12=relu_3"`` lines; a lowering's node): in a file of its state since torch 2.12, in the
    module's ``call_counter_debug_info`` before (cleared with the counters, so it never left the process)."""
    from torch._inductor import compiler_bisector

    kept = getattr(compiler_bisector, "call_counter_debug_info", None)
    if isinstance(kept, dict):  # torch < 2.12 records every application in range: keep the last steps' alone
        return [f"{n}={kept[n]}\n" for n in sorted(kept) if low <= n <= high] if high - low <= 2 else []
    return compiler_bisector.CompilerBisector.read_lines_from_file(_debug_info_file(backend, subsystem))


def remember_applications(backend: str, subsystem: str, lines: list[str]) -> None:
    """Record another process's ``applications_seen`` where this process's bisector reads its result."""
    from torch._inductor import compiler_bisector

    kept = getattr(compiler_bisector, "call_counter_debug_info", None)
    if isinstance(kept, dict):
        for line in lines:
            number, _, info = line.strip().partition("=")
            kept[int(number)] = info
        return
    compiler_bisector.CompilerBisector.write_lines_to_file(_debug_info_file(backend, subsystem), lines, append=True)


def reset_counters() -> None:
    """Clear the bisector's per-run application counters, as ``do_bisect`` does before each question (a
    ``CompilerBisector`` class method since torch 2.12, a module function before)."""
    from torch._inductor import compiler_bisector

    reset = getattr(compiler_bisector.CompilerBisector, "reset_counters", None)
    (reset or compiler_bisector.reset_counters)()


def answer_here(question: Question, check: Callable[[], bool | None], scratch: str) -> dict[str, Any]:
    """Run ``check`` under a bisector state of this process's own, set to ``question``; what the bisector's
    files learnt that the asking process needs (the range found, the applications' debug info)."""
    import shutil
    import tempfile

    from torch._inductor.compiler_bisector import CompilerBisector

    from ..compile.failures import first_line

    state = tempfile.mkdtemp(prefix="bisect-", dir=scratch)
    CompilerBisector.in_process_cache, CompilerBisector.bisection_enabled = state, True
    answer: dict[str, Any] = {"pid": os.getpid()}
    start = time.monotonic()
    try:
        backend, subsystem = question.backend, question.subsystem
        try:  # a question this state cannot be set to is answered with its error, and the helper serves on
            CompilerBisector.update_bisect_status(backend, subsystem or "")
            if subsystem is not None and question.run_state is not None:
                CompilerBisector.update_run_state(
                    backend, CompilerBisector.get_subsystem_object(backend, subsystem), question.run_state
                )
                if question.run_state == "bisect":
                    CompilerBisector.update_bisect_range(backend, subsystem, question.low, question.high)  # type: ignore[arg-type]
            reset_counters()
            with compile_parts(answer):
                answer["failing"] = check()
        except BaseException as error:
            answer["failing"], answer["error"] = None, first_line(error)
        if subsystem is not None and question.run_state == "find_max_bounds" and answer.get("error") is None:
            try:
                answer["range"] = list(CompilerBisector.get_bisect_range(backend, subsystem))
            except RuntimeError:  # nothing was applied: the asking process asks it, as torch would have
                answer["failing"], answer["error"] = None, f"no application of {subsystem} was counted"
        if subsystem is not None and question.run_state == "bisect":
            answer["debug_info"] = applications_seen(backend, subsystem, question.low, question.high)  # type: ignore[arg-type]
    finally:
        CompilerBisector.in_process_cache, CompilerBisector.bisection_enabled = None, False
        shutil.rmtree(state, ignore_errors=True)
    answer["seconds"] = round(time.monotonic() - start, 2)
    return answer
