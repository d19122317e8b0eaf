"""A diagnosis judges as the failing item judged, and costs one draw: the two cases a new user met (a strict
check's failure, a backend of the user's own conftest.py) through whole pytest runs, and, on one diagnosis through
the API, the draws counted by the builder itself, the checks skipped because they cannot change the answer, and
the host's work lock taken per check.

Cheap on CI: the strict check runs under Dynamo's ``aot_eager_decomp_partition`` backend (its gelu decomposition
differs from eager in the last bits, as Inductor's does) and the user's backend turns gelu into relu without
Inductor, so no check compiles C++; the same strict check under Inductor is the slow test.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from diagnose_plants import run_python
from graphnet_tree import fault_model, write_fault_sample
from inner_runs import run_pytest_warm, run_python_warm

from conftest import QUIET
from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.runs.files import load

BLOCK = """
import torch


class Block(torch.nn.Module):  # the README's
    def __init__(self) -> None:
        super().__init__()
        self.up, self.down = torch.nn.Linear(64, 256), torch.nn.Linear(256, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(x)))
"""

TEST_BLOCK = (
    BLOCK
    + """

def test_block_checked(inductor_check):
    torch.manual_seed(0)
    inductor_check(Block().eval(), torch.randn(8, 64))
"""
)

WRONG_GELU = """
import torch
from torch._dynamo import register_backend


@register_backend
def wrong_gelu(gm, example_inputs):
    \"\"\"Dynamo's graph with gelu turned into relu ({fault}), run as it is.\"\"\"
    for node in gm.graph.nodes:
        if node.target is torch.nn.functional.gelu:
            node.target = {replacement}
    gm.recompile()
    return gm.forward
"""
PLANTED = WRONG_GELU.format(fault="the fault", replacement="torch.nn.functional.relu")
FIXED = WRONG_GELU.format(fault="fixed: gelu stays", replacement="torch.nn.functional.gelu")

HOOKED = """
import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):  # registered in a hook: a process that only imports this file does not have it
    import torch
    from torch._dynamo import register_backend

    @register_backend
    def wrong_gelu(gm, example_inputs):
        for node in gm.graph.nodes:
            if node.target is torch.nn.functional.gelu:
                node.target = torch.nn.functional.relu
        gm.recompile()
        return gm.forward
"""


def run(tmp_path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    """``pytest test_block.py -k checked --inductor-diagnose`` as a new user runs it, results in run.jsonl."""
    (tmp_path / "test_block.py").write_text(TEST_BLOCK)
    args = [
        "test_block.py", "-k", "checked", "--inductor-diagnose", "--inductor-devices=cpu",
        "--inductor-results=run.jsonl", "--benchmark-disable", "-p", "no:randomly", *QUIET, *options,
    ]  # fmt: skip
    return run_pytest_warm(tmp_path, *args, timeout=900)


def record(tmp_path: Path) -> ItemRecord:
    (found,) = [r for r in load(str(tmp_path / "run.jsonl")).records if r.kind == "check"]
    return found


def repro_exit(repro: str) -> int:
    """``python repro.py``'s exit code, the repro run as a script in the warm interpreter (it plants nothing)."""
    code = f"import runpy; runpy.run_path({repro!r}, run_name='__main__')"
    return run_python_warm(Path(repro).parent, code, timeout=300).returncode


def test_a_strict_checks_failure_is_reproduced_and_localised(tmp_path: Path) -> None:
    """``--inductor-tolerance=0,0 --inductor-second-opinion=off``: the diagnosis judges by them (with the float64
    second opinion, as it judged before, the failure passes: "not reproduced")."""
    done = run(
        tmp_path, "--inductor-tolerance=0,0", "--inductor-second-opinion=off",
        "--inductor-backend=aot_eager_decomp_partition", "--inductor-diagnose-processes=1",
    )  # fmt: skip
    found = record(tmp_path)
    assert found.outcome is not None and found.outcome.value == "accuracy_fail", done.stdout[-3000:]
    assert found.diagnosis_stage == "aot_eager_decomp_partition / decomposition: aten.gelu.default", found.diagnosis
    assert found.diagnosis_op == "aten.gelu (decomposed)", found.diagnosis
    assert found.diagnosis_draws == 2, found  # one model, one input set
    assert found.repro is not None and repro_exit(found.repro) == 1  # the repro judges strictly too
    assert "SECOND_OPINION = False" in Path(found.repro).read_text()
    assert "1 diagnoses took" in done.stdout


