"""--inductor-diagnose through a whole pytest run: a planted wrong lowering (as a broken installed compiler would be,
from a sitecustomize.py) diagnosed for a GraphNet sample in the worker process and for an ``inductor_check`` user
test, written into both items' records, the terminal and a repro that tracks the plant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from diagnose_plants import planted_env
from graphnet_tree import write_sample
from test_diagnose import SIGMOID_META, SIGMOID_MODEL

from conftest import QUIET, outcomes
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


def test_a_planted_lowering_is_diagnosed_for_a_sample_and_a_user_test(tmp_path: Path) -> None:
    """Plant: Inductor's lowering of aten.sigmoid multiplies by 1.001."""
    write_sample(tmp_path / "corpus" / "gated", {"model.py": SIGMOID_MODEL, "weight_meta.py": SIGMOID_META})
    (tmp_path / "test_user.py").write_text(USER_TEST)
    command = [
        sys.executable, "-m", "pytest", "test_user.py", "--inductor-samples=corpus", "--inductor-template=default",
        "--inductor-devices=cpu", "--inductor-diagnose", "--inductor-diagnose-budget=400", "--benchmark-disable",
        "--inductor-repro-dir=repros", "--inductor-results=run.jsonl", "-p", "no:randomly", *QUIET,
    ]  # fmt: skip
    result = subprocess.run(command, cwd=tmp_path, env=planted_env(tmp_path, "sigmoid"), capture_output=True, text=True)
    found = outcomes(tmp_path)
    assert found[("corpus/gated", "default", "cpu", "check")] == "accuracy_fail", result.stdout[-3000:]
    assert found[("test_user.py::test_gated", "default", "cpu", "check")] == "accuracy_fail"
    records = {(r.sample, r.kind): r for r in load(str(tmp_path / "run.jsonl")).records if r.template == "default"}
    for key in (("corpus/gated", "check"), ("corpus/gated", "bench"), ("test_user.py::test_gated", "check")):
        record = records[key]
        assert record.diagnosis_stage == "inductor / lowerings: sigmoid", (key, record.diagnosis)
        assert record.diagnosis_op is not None and record.diagnosis_op.startswith("aten.sigmoid"), record.diagnosis
        assert record.diagnosis_kind == "miscompile" and record.repro is not None
        assert record.outcome is not None and record.outcome.value == "accuracy_fail"  # the verdict stays
    assert records[("corpus/gated", "check")].diagnosis_op == "aten.sigmoid (model.py:9)"
    assert (
        records[("corpus/gated", "check")].repro == records[("corpus/gated", "bench")].repro
    )  # one diagnosis for the triple's items
    assert "diagnoses (where and why; --inductor-diagnose)" in result.stdout
    repro = records[("corpus/gated", "check")].repro
    assert repro is not None and Path(repro).is_relative_to(tmp_path / "repros")
    with_plant = subprocess.run([sys.executable, repro], env=planted_env(tmp_path, "sigmoid"), capture_output=True)
    without = subprocess.run([sys.executable, repro], env=planted_env(tmp_path, ""), capture_output=True)
    assert (with_plant.returncode, without.returncode) == (1, 0), with_plant.stdout + without.stdout
