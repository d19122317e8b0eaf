"""The diagnosis's helper processes: the pool the asking process hands questions to (``Helpers``), the one kept
for the repro's check once the stage is known (``SpareHelper``), and each helper's side (``helper_main``: set up as
the diagnosis's child is, then ``serve``: one JSON question, or a repro to check, a line in, one answer a line
out)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import cancel
from .forked import ForkedProcess
from .inner_graph import from_the_graph
from .questions import Question, answer_here
from .repro_step import Checked
from .steplog import StepLog

HELPER_BOOT = "import sys; from pytest_inductor_templates.diagnose.helpers import helper_main; helper_main(sys.argv[1])"


class Helpers:
    """Helper processes of the diagnosis, each answering one question at a time with its own bisector state."""

    def __init__(
        self, work: Path, count: int, log: StepLog, counts: Any, boot: str = HELPER_BOOT, fork: bool = False
    ) -> None:
        """``count`` helpers running the code ``boot`` (as ``python -c boot WORK``): each a fresh Python, or with
        ``fork`` forked from this process (which has imported torch and Inductor, and not touched the device)."""
        self.log = log
        self.counts = counts  # drawn.Counts of the asking process: every helper's work is added to it
        self.processes: list[Any] = []  # subprocess.Popen, or forked.ForkedProcess (the same interface)
        self.errors: dict[int, Path] = {}  # each helper's stderr, read when it ends
        for number in range(count):
            errors = work / f"helper-{number}.txt"
            if fork:
                inherited = [fd for helper in self.processes for fd in helper.descriptors()]
                process: Any = ForkedProcess(lambda: run_code(boot, work), errors, inherited)
            else:
                with open(errors, "wb") as sink:
                    process = subprocess.Popen(
                        [sys.executable, "-c", boot, str(work)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=sink,
                    )  # fmt: skip
            self.processes.append(process)
            self.errors[process.pid] = errors
        self.idle: list[Any] = []
        self.starting = list(self.processes)
        self.running: dict[int, tuple[Any, Question]] = {}
        self.queue: list[Question] = []
        self.for_holder: Question | None = None  # a queued lowering step that waits for a helper holding a kept graph
        self.answers: dict[Question, dict[str, Any]] = {}
        self.holding: set[int] = set()  # helpers whose last answer said they hold a kept graph standing for the model
        self.cancelling: set[int] = set()  # helpers told to stop the question they are on
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

    def offer(self, questions: list[Question], for_holder: Question | None = None) -> None:
        """Queue ``questions`` (in order) for idle helpers, instead of what was queued before: those may no
        longer be asked. ``for_holder`` (one of them) goes only to a helper holding a kept graph, and waits in the
        queue while every such helper is on another question."""
        with self._lock:
            self._read(0.0, dispatch=False)  # a helper that has just finished takes from the new queue, not the old
            self._count()
            done = {q for _, q in self.running.values()} | set(self.answers)
            self.queue = [q for q in dict.fromkeys(questions) if q not in done]
            self.for_holder = for_holder
            self._dispatch()

    def holding_graph(self) -> bool:
        """Whether a helper holds a kept graph standing for the model (its lowering steps are quick) and is idle, or
        on a lowering step from it."""
        with self._lock:
            self._read(0.0, dispatch=False)
            return any(helper.pid in self.holding for helper in self.idle) or self._holder_busy()

    def holders_on(self) -> list[Question]:
        """The questions the helpers holding a kept graph are on (none where every holder is idle, or none holds)."""
        with self._lock:
            return [question for pid, (_, question) in self.running.items() if pid in self.holding]

    def _holder_busy(self) -> bool:
        """Whether a helper holding a kept graph is on a lowering step from it (seconds: worth waiting for, where a
        check of the whole model here takes two or three times as long; a holder on another question is not)."""
        return any(from_the_graph(question) for question in self.holders_on())

    def cancel_unless(self, wanted: Callable[[Question], bool]) -> None:
        """Stop each helper on a question ``wanted`` rejects (torch can no longer ask it: on opus-mt one bisection step
        of a branch torch had left held a helper for 34 s, while two more helpers finished steps of that branch and the
        step torch asked waited), and drop such questions from the queue; each stopped helper says so and takes the
        next question. The signal is sent again at each look at the helpers until the helper replies (one that arrives
        before its check can be stopped is dropped there)."""
        with self._lock:
            self.queue = [q for q in self.queue if wanted(q)]
            if self.for_holder is not None and not wanted(self.for_holder):
                self.for_holder = None
            self.cancelling |= {pid for pid, (_, question) in self.running.items() if not wanted(question)}
            self._signal_cancels()

    def _signal_cancels(self) -> None:
        if cancel.SIGNAL is None:
            return
        for pid in self.cancelling & set(self.running):  # a reply not read yet: it cannot be on another question
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, cancel.SIGNAL)

    def answered(self, question: Question) -> dict[str, Any] | None:
        """The helpers' answer to ``question`` if one is in (taken in now), without waiting; else None. It leaves
        their queue either way: the asking process answers it now (with this, an implied answer, or a check)."""
        self._read(0.0, dispatch=False)
        with self._lock:
            if question in self.queue:
                self.queue.remove(question)
        self._count()
        return self.answers.get(question)

    def take(
        self, question: Question, implied: Callable[[], dict[str, Any] | None] = lambda: None
    ) -> dict[str, Any] | None:
        """The helpers' answer to ``question``, waited for while one of them is on it (or, for the question kept for
        a holder, while it waits in the queue for a holder on a lowering step), or what ``implied`` makes of the
        answers in (before or while waiting: a helper on it goes on, its answer kept); None when neither is (then it
        is dropped from their queue: the asking process answers it)."""
        self._read(0.0)
        with self._lock:
            if question in self.queue and question != self.for_holder:
                self.queue.remove(question)
        while question not in self.answers:
            if (settled := implied()) is not None:
                self._drop(question)
                self._count()
                return settled
            with self._lock:
                on_it = any(q == question for _, q in self.running.values())
                if not on_it and not (question in self.queue and self._holder_busy()):
                    self._drop(question)
                    break
                # returns as soon as any helper answers; the one that answers this question takes from the queue the
                # next offer makes (what torch asks next first), not from this one (a half of this step: a guess)
                self._read(5.0, dispatch=False)
                if question not in self.answers:
                    self._dispatch()
        self._count()
        return self.answers.get(question)

    def _drop(self, question: Question) -> None:
        """``question`` out of the queue: the asking process answers it."""
        with self._lock:
            if question in self.queue:
                self.queue.remove(question)

    def _dispatch(self) -> None:
        """Each queued question, in order, to an idle helper: a lowering step to one holding a kept graph where one
        is idle, any other question to one holding none where one is idle (keeping the holders for those steps);
        the question kept for a holder (``offer``) is passed over while every holder is on another question."""
        index = 0
        while self.idle and index < len(self.queue):
            question = self.queue[index]
            holders = [h for h in self.idle if h.pid in self.holding]
            if question == self.for_holder and not holders and self._holder_busy():
                index += 1
                continue
            wanted = holders if from_the_graph(question) else [h for h in self.idle if h.pid not in self.holding]
            helper = wanted[0] if wanted else self.idle[-1]
            self.idle.remove(helper)
            assert helper.stdin is not None
            try:
                helper.stdin.write((json.dumps(asdict(question)) + "\n").encode())
                helper.stdin.flush()
            except OSError:  # it ended: it is not used again
                continue
            self.queue.pop(index)
            self.running[helper.pid] = (helper, question)

    def _read(self, timeout: float, dispatch: bool = True) -> bool:
        """Take in what the helpers have said within ``timeout`` seconds: ready, or an answer; then, with
        ``dispatch``, hand the queue's questions to the helpers now idle. False when none was starting or on a
        question."""
        with self._lock:
            return self._take_in(timeout, dispatch)

    def _take_in(self, timeout: float, dispatch: bool) -> bool:
        self._signal_cancels()
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
            self.cancelling.discard(helper.pid)
            cancelled = answer.pop("cancelled", False)
            if answer.pop("holds_graph", False) and (cancelled or not answer.get("error")):  # one whose check errs
                self.holding.add(helper.pid)  # is not asked first
            else:
                self.holding.discard(helper.pid)
            if cancelled:  # stopped on the way: no answer
                self.log.write("helper_cancelled", pid=helper.pid, **asdict(question), seconds=answer.get("seconds"))
                self.idle.append(helper)
                continue
            self.answers[question] = answer
            # every answer as it comes, those torch never asks for too (its other branch): where the helpers' time went
            self.log.write(
                "helper_answer", pid=helper.pid, **asdict(question), failing=answer.get("failing"),
                seconds=answer.get("seconds"), error=answer.get("error"),
            )  # fmt: skip
            self.idle.append(helper)
        if dispatch:
            self._dispatch()
        return True

    def _ended(self, helper: Any, question: Question | None) -> None:
        """Log a helper that ended, with the last line it wrote to stderr (why), and the question it was on."""
        lines = self.errors[helper.pid].read_text(errors="replace").strip().splitlines()
        why = lines[-1].strip()[:300] if lines else "it wrote nothing to stderr"  # a traceback's "Error: message"
        asked = asdict(question) if question is not None else None
        self.log.write("helper", pid=helper.pid, ready=False, ended=helper.wait(), error=why, question=asked)

    def keep_one_idle(self) -> SpareHelper | None:
        """End every helper but one idle one (one on a question would answer that first), kept for the repro's
        check; None where none is idle."""
        with self._lock:
            self._read(0.0)
            self._count()
            kept = self.idle[0] if self.idle else None
            self._end(kept)
            self.idle, self.starting, self.running, self.queue = [], [], {}, []
        return SpareHelper(kept) if kept is not None else None

    def close(self) -> None:
        self._count()
        self._end()

    def _end(self, kept: Any = None) -> None:
        """Every helper process but ``kept`` killed and waited for."""
        for process in self.processes:
            if process is kept:
                continue
            if process.poll() is None:
                process.kill()
            process.wait()


@dataclass
class SpareHelper:
    """A helper kept once the stage is known: it checks the first graph's repro while the asking process goes on."""

    process: Any  # subprocess.Popen, or forked.ForkedProcess

    def ask(self, repro: Path) -> bool:
        """Hand it the written repro to check; False where it has ended."""
        assert self.process.stdin is not None
        try:
            self.process.stdin.write((json.dumps({"repro": str(repro)}) + "\n").encode())
            self.process.stdin.flush()
        except OSError:
            return False
        return True

    def answer(self) -> Checked | None:
        """Its check, waited for; None where it ended or its check raised (the asking process checks it then)."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        try:
            answer = json.loads(line) if line else {}
        except json.JSONDecodeError:
            return None
        if "code" not in answer:
            return None
        return Checked(answer["code"], answer["message"], answer.get("pid"), answer.get("seconds", 0.0))


def private_stdout() -> Any:
    """A copy of stdout for the replies; stdout itself then goes to stderr (what imports and compiles print)."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return replies