@pytest.mark.slow  # Inductor's C++ compiles from a fresh cache: minutes on 2 cores; the test above is its CI variant
def test_a_strict_checks_failure_under_inductor_is_reproduced_and_localised(tmp_path: Path) -> None:
    done = run(tmp_path, "--inductor-tolerance=0,0", "--inductor-second-opinion=off", "--inductor-template=default")
    found = record(tmp_path)
    assert found.diagnosis is not None and not found.diagnosis.startswith("not reproduced"), done.stdout[-3000:]
    assert found.diagnosis_stage and found.diagnosis_op and found.diagnosis_op != "not localised", found.diagnosis
    assert found.repro is not None and repro_exit(found.repro) == 1


def test_a_backend_of_the_users_conftest_is_named_with_its_repro(tmp_path: Path) -> None:
    """The diagnosis's processes import the item's conftest.py: its backend is there, the stage names it, and the
    repro runs the conftest to get it (exit 1; 0 once the conftest's backend is fixed)."""
    (tmp_path / "conftest.py").write_text(PLANTED)
    done = run(tmp_path, "--inductor-backend=wrong_gelu", "--inductor-diagnose-processes=1")
    found = record(tmp_path)
    assert found.diagnosis_stage == (
        "the backend wrong_gelu (at the inductor stage: none of Inductor's subsystems fixes it)"
    ), done.stdout[-3000:]
    assert found.diagnosis_kind == "miscompile", found.diagnosis
    assert found.repro is not None and repro_exit(found.repro) == 1
    (tmp_path / "conftest.py").write_text(FIXED)
    assert repro_exit(found.repro) == 0


def test_a_backend_the_diagnosis_cannot_load_says_why_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(HOOKED)
    done = run(tmp_path, "--inductor-backend=wrong_gelu", "--inductor-diagnose-processes=1")
    found = record(tmp_path)
    assert found.diagnosis is not None and found.diagnosis.startswith(
        "diagnosis failed: the backend 'wrong_gelu' cannot be loaded in the diagnosis's process (InvalidBackend"
    ), done.stdout[-3000:]
    assert "\n" not in found.diagnosis
    assert f"{found.nodeid}: {found.diagnosis}" in done.stdout


COUNTING = """
import os


class Counting:
    \"\"\"The item's builder, counting each draw in a file (one line a draw, from any process).\"\"\"

    tolerance = None  # as a sample's

    def __init__(self, inner, path):
        self.inner, self.path = inner, path

    def _count(self, what):
        with open(self.path, "a") as file:
            file.write(f"{what} {os.getpid()}\\n")

    def make_model(self, device):
        self._count("model")
        return self.inner.make_model(device)

    def make_inputs(self, device):
        self._count("inputs")
        return self.inner.make_inputs(device)
"""


TRIPLE = """
import json, os, sys
from pathlib import Path
import torch
from blockmod import Block
from counting import Counting
from pytest_inductor_templates.check.inputs import Inputs
from pytest_inductor_templates.check.result import CheckResult
from pytest_inductor_templates.diagnose import PickledModel
from pytest_inductor_templates.engine.cell import Verdict
from pytest_inductor_templates.engine.diagnosis import DiagnosisPlan
from pytest_inductor_templates.engine.triples import PreparedTriple
from pytest_inductor_templates.machine import CPU
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.templates.matrix import Case
from pytest_inductor_templates.templates.selection import Selection
from pytest_inductor_templates.timing import host_lock

host_lock.use(host_lock.Sharing({lock!r}, log={lock_log!r}))  # as a sample worker of an xdist run shares the host
torch.manual_seed(0)
build = Counting(PickledModel.of(Block().eval(), [Inputs((torch.randn(8, 64),))]), {draws!r})
triple = PreparedTriple(build, Case(Selection(backend="wrong_gelu"), CPU))
triple.verdict = Verdict(CheckResult(Outcome.ACCURACY_FAIL, "the item failed", "the item failed"))
plan = DiagnosisPlan(500, Path({repro!r}), "planted", [("conftest", {conftest!r})], processes=2)
diagnosis = triple.diagnose(plan)
print("PID", os.getpid())
print("DIAGNOSIS " + json.dumps({{k: v for k, v in vars(diagnosis).items() if k != "steps"}}))
print("STEPS " + json.dumps([{{k: v for k, v in r.items() if k != "traceback"}} for r in diagnosis.steps]))
"""


