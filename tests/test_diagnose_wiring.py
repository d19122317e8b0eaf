"""--inductor-diagnose through a whole pytest run: a planted wrong lowering (as a broken installed compiler would be,
from a sitecustomize.py) diagnosed for a GraphNet sample in the worker process and for an ``inductor_check`` user
test, written into both items' records, the terminal and a repro that tracks the plant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from diagnose_plants import planted_env
from graphnet_tree import write_sample
from inner_runs import run_pytest_warm
from test_diagnose import SIGMOID_META, SIGMOID_MODEL

from conftest import QUIET
from pytest_inductor_templates.diagnose.steplog import read_log
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.runs.files import load

USER_TEST = """
import torch


class Gated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 8)

    def forward(self, x):
        y = self.fc(x)
        return torch.sigmoid(y) * y


def test_gated(inductor_check):
    torch.manual_seed(0)
    inductor_check(Gated().eval(), torch.randn(4, 16))
"""


def planted_run(
    tmp_path: Path, *selection: str, budget: int = 400, processes: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """A run with the sigmoid lowering planted, every failing check diagnosed, results in run.jsonl."""
    args = [
        *selection, "--inductor-template=default", "--inductor-devices=cpu",
        "--inductor-diagnose", f"--inductor-diagnose-budget={budget}", *processes, "--benchmark-disable",
        "--inductor-repro-dir=repros", "--inductor-results=run.jsonl", "-p", "no:randomly", *QUIET,
    ]  # fmt: skip
    return run_pytest_warm(tmp_path, *args, env=planted_env(tmp_path, "sigmoid"))


def diagnosed_records(tmp_path: Path) -> dict[tuple[str, str], ItemRecord]:
    return {(r.sample, r.kind): r for r in load(str(tmp_path / "run.jsonl")).records if r.template == "default"}


def assert_diagnosed(record: ItemRecord) -> None:
    assert record.diagnosis_stage == "inductor / lowerings: sigmoid", (record.nodeid, record.diagnosis)
    assert record.diagnosis_op is not None and record.diagnosis_op.startswith("aten.sigmoid"), record.diagnosis
    assert record.diagnosis_kind == "miscompile" and record.repro is not None
    assert record.outcome is Outcome.ACCURACY_FAIL  # the verdict stays


KEEP_READY_ON_TWO_CORES = """
from pytest_inductor_templates.diagnose import standby

standby.LEAST_CPUS = 1  # keep a diagnosis process ready on any machine (a GPU host's rule: 4 CPUs a worker)
"""


def test_a_sample_is_diagnosed_in_the_worker_within_its_budget_and_the_verdict_stays(tmp_path: Path) -> None:
    """The wiring, on CI: a budget shorter than any diagnosis takes stops the diagnosis of the planted sigmoid
    lowering part way (a whole one takes 15 s to minutes of C++ compiles here, as the machine is loaded; the slow
    test below runs it); what it found is in both items' records and the terminal, and the verdict is the check's.
    The sample worker kept a diagnosis process ready (its CPU rule lowered by the project's conftest), and the
    diagnosis ran in it."""
    write_sample(tmp_path / "corpus" / "gated", {"model.py": SIGMOID_MODEL, "weight_meta.py": SIGMOID_META})
    (tmp_path / "conftest.py").write_text(KEEP_READY_ON_TWO_CORES)
    # one process: a helper would only start (importing torch) before the budget ends the diagnosis
    result = planted_run(
        tmp_path, "--inductor-samples=corpus", budget=2, processes=("--inductor-diagnose-processes=1",)
    )
    records = diagnosed_records(tmp_path)
    check, bench = records[("corpus/gated", "check")], records[("corpus/gated", "bench")]
    assert check.outcome is bench.outcome is Outcome.ACCURACY_FAIL, result.stdout[-3000:]
    assert check.diagnosis is not None and check.diagnosis == bench.diagnosis, check.diagnosis
    assert "partial: " in check.diagnosis and "stopped at the budget of 2s" in check.diagnosis
    assert check.diagnosis_seconds is not None and check.diagnosis_seconds < 2 + 30  # the budget, the child's start
    assert f"{check.nodeid}: {check.diagnosis}" in result.stdout.split("diagnoses (where and why")[1]
    (log,) = (tmp_path / "repros").glob("*/steps.jsonl")
    start = read_log(log)[0]
    assert (start["step"], start["ahead"]) == ("start", True), start


@pytest.mark.slow  # minutes of cold C++ compiles; the budget-stopped test above covers the wiring on CI
def test_a_planted_lowering_is_diagnosed_for_a_sample_in_the_worker(tmp_path: Path) -> None:
    """Plant: Inductor's lowering of aten.sigmoid multiplies by 1.001."""
    write_sample(tmp_path / "corpus" / "gated", {"model.py": SIGMOID_MODEL, "weight_meta.py": SIGMOID_META})
    result = planted_run(tmp_path, "--inductor-samples=corpus")
    records = diagnosed_records(tmp_path)
    check, bench = records[("corpus/gated", "check")], records[("corpus/gated", "bench")]
    assert check.outcome is Outcome.ACCURACY_FAIL, result.stdout[-3000:]
    assert_diagnosed(check)
    assert_diagnosed(bench)
    assert check.diagnosis_op == "aten.sigmoid (model.py:9)"
    assert check.repro == bench.repro  # one diagnosis for the triple's items
    steps = read_log(Path(str(check.repro)).parent / "steps.jsonl")
    counted = [r for r in steps if r["step"] == "counts"][-1]
    lowering = [r for r in steps if r["step"] == "bisect_check" and r.get("subsystem") == "lowerings"]
    graph = [r for r in lowering if r.get("run_state") == "bisect" and r.get("dynamo") == 0 and r.get("inductor")]
    assert counted["graph_checks"] >= 1 and graph, lowering  # the lowering steps compiled the kept graph alone
    assert counted["draws"] == 0  # the worker's draw, loaded by the diagnosis and its helper
    assert not [r for r in steps if r["step"] == "helper" and r.get("error")], steps  # the helper loaded it too
    assert "diagnoses (where and why; --inductor-diagnose)" in result.stdout
    assert check.repro is not None and Path(check.repro).is_relative_to(tmp_path / "repros")
    with_plant = subprocess.run(
        [sys.executable, check.repro], env=planted_env(tmp_path, "sigmoid"), capture_output=True
    )
    without = subprocess.run([sys.executable, check.repro], env=planted_env(tmp_path, ""), capture_output=True)
    assert (with_plant.returncode, without.returncode) == (1, 0), with_plant.stdout + without.stdout


@pytest.mark.slow  # a second diagnosis from cold caches
def test_a_planted_lowering_is_diagnosed_for_a_user_test(tmp_path: Path) -> None:
    """Plant: Inductor's lowering of aten.sigmoid multiplies by 1.001; the model reaches the diagnosis pickled."""
    (tmp_path / "test_user.py").write_text(USER_TEST)
    result = planted_run(tmp_path, "test_user.py")
    record = diagnosed_records(tmp_path)[("test_user.py::test_gated", "check")]
    assert record.outcome is Outcome.ACCURACY_FAIL, result.stdout[-3000:]
    assert_diagnosed(record)
