"""A lowering-bisection step compiled from Inductor's own input (``diagnose.inner_graph``): the graph Inductor
compiled in a model-level check, kept with the real inputs and outputs of its first call, compiled again by
``compile_fx_inner`` alone under torch's bisector state, judged on the graph's outputs; used only where it stands
for the model. Real compiles, with Inductor's lowering of sigmoid planted to multiply by 1.001."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from diagnose_plants import run_python

from conftest import made_once_value

SETUP = """
import json
from pathlib import Path
import torch
from torch._inductor import compile_fx
from pytest_inductor_templates.diagnose import inner_graph
from pytest_inductor_templates.diagnose.drawn import Counts
from pytest_inductor_templates.diagnose.predicate import Attempt, Judge
from pytest_inductor_templates.diagnose.questions import Question, answer_here
from pytest_inductor_templates.diagnose.request import DiagnosisRequest
from pytest_inductor_templates.machine import CPU
from pytest_inductor_templates.templates.selection import Selection

torch._inductor.config.fx_graph_cache = False  # as in a diagnosis: every compile lowers again
torch._functorch.config.enable_autograd_cache = False
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Sigmoid()).eval()
x = torch.randn(8, 16)
"""

KEPT = """
kept = []
original = compile_fx._compile_fx_inner
with torch.no_grad(), inner_graph.keeping(kept):
    torch.compile(model)(x)
result = {"kept": len(kept), "restored": compile_fx._compile_fx_inner is original}
result["disagreeing"] = inner_graph.usable(kept, False, None, True) is None  # the graph fails: not a pass
entry = inner_graph.usable(kept, True, None, True)
result["usable"] = entry is not None
result["fails"] = inner_graph.fails(entry, None)


def ask(run_state, low=None, high=None):  # as a helper process answers torch's bisector
    question = Question("inductor", "lowerings", run_state, low, high)
    return answer_here(question, lambda: inner_graph.fails(entry, None), ".")


result["off"] = ask("test_disable")["failing"]
counted = ask("find_max_bounds")
result["counted"] = [counted["failing"], counted["range"]]
steps = [ask("bisect", m, m) for m in range(counted["range"][1] + 1)]  # applications up to m on, m's name read
result["steps"] = [[step["failing"], step.get("debug_info")] for step in steps]


class Broken(torch.nn.Module):
    def forward(self, x):
        x = torch.sigmoid(x)
        torch._dynamo.graph_break()
        return torch.sigmoid(x) + 1


two = []
torch._dynamo.reset()
with torch.no_grad(), inner_graph.keeping(two):
    torch.compile(Broken())(x)
result["graphs"] = len(two)
result["two_usable"] = inner_graph.usable(two, True, None, True) is not None
print("KEPT " + json.dumps(result))
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, Any]:
    """Both scripts' results, from one process with the sigmoid plant, after their setup (made once a session)."""

    def run(root: Path) -> dict[str, Any]:
        done = run_python(root, "sigmoid", SETUP + KEPT + ROUTED)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return {line.split(" ", 1)[0]: json.loads(line.split(" ", 1)[1]) for line in done.stdout.splitlines()
                if line.startswith(("KEPT ", "ROUTED "))}  # fmt: skip

    return made_once_value(tmp_path_factory, worker_id, "graph-steps", run)


def test_a_kept_graph_compiled_alone_fails_as_the_model_did_and_follows_the_bisectors_count(
    planted: dict[str, Any],
) -> None:
    """The graph of a model-level compile is kept (one graph, its first call's inputs and outputs; the patches
    gone after the block); it serves only the verdict its compile's own outputs give (failing here: a passing
    model-level verdict rejects it); compiled again alone it still fails, and asked torch's bisector questions as
    a helper process asks them, it passes with the lowerings off and fails exactly from the count whose
    application is sigmoid's lowering on.
    A model that compiles two graphs (a graph break) has no graph that stands for it."""
    result = planted["KEPT"]
    assert result["kept"] == 1 and result["restored"] and result["usable"] and result["disagreeing"], result
    assert result["fails"] is True
    assert result["off"] is False and result["counted"][0] is True, result  # every lowering off: it passes
    failing = [step[0] for step in result["steps"]]
    assert len(failing) == result["counted"][1][1] + 1 and failing[-1] is True and failing[0] is False, result
    first = failing.index(True)
    assert all(failing[first:]), result  # one count turns it on: the one that applies sigmoid's lowering
    assert "sigmoid" in json.dumps(result["steps"][first][1]), result["steps"]
    assert result["graphs"] == 2 and not result["two_usable"], result