def test_one_draw_skipped_checks_and_the_lock_per_check(tmp_path: Path) -> None:
    """One diagnosis of a sample worker's triple (the user's wrong_gelu backend, so the bisector reaches
    Inductor's subsystems; a helper process): the builder is called once for the model and once for the inputs
    in all the diagnosis's processes; the switches that cannot change the answer here (CUDA graphs, random-op
    fallbacks, layouts, precision casts, CPU stride padding) are answered without a check; the
    session's work lock is held per check by the diagnosis's processes, never by the triple's for all of it. The
    step log says when the draw, eager's half and the compile pool were done (where the time before the first
    check went): the pool is waited for before the first check that lowers with Inductor, not before the first."""
    for name, text in (("blockmod.py", BLOCK), ("counting.py", COUNTING), ("conftest.py", PLANTED)):
        (tmp_path / name).write_text(text)
    lock, lock_log, draws = tmp_path / "lock", tmp_path / "lock.log", tmp_path / "draws.txt"
    lock.mkdir()
    code = TRIPLE.format(
        lock=str(lock), lock_log=str(lock_log), draws=str(draws), repro=str(tmp_path / "repro"),
        conftest=str(tmp_path / "conftest.py"),
    )  # fmt: skip
    done = run_python(tmp_path, "", code)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("PID", "DIAG", "STEPS")))
    parent, diagnosis, steps = int(lines["PID"]), json.loads(lines["DIAGNOSIS"]), json.loads(lines["STEPS"])
    assert diagnosis["stage"].startswith("the backend wrong_gelu"), steps
    assert sorted(draws.read_text().split()[0::2]) == ["inputs", "model"]  # one draw, in all the processes
    assert diagnosis["counts"]["draws"] == 2 and diagnosis["counts"]["skipped_checks"] == 6, diagnosis["counts"]
    answered = {r["subsystem"]: r.get("answered") for r in steps if r["step"] == "bisect_check" and "answered" in r}
    assert answered == {
        None: "the item's own check failed there",  # the inductor stage: the reproduce step, not compiled again
        "cudagraphs": "the template runs no CUDA graphs",
        "inductor_fallback_random": "the graph has no random operators",
        "inductor_layout_optimization": "the graph has no convolution (layout optimization acts on convolutions)",
        "inductor_emulate_precision_casts": "the graph computes no float16 or bfloat16 (precision casts act on those)",
        "inductor_comprehensive_padding": "Inductor pads no strides on the CPU (disable_padding_cpu)",
    }
    compiled = [r for r in steps if r["step"] == "bisect_check" and r.get("dynamo")]  # each a model-level check
    assert compiled and all({"build", "calls", "compare", "graph_eager"} <= r.keys() for r in compiled), compiled
    assert all(r["calls"] >= r["dynamo"] for r in compiled), compiled  # the compile happens in the first call
    timed = [r for r in compiled if r.get("seconds")]  # a helper's answers: the parts within the check's seconds
    assert timed and all(r["build"] + r["calls"] + r["compare"] <= r["seconds"] + 0.03 for r in timed), timed
    child = next(r["pid"] for r in steps if r["step"] == "start")
    helpers = {r["pid"] for r in steps if r["step"] == "helper"}
    # the helper was forked from the diagnosis's process once that had imported torch (no import of its own; 7-9 s of
    # CPU here), and answered the bisector
    started = next(r for r in steps if r["step"] == "start")
    assert (started["helpers"], started["forked"]) == (1, True), started
    assert helpers and any(r.get("pid") in helpers for r in steps if r["step"] == "bisect_check"), steps
    holds = [line.split() for line in lock_log.read_text().splitlines()]
    work = [(int(pid), float(start), float(end)) for pid, group, _, start, end in holds if group == "work"]
    assert parent not in {pid for pid, _, _ in work}  # the triple holds nothing while its diagnosis runs
    assert {pid for pid, _, _ in work} <= {child, *helpers} and child in {pid for pid, _, _ in work}
    checked_here = [r for r in steps if r["step"] == "check"]  # the checks the diagnosis's own process ran
    assert len([w for w in work if w[0] == child]) > len(checked_here) >= 1  # one hold each, and the draw's
    before = [r["step"] for r in steps if r["step"] in ("start", "drawn", "counts", "saved", "pool", "reproduce")]
    assert before[:5] == ["start", "drawn", "counts", "saved", "reproduce"], steps  # where its start went
    # the compile pool is waited for once, before this process's first check that lowers with Inductor: the capture
    # and the stages before Inductor's (the helper's, or this process's) go on while it starts
    names = [r["step"] for r in steps]
    pool = names.index("pool")
    assert names.count("pool") == 1 and pool > names.index("capture"), names
    here = [i for i, r in enumerate(steps) if r["step"] == "bisect_check" and "dynamo" in r and "pid" not in r]
    lowered = [i for i in here if steps[i]["backend"] == "inductor"]
    stages = [i for i, r in enumerate(steps) if r["step"] == "bisect_check" and r["backend"] != "inductor"]
    assert all(i > pool for i in lowered) and stages and all(i < pool for i in stages), steps


