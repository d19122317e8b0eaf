"""A diagnosis's bisector checks in several processes choose what torch's serial order chooses; a run's
diagnoses stay within its cap and budget across pytest-xdist's workers, and one stopped at its budget stops
cleanly.

The bisection runs torch's real ``CompilerBisector`` over a planted fault that compiles nothing (a check that
counts "lowerings" as Inductor's lowering does, through ``disable_subsystem``), here in one process and in real
helper processes, each with its own bisector state. The run-level tests are real ``pytest -n 2`` runs of two
failing user tests under a cheap backend of the test's conftest.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from inner_runs import run_pytest_warm, run_python_warm
from test_diagnose_judged import BLOCK, PLANTED

from conftest import QUIET, made_once_value
from pytest_inductor_templates.runs.files import load

FAKE_FAULT = """
from torch._inductor.compiler_bisector import CompilerBisector

BAD = 26  # the application of "lowerings" that is wrong, of 40


def fails(question=None):
    \"\"\"Fails from the inductor stage on while the lowering application BAD is enabled.\"\"\"
    if CompilerBisector.get_backend() != "inductor":
        return False
    wrong = False
    for number in range(40):
        off = CompilerBisector.disable_subsystem("inductor", "lowerings", lambda n=number: f"op{n}")
        wrong = wrong or (number == BAD and not off)
    return wrong
"""

HELPER = """
import sys
sys.path.insert(0, {here!r})
from fake_fault import fails
from pytest_inductor_templates.diagnose.helpers import private_stdout, serve
from pytest_inductor_templates.diagnose.drawn import Counts

replies = private_stdout()
serve(fails, Counts(), sys.argv[1], replies)
"""

BISECT = """
import json, sys
from pathlib import Path
sys.path.insert(0, {here!r})
from fake_fault import fails
from pytest_inductor_templates.diagnose.bisect import Answers
from pytest_inductor_templates.diagnose.helpers import Helpers
from pytest_inductor_templates.diagnose.drawn import Counts
from pytest_inductor_templates.diagnose.stage import find_stage
from pytest_inductor_templates.diagnose.steplog import StepLog, read_log

work = Path({work!r})
log, counts = StepLog(work / "steps.jsonl"), Counts()
helpers = Helpers(work, {helpers}, log, counts, boot=open({boot!r}).read(), fork=True) if {helpers} else None


def here():  # this process's checks: the first one waits for the helper, so that it takes part (an event, no sleep)
    if helpers is not None:
        helpers.wait_ready()
    return fails()


found = find_stage(Answers(here, log, {{}}, "the item failed", helpers, counts), log, str(work))
if helpers is not None:
    helpers.close()
checks = [r for r in read_log(work / "steps.jsonl") if r["step"] == "bisect_check"]
pids = sorted({{r["pid"] for r in checks if r.get("pid")}})
asked = [[r["backend"], r["subsystem"], r["run_state"], r.get("low"), r.get("high")] for r in checks]
ended = [r for r in read_log(work / "steps.jsonl") if r["step"] == "helper" and r.get("error")]
implied = [[r.get("low"), r.get("high"), r["implied_by"], r.get("pid")] for r in checks if r.get("implied_by")]
answered = [[r["pid"], r["run_state"], r.get("low"), r.get("high")] for r in read_log(work / "steps.jsonl")
            if r["step"] == "helper_answer"]
errors = [[r["run_state"], r.get("error")] for r in read_log(work / "steps.jsonl")
          if r["step"] == "helper_answer" and r.get("error")]
taken = [[r["pid"], r["run_state"], r.get("low"), r.get("high")] for r in checks if r.get("pid")]
cancelled = [[r.get("low"), r.get("high"), r["seconds"]] for r in read_log(work / "steps.jsonl")
             if r["step"] == "helper_cancelled"]
print("RESULT " + json.dumps({{"stage": found.describe(), "pids": pids, "asked": asked, "ended": ended,
                              "implied": implied, "answered": answered, "taken": taken, "errors": errors,
                              "cancelled": cancelled}}))
"""


def test_a_count_torch_will_not_ask_is_not_offered_to_the_helpers() -> None:
    """torch counts a subsystem's applications only after its switch fixed the fault: once that switch's answer is
    known to be "still fails" (here, from a helper, or a check that could not run), its count is settled and no
    helper is offered it (with helpers answering the switches ahead of torch, idle helpers took such counts while
    the real one waited for the asker); an unknown or fixing switch's count stays on offer."""
    from types import SimpleNamespace

    from pytest_inductor_templates.diagnose.bisect import Answers
    from pytest_inductor_templates.diagnose.questions import Question

    def count(name: str) -> Question:
        return Question("inductor", name, "find_max_bounds")

    def switch(name: str) -> Question:
        return Question("inductor", name, "test_disable")

    helpers = SimpleNamespace(
        answers={switch("joint_graph_passes"): {"failing": True}, switch("lowerings"): {"failing": False}}
    )
    answers = Answers(lambda: True, None, {"cudagraphs": "no CUDA graphs"}, None, helpers, None)  # type: ignore[arg-type]
    answers.known[switch("post_grad_passes")] = None  # could not run: counted as still failing
    assert answers._settled(count("joint_graph_passes")) and answers._settled(count("post_grad_passes"))
    assert answers._settled(count("cudagraphs")) and answers._settled(switch("joint_graph_passes"))
    assert not answers._settled(count("lowerings")) and not answers._settled(count("pre_grad_passes"))


