"""The bisector's questions answered at the least cost, in torch's order: ``CompilerBisector.do_bisect`` asks them
one by one (``stage.find_stage``) and ``Answers`` answers each

- from the item's own result (the inductor stage fails: the item has just failed there),
- without compiling, where the check cannot change the answer (``skips``: the CUDA-graph switch of a template
  with no CUDA graphs, the random-op fallback of a graph with no random operators, the layout switch of a graph
  without convolutions, precision casts of a graph without float16 or bfloat16, stride padding on the CPU),
- else by a check in the asking process, while helper processes (``helper_main``), each with a bisector state of
  its own set to its question's, answer the questions torch may ask next (the later stages, the later subsystems'
  switches, both halves of a bisection step, and their halves where there are more helpers than halves); an
  answer a helper has, or is working on, is taken from it.

torch still asks in its order and stops at its first answer, so the answer is the serial one; the processes in
all are at most ``DiagnosisRequest.processes`` and the usable CPUs.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..compile.phase_times import PARTS, compile_parts
from .steplog import StepLog

HELPER_BOOT = "import sys; from pytest_inductor_templates.diagnose.bisect import helper_main; helper_main(sys.argv[1])"
RANDOM_SUBSYSTEM = "inductor_fallback_random"
CUDAGRAPHS_SUBSYSTEM = "cudagraphs"
PADDING_SUBSYSTEM = "inductor_comprehensive_padding"
LAYOUT_SUBSYSTEM = "inductor_layout_optimization"
CASTS_SUBSYSTEM = "inductor_emulate_precision_casts"


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
            middle = (self.low + self.high) // 2
            halves = [(self.low, middle), (middle + 1, self.high)]
            return [Question(self.backend, self.subsystem, "bisect", a, b) for a, b in halves if a < b]
        if self.run_state != "test_disable":
            return []
        subsystems = BACKENDS[self.backend]
        names = [s.name for s in subsystems]
        later = [Question(self.backend, n, "test_disable") for n in names[names.index(self.subsystem) + 1 :]]
        this = subsystems[names.index(self.subsystem)]
        if not isinstance(this, BisectSubsystem) or isinstance(this, BinarySubsystem):  # an on/off switch: no count
            return later
        return [*later, Question(self.backend, self.subsystem, "find_max_bounds")]

    def questions_ahead(self, wanted: int, answered: Callable[[Question], bool] = lambda q: False) -> list[Question]:
        """The questions torch may ask after this one that need a check (not ``answered`` already or without one),
        level by level (the next ones, then theirs: a bisection step's halves, then their halves; after the
        subsystems' switches, their counts), whole levels until there are at least ``wanted``; each is a check of
        its own, whichever of them torch goes on to ask."""
        ahead: list[Question] = []
        seen: set[Question] = set()
        level = self.next_questions()
        while level:
            fresh = [q for q in dict.fromkeys(level) if q not in seen]
            seen.update(fresh)
            ahead += [q for q in fresh if not answered(q)]
            if len(ahead) >= wanted:
                break
            # an answered question's own successors follow its answer, which is known: not guessed at
            level = [n for q in fresh if not answered(q) for n in q.next_questions() if n not in seen]
        return ahead


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


class Helpers:
    """Helper processes of the diagnosis, each answering one question at a time with its own bisector state."""

    def __init__(self, work: Path, count: int, log: StepLog, counts: Any, boot: str = HELPER_BOOT) -> None:
        self.log = log
        self.counts = counts  # drawn.Counts of the asking process: every helper's work is added to it
        self.processes: list[subprocess.Popen[bytes]] = []
        self.errors: dict[int, Path] = {}  # each helper's stderr, read when it ends
        for number in range(count):
            errors = work / f"helper-{number}.txt"
            with open(errors, "wb") as sink:
                process = subprocess.Popen(
                    [sys.executable, "-c", boot, str(work)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink
                )
            self.processes.append(process)
            self.errors[process.pid] = errors
        self.idle: list[subprocess.Popen[bytes]] = []
        self.starting = list(self.processes)
        self.running: dict[int, tuple[subprocess.Popen[bytes], Question]] = {}
        self.queue: list[Question] = []
        self.answers: dict[Question, dict[str, Any]] = {}
        self._uncounted: list[dict[str, int]] = []  # answers' counts taken in while serving, added by the asker
        self._lock = threading.RLock()  # the asker's thread and the serving thread take in answers one at a time

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """While the asking process checks a question itself: a thread takes in the helpers' answers and hands each
        helper that finished the next queued question, so that none idles for the length of that check (the
        asker touches the helpers only between its checks)."""
        stop, failed = threading.Event(), []

        def pump() -> None:
            try:
                while not stop.is_set():
                    if not self._read(0.1):  # no helper is starting or on a question: nothing to take in yet
                        stop.wait(0.1)
            except Exception as error:  # raised again in the asker, where an error of reading helpers is handled
                failed.append(error)

        thread = threading.Thread(target=pump, name="diagnosis-helpers", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self._count()
        if failed:
            raise failed[0]

    def _count(self) -> None:
        """Add the answers' counts taken in so far to the asking process's (in its own thread)."""
        while self._uncounted:
            self.counts.add(self._uncounted.pop(0))

    def wait_ready(self) -> None:
        """Until every helper has started (or ended), for a caller that would rather wait than check alone."""
        while self.starting:
            self._read(5.0)

    def offer(self, questions: list[Question]) -> None:
        """Queue ``questions`` (in order) for idle helpers, instead of what was queued before: those may no
        longer be asked."""
        with self._lock:
            self._read(0.0)
            self._count()
            done = {q for _, q in self.running.values()} | set(self.answers)
            self.queue = [q for q in dict.fromkeys(questions) if q not in done]
            self._dispatch()

    def take(self, question: Question) -> dict[str, Any] | None:
        """The helpers' answer to ``question``, waited for when one of them is on it; None when none is (then
        it is dropped from their queue: the asking process answers it)."""
        self._read(0.0)
        with self._lock:
            if question in self.queue:
                self.queue.remove(question)
        while question not in self.answers and any(q == question for _, q in self.running.values()):
            self._read(5.0)
        self._count()
        return self.answers.get(question)

    def _dispatch(self) -> None:
        while self.idle and self.queue:
            helper, question = self.idle.pop(), self.queue.pop(0)
            assert helper.stdin is not None
            try:
                helper.stdin.write((json.dumps(asdict(question)) + "\n").encode())
                helper.stdin.flush()
            except OSError:  # it ended: it is not used again
                self.queue.insert(0, question)
                continue
            self.running[helper.pid] = (helper, question)

    def _read(self, timeout: float) -> bool:
        """Take in what the helpers have said within ``timeout`` seconds: ready, or an answer. False when none was
        starting or on a question."""
        with self._lock:
            return self._take_in(timeout)

    def _take_in(self, timeout: float) -> bool:
        waiting = {p.stdout.fileno(): p for p in [*self.starting, *(h for h, _ in self.running.values())]}  # type: ignore[union-attr]
        if not waiting:
            return False
        ready, _, _ = select.select(list(waiting), [], [], timeout)
        for fd in ready:
            helper = waiting[fd]
            assert helper.stdout is not None
            line = helper.stdout.readline()
            if helper in self.starting:
                self.starting.remove(helper)
                if line:
                    self.idle.append(helper)
                    self.log.write("helper", pid=helper.pid, **json.loads(line))
                else:
                    self._ended(helper, None)
                continue
            _, question = self.running.pop(helper.pid)
            if not line:  # the helper died: its question is answered elsewhere (by the asking process at least)
                self._ended(helper, question)
                continue
            answer = json.loads(line)
            self._uncounted.append(answer.pop("counts", {}))
            self.answers[question] = answer
            self.idle.append(helper)
        self._dispatch()
        return True

    def _ended(self, helper: subprocess.Popen[bytes], question: Question | None) -> None:
        """Log a helper that ended, with the last line it wrote to stderr (why), and the question it was on."""
        lines = self.errors[helper.pid].read_text(errors="replace").strip().splitlines()
        why = lines[-1].strip()[:300] if lines else "it wrote nothing to stderr"  # a traceback's "Error: message"
        asked = asdict(question) if question is not None else None
        self.log.write("helper", pid=helper.pid, ready=False, ended=helper.wait(), error=why, question=asked)

    def close(self) -> None:
        self._count()
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.wait()


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
    ) -> None:
        self.check = check  # the check in this process, under the bisector's state here
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

    def _settled(self, question: Question) -> bool:
        """Whether a helper asked ``question`` would be wasted: its answer is known (here, from a helper, or without
        a check), or it is the count of a switch known not to fix the fault (torch counts only after one that does;
        a check that could not run counts as still failing)."""
        helpers = self.helpers.answers if self.helpers is not None else {}
        if question in self.known or question in helpers or self._free(question) is not None:
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
        if self.helpers is not None:
            self.helpers.offer(question.questions_ahead(len(self.helpers.processes), self._settled))
            answer = self.helpers.take(question)
        if answer is not None and answer.get("error") is not None:  # the helper's check could not run there:
            self.log.write("helper", pid=answer.get("pid"), error=answer["error"], question=asdict(question))
            answer = None  # asked here, where the serial order would have asked it
        if answer is None:
            return self._here(question, where)
        if answer.get("range") is not None:  # find_max_bounds: the range the helper's compile counted
            CompilerBisector.update_bisect_range(question.backend, question.subsystem, *answer["range"])
        if answer.get("debug_info"):  # the last bisection steps: what each application was
            remember_applications(question.backend, question.subsystem, answer["debug_info"])  # type: ignore[arg-type]
        fields = {k: answer.get(k) for k in ("seconds", "pid", *PARTS, "kernels") if answer.get(k) is not None}
        self.log.write("bisect_check", **where, failing=answer.get("failing"), **fields)
        return answer.get("failing")

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


def private_stdout() -> Any:
    """A copy of stdout for the replies; stdout itself then goes to stderr (what imports and compiles print)."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return replies


def serve(check: Callable[[Question], bool | None], counts: Any, scratch: str, replies: Any) -> None:
    """Answer questions from stdin, one JSON line each, on ``replies``: ready first, then each answer with what
    it cost."""
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in sys.stdin:
        question = Question(**json.loads(line))
        before = dict(asdict(counts))
        answer = answer_here(question, lambda q=question: check(q), scratch)
        answer["counts"] = {k: v - before[k] for k, v in asdict(counts).items()}
        replies.write(json.dumps(answer) + "\n")
        replies.flush()


def helper_main(work: str) -> None:
    """A helper process: set up as the diagnosis's child is (``child.helper_session``), then ``serve``."""
    from .child import helper_session

    replies = private_stdout()
    with helper_session(Path(work)) as (check, counts):
        serve(check, counts, work, replies)