DRAWS_LOGGED = """
import os

from pytest_inductor_templates.samples.graphnet import GraphNetSample

for name in ("make_model", "make_inputs", "make_model_and_inputs"):  # every draw of a GraphNet sample, by process

    def logged(self, device, _draw=getattr(GraphNetSample, name), _name=name):
        with open({log!r}, "a") as log:
            log.write(f"{{os.getpid()}} {{_name}}\\n")
        return _draw(self, device)

    setattr(GraphNetSample, name, logged)
"""


def test_a_sample_items_diagnosis_loads_the_items_own_draw(tmp_path: Path) -> None:
    """A GraphNet sample whose traced graph scales its output (Dynamo takes the branch, eager does not: the fault
    is at the eager stage, found without an Inductor compile); a conftest.py, which the diagnosis's process imports
    too, logs every draw of a GraphNet sample with its process: the sample worker draws it (the eager row's triple
    and the template's), and its diagnosis draws nothing: it loads the item's model as built and its inputs, which
    the worker saved for it (``diagnosis_draws`` 0)."""
    draws = tmp_path / "draws.log"
    (tmp_path / "conftest.py").write_text(DRAWS_LOGGED.format(log=str(draws)))
    model = fault_model(forward="if torch.compiler.is_compiling(): L_x_ = L_x_ * 1.001")
    write_fault_sample(tmp_path / "corpus" / "traced", model)
    done = run_pytest_warm(
        tmp_path, "--inductor-samples=corpus", "-k", "traced and check", "--inductor-template=default",
        "--inductor-devices=cpu", "--inductor-diagnose", "--inductor-diagnose-processes=1", "--benchmark-disable",
        "--inductor-results=run.jsonl", "-p", "no:randomly", *QUIET,
    )  # fmt: skip
    (found,) = [r for r in load(str(tmp_path / "run.jsonl")).records if r.template == "default" and r.kind == "check"]
    assert found.outcome is not None and found.outcome.value == "accuracy_fail", done.stdout[-3000:]
    assert found.diagnosis_stage is not None and found.diagnosis_stage.startswith("eager"), found.diagnosis
    assert found.diagnosis_draws == 0, found
    logged = [line.split() for line in draws.read_text().splitlines()]
    assert logged and {int(pid) for pid, _ in logged} == {found.pid}, (logged, found.pid)  # none in the diagnosis


SAVED_DRAW = """
import pickle, sys
from pathlib import Path
import torch
from pytest_inductor_templates.diagnose.drawn import Counts, Drawn, SavedDraw, item_draw
from pytest_inductor_templates.samples.graphnet import GraphNetSample

root, work = Path(sys.argv[1]), Path(sys.argv[2])
sample = GraphNetSample(root, "traced")
model, inputs = sample.make_model_and_inputs(torch.device("cpu"))
with item_draw(sample, model, inputs) as build:  # the sample worker's side
    assert isinstance(build, SavedDraw), build
    counts = Counts()
    drawn = Drawn.draw(build, torch.device("cpu"), counts)  # the diagnosis's process: it loads, then removes
    drawn.save(work)  # for its helpers
    (work / "request.pkl").write_bytes(pickle.dumps(build))
    print("DRAWS", counts.draws, build.folder.exists())
print("SUM", float(sum(p.double().sum() for p in drawn.model.parameters())))
"""

HELPER_LOAD = """
import pickle, sys
from pathlib import Path
import torch
from pytest_inductor_templates.diagnose.drawn import Drawn

work = Path(sys.argv[1])
build = pickle.loads((work / "request.pkl").read_bytes())
drawn = Drawn.load(work, build, torch.device("cpu"))  # a helper: the sample's modules registered from the build
print("SUM", float(sum(p.double().sum() for p in drawn.model.parameters())))
"""