def serve(
    check: Callable[[Question], bool | None],
    counts: Any,
    scratch: str,
    replies: Any,
    holds_graph: Callable[[], bool] = lambda: False,
    check_repro: Callable[[Path], Checked] | None = None,
) -> None:
    """Answer questions from stdin, one JSON line each, on ``replies``: ready first, then each answer with what
    it cost and whether this process now holds a kept graph standing for the model (``holds_graph``), or that it
    was stopped (``cancel``); a line naming a written repro (``{"repro": path}``) is
    answered with ``check_repro``'s check of it."""
    cancel.arm()
    replies.write(json.dumps({"ready": True}) + "\n")
    replies.flush()
    for line in sys.stdin:
        message = json.loads(line)
        if "repro" in message:
            replies.write(json.dumps(_repro_answer(check_repro, Path(message["repro"]))) + "\n")
            replies.flush()
            continue
        question = Question(**message)
        before = dict(asdict(counts))
        cancel.begin()
        answer = answer_here(question, lambda q=question: check(q), scratch)
        answer["counts"] = {k: v - before[k] for k, v in asdict(counts).items()}
        answer["cancelled"] = cancel.was_cancelled()
        try:
            answer["holds_graph"] = bool(holds_graph())
        except Exception:  # the answer stands; this helper is just not asked lowering steps first
            answer["holds_graph"] = False
        replies.write(json.dumps(answer) + "\n")
        replies.flush()


def _repro_answer(check_repro: Callable[[Path], Checked] | None, repro: Path) -> dict[str, Any]:
    """The repro's check as a reply: its exit code, message, process and seconds; or the error that stopped it."""
    from ..compile.failures import first_line

    if check_repro is None:
        return {"error": "this helper checks no repro"}
    try:
        checked = check_repro(repro)
    except Exception as error:
        return {"error": first_line(error)}
    return {"code": checked.code, "message": checked.message, "pid": os.getpid(), "seconds": checked.seconds}


def run_code(boot: str, work: Path) -> None:
    """Run ``boot`` in this (forked) process as ``python -c boot WORK`` would."""
    sys.argv = ["-c", str(work)]
    exec(compile(boot, "<helper>", "exec"), {"__name__": "__main__"})


def helper_main(work: str) -> None:
    """A helper process: set up as the diagnosis's child is (``child.helper_session``), then ``serve``."""
    from .child import helper_session

    replies = private_stdout()
    with helper_session(Path(work)) as (check, counts, holds_graph, check_repro):
        serve(check, counts, work, replies, holds_graph, check_repro)