def test_an_answer_in_hand_offers_the_helpers_nothing() -> None:
    """A bisection step a helper has answered (or an answer implies) is taken as it is: offering the helpers the
    questions after it would hand an idle helper torch's other branch, which torch does not take (on opus-mt the
    asker walked through two answered steps and its idle helpers spent 12 s checks on their other halves while the
    step torch asked next waited); a step not yet answered offers the helpers the ones after it."""
    import contextlib
    from types import SimpleNamespace

    from pytest_inductor_templates.diagnose.bisect import Answers
    from pytest_inductor_templates.diagnose.drawn import Counts
    from pytest_inductor_templates.diagnose.questions import Question

    def step(low: int, high: int) -> Question:
        return Question("inductor", "lowerings", "bisect", low, high)

    answered = {step(low, high): {"failing": True, "pid": 1} for low, high in ((0, 1015), (0, 507), (32, 63))}
    offered: list[list[Question]] = []
    helpers = SimpleNamespace(
        processes=[1, 2, 3],
        answers=answered,
        answered=answered.get,
        offer=lambda questions, for_holder=None: offered.append(questions),
        take=lambda question, implied: answered.get(question) or implied(),
        serving=contextlib.nullcontext,
        holding_graph=lambda: False,
        holders_on=lambda: [],
        cancel_unless=lambda wanted: None,
    )
    log = SimpleNamespace(write=lambda *args, **fields: None)
    answers = Answers(lambda: False, log, {}, None, helpers, Counts())  # type: ignore[arg-type]
    assert answers._answer(step(0, 1015)) is True and answers._answer(step(0, 507)) is True  # answered
    assert answers._answer(step(0, 253)) is True and answers._answer(step(0, 126)) is True  # implied by (32, 63)
    assert offered == []
    assert answers._answer(step(0, 63)) is False  # neither: offered the steps after it, then checked here
    assert offered == [[step(0, 31), step(0, 15), step(16, 31), step(32, 47)]]  # (32, 63) answered: its next step


def test_a_question_the_asker_answers_now_leaves_the_helpers_queue(tmp_path: Path) -> None:
    """A question looked up in the helpers' answers leaves their queue whether or not an answer is in: the asking
    process answers it now (implied by another answer, or by a check), so no helper should take it later."""
    from pytest_inductor_templates.diagnose.drawn import Counts
    from pytest_inductor_templates.diagnose.helpers import Helpers
    from pytest_inductor_templates.diagnose.questions import Question
    from pytest_inductor_templates.diagnose.steplog import StepLog

    helpers = Helpers(tmp_path, 0, StepLog(tmp_path / "steps.jsonl"), Counts())
    first, second = (Question("inductor", "lowerings", "bisect", low, 63) for low in (0, 32))
    helpers.queue = [first, second]
    assert helpers.answered(first) is None and helpers.queue == [second]


# one helper whose checks are quick and an asking process whose own checks are slow, each logging when its checks ran
SERVED = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {here!r})
from fake_fault import fails
from pytest_inductor_templates.diagnose.bisect import Answers
from pytest_inductor_templates.diagnose.helpers import Helpers
from pytest_inductor_templates.diagnose.drawn import Counts
from pytest_inductor_templates.diagnose.stage import find_stage
from pytest_inductor_templates.diagnose.steplog import StepLog

work = Path({work!r})
log, counts = StepLog(work / "steps.jsonl"), Counts()
helpers = Helpers(work, 1, log, counts, boot=open({boot!r}).read(), fork=True)
own = []


def here():
    helpers.wait_ready()
    start = time.time()
    time.sleep(1.0)
    failing = fails()
    own.append((start, time.time()))
    return failing