def test_a_saved_item_draw_is_loaded_once_and_reaches_a_helper(tmp_path: Path) -> None:
    """A GraphNet sample's draw saved by the item's process (``item_draw``): the diagnosis's process loads it
    (no draw counted) and removes it; a helper, a fresh process that has not loaded the sample's ``model.py``,
    loads the diagnosis's copy through the request's builder (the sample registers its modules there)."""
    write_fault_sample(tmp_path / "corpus" / "traced", fault_model(init="self.w = torch.nn.Parameter(torch.ones(3))"))
    work = tmp_path / "work"
    work.mkdir()
    saving = subprocess.run(
        [sys.executable, "-c", SAVED_DRAW, str(tmp_path / "corpus"), str(work)], capture_output=True, text=True
    )
    assert saving.returncode == 0, saving.stdout + saving.stderr[-3000:]
    assert "DRAWS 0 False" in saving.stdout, saving.stdout
    helper = run_python_warm(tmp_path, f"import sys; sys.argv = ['-c', {str(work)!r}]\n" + HELPER_LOAD)
    assert helper.returncode == 0, helper.stdout + helper.stderr[-3000:]
    sums = [line for line in (saving.stdout + helper.stdout).splitlines() if line.startswith("SUM")]
    assert len(sums) == 2 and sums[0] == sums[1], sums


def test_the_draw_reaches_another_process_for_a_model_whose_class_cannot_be_pickled(tmp_path: Path) -> None:
    """A built-in's model class is local to a function: its draw goes to a helper process as tensors, put back
    into a skeleton built on the meta device; the same outputs there."""
    code = f"""
import subprocess, sys, torch
from pathlib import Path
from pytest_inductor_templates.diagnose.drawn import Counts, Drawn
from pytest_inductor_templates.samples.builtin import builtin_sample

sample, cpu, here = builtin_sample("conv_bn"), torch.device("cpu"), Path({str(tmp_path)!r})
drawn = Drawn.draw(sample, cpu, Counts())
drawn.save(here)
with torch.no_grad():
    torch.save(drawn.model(*drawn.inputs[0].args), here / "expected.pt")
other = '''
import torch
from pathlib import Path
from pytest_inductor_templates.diagnose.drawn import Drawn
from pytest_inductor_templates.samples.builtin import builtin_sample
here = Path({str(tmp_path)!r})
loaded = Drawn.load(here, builtin_sample("conv_bn"), torch.device("cpu"))
with torch.no_grad():
    print("SAME", torch.equal(loaded.model(*loaded.inputs[0].args), torch.load(here / "expected.pt")))
'''
print(subprocess.run([sys.executable, "-c", other], capture_output=True, text=True).stdout)
"""
    done = run_python(tmp_path, "", code)
    assert "SAME True" in done.stdout, done.stdout + done.stderr


FROM_THE_CACHE = """
import json
from pathlib import Path
import torch
from blockmod import Block
from pytest_inductor_templates.check.inputs import Inputs
from pytest_inductor_templates.check.result import CheckResult
from pytest_inductor_templates.diagnose import PickledModel
from pytest_inductor_templates.engine.cell import CheckPolicy, Verdict
from pytest_inductor_templates.engine.diagnosis import DiagnosisPlan, diagnose_cell
from pytest_inductor_templates.machine import CPU
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.templates.registry import BUILTIN_TEMPLATES
from pytest_inductor_templates.templates.selection import Selection

torch.manual_seed(0)
build = PickledModel.of(Block().eval(), [Inputs((torch.randn(8, 64),))])
failed = Verdict(CheckResult(Outcome.ACCURACY_FAIL, "the item failed", "the item failed"), compile_cache="warm")
default = Selection(template=next(t for t in BUILTIN_TEMPLATES if t.name == "default"))
plan = DiagnosisPlan(300, Path({repro!r}), "cached", processes=1)
diagnosis = diagnose_cell(build, default, CPU, None, failed, plan, True, CheckPolicy())
print("DIAGNOSIS " + json.dumps(diagnosis.summary))
"""


def test_a_failure_of_code_from_the_cache_is_compiled_afresh_and_said_to_be_the_caches(tmp_path: Path) -> None:
    """An item whose failing code came from Inductor's cache (a warm hit: a planted lowering's code had landed in a
    shared cache, and the built-ins failed from it in every later run) is not taken as reproduced: the diagnosis
    compiles afresh, which passes, and says the cache entry is the suspect instead of bisecting a compiler that
    compiles right (before: ``no stage fails under the bisector``)."""
    (tmp_path / "blockmod.py").write_text(BLOCK)
    done = run_python_warm(tmp_path, FROM_THE_CACHE.format(repro=str(tmp_path / "repro")), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("DIAGNOSIS "))[10:])
    assert summary.startswith("not reproduced with a fresh Inductor cache: pass"), summary
    assert "the item's compiled code came from Inductor's cache (warm): a stale or wrong cache entry" in summary