ROUTED = """

class WholeModel(Judge):
    \"\"\"The model-level check: the model compiled whole and compared with eager (``lying``: says it passes).\"\"\"

    lying = False

    def attempt(self, selection=None, patches=None):
        torch._dynamo.reset()
        with torch.no_grad():
            failing = not torch.allclose(torch.compile(model)(x), model(x), rtol=1e-6, atol=1e-6)
        return Attempt("accuracy_fail" if failing and not self.lying else "pass", "", 0.0)


def walk(judge, count=None, between=lambda: None, before=()):
    \"\"\"torch's lowering questions, as a helper answers them; each: (failing, compiled from the graph). Given the
    ``count``, the switch and the steps alone (a helper given no count), with ``between`` run after the switch;
    ``before``: the subsystems whose switches this process answered first.\"\"\"
    seen = []

    def ask(run_state, low=None, high=None, subsystem="lowerings"):
        def check():
            tried = judge.asked(None)
            seen.append([tried.outcome == "accuracy_fail", tried.graph])
            return seen[-1][0]
        return answer_here(Question("inductor", subsystem, run_state, low, high), check, ".")

    for subsystem in before:
        ask("test_disable", subsystem=subsystem)
    ask("test_disable")
    between()
    count = ask("find_max_bounds")["range"][1] if count is None else count
    for m in range(count + 1):
        ask("bisect", m, m)
    return seen


def judge(vouched=None):
    return WholeModel(request, None, None, Counts(), vouched=vouched)


request = DiagnosisRequest(None, Selection(), CPU, "accuracy_fail", Path("."))
result = {"routed": walk(judge())}
liar = judge()
liar.lying = True  # its verdict on a failing compile disagrees with the graph's: the graph never stands for it
result["lying"] = walk(liar)
shared = Path("vouched.txt")  # a diagnosis's file: its processes' graphs that agreed with a failing check
asker = judge(shared)
result["asker"] = walk(asker)  # its graph agrees with its count's failing check: it vouches for it
count = len(result["asker"]) - 3
result["vouched"] = walk(judge(shared), count)  # vouched for before its switch
late = Path("late.txt")  # vouched for by another process after its switch, before its steps
result["late"] = walk(judge(late), count, between=lambda: walk(judge(late)))
result["alone"] = walk(judge(Path("none.txt")), count)
Path("unrelated.txt").write_text("+" + "0" * 64 + "\\n")  # another graph's
result["unrelated"] = walk(judge(Path("unrelated.txt")), count)
mark = inner_graph.fingerprint(asker.inner)
Path("withdrawn.txt").write_text(f"+{mark}\\n-{mark}\\n")  # and another process found the same graph disagreeing
result["withdrawn"] = walk(judge(Path("withdrawn.txt")), count)
result["post_grad"] = walk(judge(), before=["post_grad_passes"])  # a helper given that switch first
print("ROUTED " + json.dumps(result))
"""


def test_the_lowering_steps_are_compiled_from_the_graph_once_it_agreed_with_a_failing_whole_check(
    planted: dict[str, Any],
) -> None:
    """``Judge.asked`` under torch's lowering questions: the switch (passing) and the count (failing) are whole-model
    checks that keep the graph, whose verdicts agree there; every step after them compiles the kept graph alone,
    with the whole model's answers (passing up to sigmoid's lowering, failing from it). A whole-model check that
    disagrees with the graph at a failing compile leaves every step a whole-model check."""
    result = planted["ROUTED"]
    routed = result["routed"]
    assert [graph for _, graph in routed] == [False, False] + [True] * (len(routed) - 2), routed
    failing = [fails for fails, _ in routed[2:]]
    assert failing[0] is False and failing[-1] is True and all(failing[failing.index(True) :]), routed
    assert routed[:2] == [[False, False], [True, False]], routed
    assert not any(graph for _, graph in result["lying"]), result["lying"]


def test_a_graph_that_agreed_with_a_passing_check_is_used_once_another_process_vouched_for_it(
    planted: dict[str, Any],
) -> None:
    """A process given the switch and then the steps (no count, as a helper may be), whose checks pass until the
    step that turns sigmoid's lowering on: where another process's same graph agreed with a failing check (its
    count; before this process's switch or after it), every step compiles the graph alone, with the model's
    answers; with no such process, or where only another graph was vouched for, or where a process found the same
    graph disagreeing with a check, each passing step checks the whole model, and only the steps after its first
    failing one compile the graph."""
    result = planted["ROUTED"]
    vouched, alone = result["vouched"], result["alone"]
    assert [graph for _, graph in vouched] == [False] + [True] * (len(vouched) - 1), vouched
    assert result["late"] == vouched, result["late"]  # vouched for after its switch: the same
    assert [fails for fails, _ in vouched] == [fails for fails, _ in alone], (vouched, alone)
    first = [fails for fails, _ in alone].index(True)
    assert first > 1 and [graph for _, graph in alone] == [False] * (first + 1) + [True] * (len(alone) - first - 1)
    assert result["unrelated"] == alone and result["withdrawn"] == alone, result  # another graph's; a disagreement


def test_the_post_grad_passes_switch_keeps_the_graph_the_lowering_steps_compile(planted: dict[str, Any]) -> None:
    """The post-grad passes act inside ``compile_fx_inner``: a process whose first check was their switch (failing:
    they do not fix a wrong lowering) keeps the graph Inductor was given there, which agreed with that failing
    check; after the lowerings' switch (whole, passing), the count and every step compile that graph alone, with
    the model's answers."""
    seen = planted["ROUTED"]["post_grad"]
    assert seen[:2] == [[True, False], [False, False]], seen  # the two switches, model-level
    assert all(graph for _, graph in seen[2:]) and seen[2][0] is True, seen  # the count, from the graph, fails
    assert [fails for fails, _ in seen[3:]] == [fails for fails, _ in planted["ROUTED"]["routed"][2:]], seen