find_stage(Answers(here, log, {{}}, "the item failed", helpers, counts), log, str(work))
helpers.close()
started = [float(t) for t in (work / "helper-starts.txt").read_text().split()]
print("RESULT " + json.dumps({{"own": own, "helper": started}}))
"""

QUICK_HELPER = HELPER.replace(
    "serve(fails,",
    "import time\n"
    "def logged(question=None):\n"
    "    open(sys.argv[1] + '/helper-starts.txt', 'a').write(f'{{time.time()}}\\n')\n"
    "    time.sleep(0.05)\n"
    "    return fails(question)\n"
    "serve(logged,",
)


def test_a_helper_that_finished_gets_the_next_question_while_the_asker_checks_its_own(tmp_path: Path) -> None:
    """While the asking process runs a check of its own (slow here: 1 s), a thread hands a helper that answered
    (quickly) the next question queued for the helpers, instead of leaving it idle until the asker's check ends (on
    an H100 two of seven helpers idled through a 21 s round of the subsystems' checks)."""
    import json

    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "fake_fault.py").write_text(FAKE_FAULT)
    (tmp_path / "helper.py").write_text(QUICK_HELPER.format(here=str(tmp_path)))
    code = SERVED.format(here=str(tmp_path), work=str(work), boot=str(tmp_path / "helper.py"))
    done = run_python_warm(tmp_path, code, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    found = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    started = found["helper"]
    # the helper's starts inside each of the asker's own checks: without the hand-off at most the one it was given
    # before the check; with it, a round of questions (the stages after the first, or the subsystems: which one falls
    # inside a check depends on when the helper came up) one after another
    during = [sum(start < t < end for t in started) for start, end in found["own"]]
    assert max(during) >= 2, (found["own"], started)


# helpers that start, then cannot answer their first question, saying why (as a helper whose check cannot run on
# the machine would): one dies (exit 1, its reason on stderr), one's check raises
PLANTED_REASON = "RuntimeError: planted: this helper cannot check"
DIE = f"(sys.stderr.write({PLANTED_REASON!r} + '\\n'), sys.stderr.flush(), __import__('os')._exit(1))"
DYING_HELPER = HELPER.replace("serve(fails,", f"serve(lambda question: {DIE},")
RAISE = "exec('raise RuntimeError(\"planted: this helper cannot check\")')"
RAISING_HELPER = HELPER.replace("serve(fails,", f"serve(lambda question: {RAISE},")
SLOW_HELPER = HELPER.replace("serve(fails,", "serve(slow_then_fails,").replace(
    "replies = private_stdout()",
    """import time
from pytest_inductor_templates.diagnose.cancel import cancellable


def slow_then_fails(question):  # one bisection step takes 2 minutes, where a real check compiles (it may be stopped)
    if (question.low, question.high) == (20, 39):
        with cancellable():
            time.sleep(120)
    return fails(question)


replies = private_stdout()""",
)


def bisect(tmp_path: Path, helpers: int, helper: str = HELPER) -> dict:
    import json

    work = tmp_path / f"work{helpers}"
    work.mkdir()
    (tmp_path / "fake_fault.py").write_text(FAKE_FAULT)
    (tmp_path / "helper.py").write_text(helper.format(here=str(tmp_path)))
    code = BISECT.format(here=str(tmp_path), work=str(work), helpers=helpers, boot=str(tmp_path / "helper.py"))
    done = run_python_warm(tmp_path, code, timeout=600)  # its helpers start as fresh processes
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict:
    """The serial bisection (no helper), which the tests below compare with: made once a session."""
    return made_once_value(tmp_path_factory, worker_id, "diagnose-serial-bisection", lambda root: bisect(root, 0))


@pytest.mark.parametrize("helpers", [1, 3])
def test_checks_in_helper_processes_choose_the_serial_orders_answer(tmp_path: Path, serial: dict, helpers: int) -> None:
    """With helper processes beside the asking one, the later switches and both halves of each bisection step (and,
    with three, the halves' halves) run there, each with its own bisector state: the stage, the lowering and the
    questions torch asked are the serial run's."""
    parallel = bisect(tmp_path, helpers)
    assert serial["stage"] == "inductor / lowerings: op26", serial
    assert parallel["stage"] == serial["stage"]
    assert parallel["asked"] == serial["asked"]  # torch's order, question by question, each step's range too
    steps = [q for q in serial["asked"] if q[2] == "bisect"]
    assert steps and all(isinstance(q[3], int) and isinstance(q[4], int) for q in steps), serial["asked"]
    assert serial["pids"] == [] and len(parallel["pids"]) == helpers, parallel  # every helper answered some
    # every helper answer is logged as it comes (``helper_answer``): those torch took, and any it never asked for
    assert parallel["taken"] and all(step in parallel["answered"] for step in parallel["taken"]), parallel


def test_a_slow_bisection_step_is_settled_by_an_answer_beyond_it(tmp_path: Path, serial: dict) -> None:
    """A helper whose check of one bisection step (the range 20-39, whose midpoint 29 fails) takes two minutes, as
    one range's code generation did on opus-mt: with three helpers the asker does not wait for it. A later step's
    answer (a failing midpoint at or below 29) settles it, as torch's binary search assumes answers are monotone;
    the stage and the questions asked are the serial run's, and the log says which step settled it. Once torch asks
    a step inside that range, the slow helper is stopped (its step can no longer be asked)."""
    found = bisect(tmp_path, 3, SLOW_HELPER)
    assert found["stage"] == serial["stage"] and found["asked"] == serial["asked"], found
    assert len(found["implied"]) == 1, found
    ((low, high, by, pid),) = found["implied"]
    assert (low, high, pid) == (20, 39, None) and by != [20, 39] and (by[0] + by[1]) // 2 <= 29, found["implied"]
    stopped = {(low, high): seconds for low, high, seconds in found["cancelled"]}
    assert stopped.get((20, 39), 120) < 60, found["cancelled"]  # (helpers on other steps of a branch left go too)


@pytest.mark.parametrize("helper", [DYING_HELPER, RAISING_HELPER], ids=["dies", "raises"])
def test_a_helper_that_cannot_answer_is_reported_and_its_question_answered_here(
    tmp_path: Path, helper: str, serial: dict
) -> None:
    """A helper that ends (or whose check raises) at its first question: the asking process answers that
    question and the rest, so the stage and torch's questions are the serial run's, and the log says which helper
    could not answer, how and why."""
    failed = bisect(tmp_path, 1, helper)
    assert failed["stage"] == serial["stage"] and failed["asked"] == serial["asked"], failed
    assert failed["pids"] == []  # no answer came from the helper
    records = failed["ended"]  # a helper that died says so once; one that raises, at each question it was given
    assert records and all(r["error"] == PLANTED_REASON and r["question"]["backend"] for r in records), records
    assert [r.get("ended") for r in records] == ([1] if helper is DYING_HELPER else [None] * len(records)), records


TWO_TESTS = (
    BLOCK
    + """

def test_first(inductor_check):
    torch.manual_seed(0)
    inductor_check(Block().eval(), torch.randn(8, 64))


def test_second(inductor_check):
    torch.manual_seed(1)
    inductor_check(Block().eval(), torch.randn(8, 64))
"""
)


# the planted backend, taking 3 s over each compile: a diagnosis, whose checks each compile, outlasts a 2 s budget
# however fast the machine (without it, a quiet machine can finish the whole diagnosis within 2 s)
SLOW_PLANTED = PLANTED.replace("import torch\n", "import time\n\nimport torch\n", 1).replace(
    "    gm.recompile()\n", "    time.sleep(3)\n    gm.recompile()\n", 1
)


def xdist_run(tmp_path: Path, *options: str, conftest: str = PLANTED) -> tuple[subprocess.CompletedProcess[str], list]:
    """Two failing user tests on two xdist workers, each diagnosed in its worker; their check records."""
    (tmp_path / "test_two.py").write_text(TWO_TESTS)
    (tmp_path / "conftest.py").write_text(conftest)
    args = [
        "test_two.py", "-n", "2", "--inductor-backend=wrong_gelu", "--inductor-diagnose",
        "--inductor-diagnose-processes=1", "--inductor-devices=cpu", "--benchmark-disable",
        "--inductor-results=run.jsonl", "-p", "no:randomly", *QUIET, *options,
    ]  # fmt: skip
    done = run_pytest_warm(tmp_path, *args, timeout=900)
    records = [r for r in load(str(tmp_path / "run.jsonl")).records if r.kind == "check"]
    assert len(records) == 2 and all(r.outcome.value == "accuracy_fail" for r in records), done.stdout[-3000:]
    return done, sorted(records, key=lambda r: (r.diagnosis or "").startswith("not diagnosed"))


@pytest.mark.parametrize(
    ("options", "refused"),
    [
        (
            ("--inductor-diagnose-max=1", "--inductor-diagnose-budget=6"),
            "not diagnosed: --inductor-diagnose-max (1) reached in this run",
        ),
        (
            ("--inductor-diagnose-run-budget=2",),
            "not diagnosed: the run's diagnosis budget (--inductor-diagnose-run-budget 2 s) is spent",
        ),
    ],
    ids=["cap", "run-budget"],
)
def test_a_runs_diagnoses_stay_within_its_cap_and_budget_across_workers(
    tmp_path: Path, options: tuple[str, ...], refused: str
) -> None:
    """Counted in the run's ledger, which both workers share: one of the two failing items is diagnosed, the
    other says why not. Under the run budget the one diagnosis gets the run's 2 s (less than its own 300 s, and
    less than the diagnosis takes: the backend is planted to take 3 s over each compile), reserved before it starts,
    and stops there cleanly with what it found."""
    budget = "--inductor-diagnose-run-budget=2" in options
    done, (diagnosed, other) = xdist_run(tmp_path, *options, conftest=SLOW_PLANTED if budget else PLANTED)
    assert other.diagnosis == refused, done.stdout[-3000:]
    assert diagnosed.diagnosis is not None and not diagnosed.diagnosis.startswith("not diagnosed"), diagnosed
    if budget:
        assert "stopped at the budget of 2s" in diagnosed.diagnosis and diagnosed.diagnosis_seconds is not None
        assert diagnosed.diagnosis_seconds < 2 + 30  # the budget, and the child's start
    assert "1 diagnoses took" in done.stdout


def test_the_bisector_counters_are_reset_on_either_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A class method since torch 2.12, a module function before: on torch 2.11 every helper used to die at its
    first question with an AttributeError (the H200's diagnosis log), and the asking process answered alone."""
    from torch._inductor import compiler_bisector

    from pytest_inductor_templates.diagnose.questions import reset_counters

    compiler_bisector.subsystem_call_counter["lowerings"] = 3
    reset_counters()
    assert not compiler_bisector.subsystem_call_counter
    calls: list[str] = []
    monkeypatch.delattr(compiler_bisector.CompilerBisector, "reset_counters")
    monkeypatch.setattr(compiler_bisector, "reset_counters", lambda: calls.append("module"), raising=False)
    reset_counters()
    assert calls == ["module"]


@pytest.mark.parametrize("kept_in", ["file", "module"])
def test_a_helpers_last_bisection_steps_name_the_application_on_either_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept_in: str
) -> None:
    """What a helper's bisector recorded of the last applications (a lowering's node) reaches the asking process
    where its bisector reads its result: a file of its state since torch 2.12, the module's
    ``call_counter_debug_info`` before, which the counters' reset clears; read from the file alone, a torch 2.11
    helper's answer carried nothing and the diagnosis named the subsystem without its lowering (the H100's)."""
    from torch._inductor import compiler_bisector

    from pytest_inductor_templates.diagnose.questions import applications_seen, remember_applications

    bisector = compiler_bisector.CompilerBisector
    if kept_in == "module":  # torch < 2.12: every application in range kept, whatever the range's width
        monkeypatch.setattr(compiler_bisector, "call_counter_debug_info", {}, raising=False)
        for number in range(4, 9):
            compiler_bisector.call_counter_debug_info[number] = f"relu_{number}"
    monkeypatch.setattr(bisector, "in_process_cache", str(tmp_path / "helper"))
    if kept_in == "file":
        for number in (6, 7):
            bisector.add_call_counter_debug_info("inductor", "lowerings", number, f"relu_{number}")
    seen = applications_seen("inductor", "lowerings", 6, 7)
    assert seen == ["6=relu_6\n", "7=relu_7\n"], seen
    if kept_in == "module":
        assert applications_seen("inductor", "lowerings", 4, 8) == []  # not a last step: nothing to carry
        compiler_bisector.call_counter_debug_info.clear()  # the asking process's reset before its question
    monkeypatch.setattr(bisector, "in_process_cache", str(tmp_path / "asking"))
    remember_applications("inductor", "lowerings", seen)
    if kept_in == "module":
        assert compiler_bisector.call_counter_debug_info == {6: "relu_6", 7: "relu_7"}
    else:
        assert bisector.get_call_counter_debug_info("inductor", "lowerings", 7) == "relu_7"


def test_helpers_beyond_a_steps_halves_are_offered_the_quarters() -> None:
    """A bisection step's helpers get its halves, and, where there are more helpers than halves, the halves'
    halves (torch asks one of each level next), whole levels in order; a range of one application asks nothing."""
    from pytest_inductor_templates.diagnose.questions import Question

    def ranges(questions: list[Question]) -> list[tuple[int | None, int | None]]:
        return [(q.low, q.high) for q in questions]

    step = Question("inductor", "lowerings", "bisect", 0, 15)
    assert ranges(step.questions_ahead(1)) == ranges(step.questions_ahead(2)) == [(0, 7), (8, 15)]
    assert ranges(step.questions_ahead(3)) == [(0, 7), (8, 15), (0, 3), (4, 7), (8, 11), (12, 15)]
    assert len(step.questions_ahead(7)) == 2 + 4 + 8
    assert Question("inductor", "lowerings", "bisect", 4, 5).questions_ahead(3) == []
    # halves answered already (0-7 failing, 8-15 passing): each followed by the one step its answer selects
    known = {(0, 7): True, (8, 15): False}
    answered = step.questions_ahead(2, lambda q: (q.low, q.high) in known, lambda q: known.get((q.low, q.high)))
    assert ranges(answered) == [(0, 3), (12, 15)]


def test_a_switch_s_helpers_are_offered_the_later_switches_then_the_count_of_its_applications() -> None:
    """After a subsystem's switch torch asks the next switch (the fault is not there) or counts the subsystem's
    applications (it is: bisecting it starts there); both are offered ahead, the count last (opus-mt on an H100:
    the child counted the lowerings itself, 9.4 s, while a helper sat idle). A config switch (on or off, nothing to
    count) offers no count: torch never asks it, and its bisector state refuses it."""
    from torch._inductor.compiler_bisector import BACKENDS

    from pytest_inductor_templates.diagnose.questions import Question

    names = [s.name for s in BACKENDS["inductor"]]
    last_but_one = names[-2]
    ahead = Question("inductor", last_but_one, "test_disable").next_questions()
    assert ahead == [
        Question("inductor", names[-1], "test_disable"),
        Question("inductor", last_but_one, "find_max_bounds"),
    ]
    assert Question("inductor", names[0], "test_disable").next_questions()[-1].run_state == "find_max_bounds"
    padding = Question("inductor", "inductor_comprehensive_padding", "test_disable")  # a config switch: no count
    assert [q.subsystem for q in padding.next_questions()] == names[names.index(padding.subsystem) + 1 :]
    assert Question("inductor", "lowerings", "find_max_bounds").next_questions() == []


def test_questions_answered_without_a_check_leave_room_for_the_next_level() -> None:
    """Switches answered without compiling (a config switch that cannot change the answer) do not take a helper's
    place, nor are their counts offered (torch asks a count only after a switch that fixed the fault): with seven
    helpers at the first subsystem's switch, the helpers beyond the switches that need a check are offered the
    subsystems' counts, in torch's order (depth-anything on an H100: two of seven helpers sat idle through the
    subsystems' round; the lowerings' count, 10 s, waited for the round to end)."""
    from torch._inductor.compiler_bisector import BACKENDS

    from pytest_inductor_templates.diagnose.questions import Question

    names = [s.name for s in BACKENDS["inductor"]]
    free = {"inductor_fallback_random", "inductor_emulate_precision_casts", "cudagraphs"}
    first = Question("inductor", names[0], "test_disable")
    ahead = first.questions_ahead(7, lambda q: q.run_state == "test_disable" and q.subsystem in free)
    assert not any(q.subsystem in free for q in ahead), ahead
    counts = [q.subsystem for q in ahead if q.run_state == "find_max_bounds"]
    assert counts == [n for n in names if n in counts] and "lowerings" in counts, ahead  # torch's order
    assert (
        ahead[: len(names) - len(free) - 1]
        == [  # the switches first, in torch's order
            Question("inductor", n, "test_disable") for n in names[1:] if n not in free
        ]
    )
    assert len(first.questions_ahead(7)) == len(names)  # nothing answered: one level fills the helpers


PARTS_OF_A_CHECK = """
import json, tempfile
import torch
from torch._inductor import config
from pytest_inductor_templates.compile.isolation import isolated_compile_state

config.cpp.vec_isa_ok = False  # no vector-ISA probe processes before the first compile: seconds, nothing to test
from pytest_inductor_templates.diagnose.questions import Question, answer_here


def chain(x, scale):  # enough operators that lowering them takes more than the answer's 0.01 s resolution
    for _ in range(40):
        x = (x.relu() * scale).sin()
    return x.sum(dim=0)


def check(scale):  # as a bisector check compiles: in an isolated compile state, which resets Dynamo before and after
    with isolated_compile_state(fresh_cache=True):  # (a graph of its own each: no cache can serve it)
        torch.compile(lambda x: chain(x, scale), backend="inductor")(torch.randn(64, 64))
    return True


answers = [answer_here(Question("inductor"), lambda: check(scale), tempfile.mkdtemp()) for scale in (2.0, 3.0)]
print("RESULT " + json.dumps(answers))
"""


def test_a_checks_answer_says_where_its_compile_spent_its_time(tmp_path: Path) -> None:
    """Each check's answer (and so its ``bisect_check`` line) carries its compile's parts from torch's own timers:
    Dynamo's whole compile, its tracing, AOT autograd, Inductor's whole compile and, inside it, lowering, code
    generation, the kernels' compile or the wait for them, and how many Triton kernels it asked for (an opus-mt check
    of 119 s among checks of 9-13 s on an H100 could not say which part grew). Each of two checks in one process says
    its own, though Dynamo's reset after each clears those timers."""
    import json

    done = run_python_warm(tmp_path, PARTS_OF_A_CHECK, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    answers = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    for answer in answers:
        assert answer["failing"] is True and answer["lowering"] > 0 and answer["codegen"] > 0, answers
        assert answer["kernels"] == 0, answers  # the CPU's kernels are C++, not Triton
        assert answer["kernel_wait"] >= 0 and answer["kernel_compile"] >= 0, answers
        assert answer["lowering"] + answer["codegen"] <= answer["inductor"] <= answer["seconds"], answers
        assert 0 < answer["tracing"] <= answer["seconds"] - answer["inductor"], answers  # Dynamo's part beside it
        assert answer["inductor"] <= answer["aot"] <= answer["dynamo"] - answer["tracing"], answers  # AOT inside
        assert answer["dynamo"] <= answer["seconds"], answers


def test_a_question_the_bisector_state_refuses_is_answered_with_its_error(tmp_path: Path) -> None:
    """A helper asked what its bisector state cannot be set to (a count of a config switch's applications) answers
    with the error and serves on, instead of ending (the asking process then asks it itself)."""
    from torch._inductor.compiler_bisector import CompilerBisector

    from pytest_inductor_templates.diagnose.questions import Question, answer_here

    asked: list[bool] = []
    refused = Question("inductor", "inductor_comprehensive_padding", "find_max_bounds")
    answer = answer_here(refused, lambda: asked.append(True), str(tmp_path))
    assert answer["failing"] is None and answer["error"] and not asked, answer
    assert CompilerBisector.bisection_enabled is False


HOLDING_HELPER = HELPER.replace(
    "serve(fails, Counts(), sys.argv[1], replies)", "serve(fails, Counts(), sys.argv[1], replies, lambda: True)"
)
HANDING_BISECT = BISECT.replace(
    '"the item failed", helpers, counts)', '"the item failed", helpers, counts, holds_graph=lambda: False)'
).replace(
    'print("RESULT " + json.dumps({{"stage": found.describe(),',
    'here = [[r.get("low"), r.get("high"), r.get("holders_on")] for r in checks if r["run_state"] == "bisect"'
    ' and not r.get("pid") and not r.get("implied_by")]\nprint("RESULT " + json.dumps({{"here": here,'
    ' "stage": found.describe(),',
)


def test_every_lowering_step_goes_to_the_helper_holding_a_kept_graph(tmp_path: Path, serial: dict) -> None:
    """The asking process holds no kept graph (its lowering steps would compile the whole model: on opus-mt 10.5-13.8
    s against 4-5 s from a kept graph) and its one helper holds one: a bisection step goes to the helper and is
    waited for where the helper is idle (without the hand-over the asker checks it while the helper takes one of its
    halves) or on a lowering step from its graph (on opus-mt the asker checked one on the whole model in 10.5 s while
    the holder finished a 4.5 s step); a step checked here says what the holder was on (``holders_on``), never a
    lowering step. The stage and the questions asked are the serial run's."""
    import json

    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "fake_fault.py").write_text(FAKE_FAULT)
    (tmp_path / "helper.py").write_text(HOLDING_HELPER.format(here=str(tmp_path)))
    code = HANDING_BISECT.format(here=str(tmp_path), work=str(work), helpers=1, boot=str(tmp_path / "helper.py"))
    done = run_python_warm(tmp_path, code, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    found = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert found["stage"] == serial["stage"] and found["asked"] == serial["asked"], found
    first = next(q for q in found["asked"] if q[2] == "bisect")
    assert first[3:] == [0, 39], found
    for _, _, holders_on in found["here"]:  # checked here only while the holder was on no lowering step (without
        # the wait: three steps here on this fault, two of them while the holder was on a step from its graph)
        assert all(q["run_state"] not in ("find_max_bounds", "bisect") for q in holders_on), found
    if not found["here"]:  # the helper answered each step torch asked and took the next from torch's next question,
        # not a half guessed from the queue of the step before (on this fault two such halves, which torch never asked)
        asked = [q[3:] for q in found["asked"] if q[2] == "bisect"]
        assert all([low, high] in asked for _, state, low, high in found["answered"] if state == "bisect"), found


def test_a_checks_answer_counts_the_garbage_collectors_pauses() -> None:
    """A check during which Python's garbage collector ran over a large heap (as after a big model's compile) says
    how long it paused (``gc``, within the other parts); a check without a collection says 0."""
    import gc

    from pytest_inductor_templates.compile import phase_times

    heap = [[object() for _ in range(10)] for _ in range(100_000)]
    paused: dict = {}
    quiet: dict = {}
    enabled = gc.isenabled()
    gc.disable()  # no collection but the one asked for
    try:
        with phase_times.compile_parts(paused):
            before = phase_times._totals["gc"]  # unrounded: a fast machine collects this heap in a few ms
            gc.collect()
            collected = phase_times._totals["gc"] - before
        with phase_times.compile_parts(quiet):
            sum(len(objects) for objects in heap)
    finally:
        if phase_times._gc_pause in gc.callbacks:
            gc.callbacks.remove(phase_times._gc_pause)
        if enabled:
            gc.enable()
    assert collected > 0 and "gc" in paused and quiet["gc"] == 0, (collected, paused, quiet)


REPRO_HELPER = HELPER.replace(
    "serve(fails, Counts(), sys.argv[1], replies)",
    "from pytest_inductor_templates.diagnose.repro_step import Checked\n"
    "serve(fails, Counts(), sys.argv[1], replies, check_repro=lambda path: Checked(1, 'differs: ' + path.name))",
)


@pytest.mark.parametrize("checks_repros", [True, False])
def test_one_idle_helper_is_kept_to_check_the_repro(tmp_path: Path, checks_repros: bool) -> None:
    """Once the stage is known, every helper ends but one idle one, which checks the written repro while the asking
    process goes on (its answer: the exit code, message and process); a helper whose check cannot run answers
    nothing usable, and the asking process checks the repro itself."""
    from pytest_inductor_templates.diagnose.drawn import Counts
    from pytest_inductor_templates.diagnose.helpers import Helpers
    from pytest_inductor_templates.diagnose.steplog import StepLog

    (tmp_path / "fake_fault.py").write_text(FAKE_FAULT)
    boot = (REPRO_HELPER if checks_repros else HELPER).format(here=str(tmp_path))
    helpers = Helpers(tmp_path, 2, StepLog(tmp_path / "steps.jsonl"), Counts(), boot=boot)
    try:
        helpers.wait_ready()
        spare = helpers.keep_one_idle()
        assert spare is not None and [p for p in helpers.processes if p.poll() is None] == [spare.process]
        assert spare.ask(tmp_path / "repro.py")
        checked = spare.answer()
        if checks_repros:
            assert checked is not None and (checked.code, checked.message) == (1, "differs: repro.py"), checked
            assert checked.pid == spare.process.pid
        else:
            assert checked is None
    finally:
        helpers.close()


def test_a_holder_is_waited_for_only_on_a_lowering_step_from_its_graph(tmp_path: Path) -> None:
    """The asking process waits for a helper holding a kept graph only while that helper is on a lowering step from
    it (seconds); one on another question (a whole-model check, possibly minutes) is not waited for. A lowering step
    kept in the queue for a holder that then dies is dropped, and the asking process checks it itself."""
    import os
    from types import SimpleNamespace

    from pytest_inductor_templates.diagnose.drawn import Counts
    from pytest_inductor_templates.diagnose.helpers import Helpers
    from pytest_inductor_templates.diagnose.questions import Question
    from pytest_inductor_templates.diagnose.steplog import StepLog

    helpers = Helpers(tmp_path, 0, StepLog(tmp_path / "steps.jsonl"), Counts())
    read, write = os.pipe()
    (tmp_path / "helper-7.txt").write_text("RuntimeError: planted\n")
    holder = SimpleNamespace(pid=7, stdout=os.fdopen(read, "rb"), wait=lambda: -9)
    helpers.holding, helpers.errors = {7}, {7: tmp_path / "helper-7.txt"}
    helpers.running = {7: (holder, Question("inductor", "pre_grad_passes", "test_disable"))}  # type: ignore[dict-item]
    assert not helpers.holding_graph()
    helpers.running = {7: (holder, Question("inductor", "lowerings", "bisect", 0, 127))}  # type: ignore[dict-item]
    assert helpers.holding_graph()
    step = Question("inductor", "lowerings", "bisect", 0, 63)
    helpers.offer([step], for_holder=step)
    assert helpers.queue == [step]  # kept for the holder, which is on a lowering step
    os.close(write)  # the holder dies
    assert helpers.take(step) is None and helpers.queue == [], helpers.queue


def test_what_torch_may_still_ask_once_it_counts_or_bisects() -> None:
    """Once torch counts a subsystem's applications it asks only that count and its bisection steps; once it asks a
    step, only steps within its range: helpers on anything else are stopped (``Question.covers``)."""
    from pytest_inductor_templates.diagnose.questions import Question

    def step(low: int, high: int, subsystem: str = "lowerings") -> Question:
        return Question("inductor", subsystem, "bisect", low, high)

    count = Question("inductor", "lowerings", "find_max_bounds")
    assert count.covers(count) and count.covers(step(0, 63)) and count.covers(step(64, 127))
    assert not count.covers(Question("inductor", "pre_grad_passes", "find_max_bounds"))
    assert not count.covers(Question("inductor", "post_grad_passes", "test_disable"))
    assert not count.covers(step(0, 63, "pre_grad_passes"))
    assert step(0, 63).covers(step(32, 63)) and step(0, 63).covers(step(0, 63))
    assert not step(0, 63).covers(step(64, 127)) and not step(0, 63).covers(step(0, 127))
    assert not step(0, 63).covers(count) and not step(0, 63).covers(Question("inductor", "lowerings", "test_disable"))
