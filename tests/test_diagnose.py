"""The diagnosis of a failing item, on real CPU compiles with planted compiler faults (``diagnose_plants``).

Each test runs its parent side in a subprocess that sees the plant (as the pytest process of a broken install
would), calls ``diagnose`` there (which spawns its own child), then runs the standalone repro with the plant
(exit 1) and without it (exit 0). Without the plant, nothing fails: the diagnosis says it does not reproduce.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from diagnose_plants import run_python, run_repro
from graphnet_tree import write_sample

PARENT = """
import json, sys
from pathlib import Path
from pytest_inductor_templates.diagnose import DiagnosisRequest, PickledModel, diagnose
from pytest_inductor_templates.check.inputs import Inputs
from pytest_inductor_templates.machine import CPU
from pytest_inductor_templates.templates.registry import Template
from pytest_inductor_templates.templates.selection import Selection
{build}
request = DiagnosisRequest(build, selection, CPU, {outcome!r}, Path({repro_dir!r}), budget_seconds={budget},
                           no_grad={no_grad}, sys_path=[{here!r}], name="planted")
diagnosis = diagnose(request)
print("DIAGNOSIS " + json.dumps({{k: v for k, v in vars(diagnosis).items() if k != "steps"}}))
print("STEPS " + json.dumps([{{k: v for k, v in r.items() if k != "traceback"}} for r in diagnosis.steps]))
"""

SIGMOID_MODEL = """
import torch
from torch import device


class GraphModule(torch.nn.Module):
    def forward(self, L_x_: torch.Tensor, L_self_modules_fc_parameters_weight_: torch.nn.parameter.Parameter):
        linear = torch._C._nn.linear(L_x_, L_self_modules_fc_parameters_weight_, None)
        gate = torch.sigmoid(linear)
        return (gate * linear,)
"""

SIGMOID_META = """
class Program_weight_tensor_meta_L_x_:
    name = "L_x_"
    shape = [4, 16]
    dtype = "torch.float32"
    device = "cuda:0"
    mean = 0.0
    std = 1.0
    data = None

class Program_weight_tensor_meta_L_self_modules_fc_parameters_weight_:
    name = "L_self_modules_fc_parameters_weight_"
    shape = [8, 16]
    dtype = "torch.float32"
    device = "cuda:0"
    mean = 0.0
    std = 0.3
    data = None
"""


def diagnosed(
    tmp_path: Path, plants: str, build: str, outcome: str = "accuracy_fail", budget: float = 500, no_grad: bool = True
) -> tuple[dict, list[dict]]:
    """The Diagnosis (as a dict, without its steps) and the child's steps, from a parent that sees ``plants``."""
    code = PARENT.format(
        build=textwrap.dedent(build),
        outcome=outcome,
        repro_dir=str(tmp_path / "repro"),
        budget=budget,
        no_grad=no_grad,
        here=str(tmp_path),
    )
    done = run_python(tmp_path, plants, code)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("DIAGNOSIS ", "STEPS ")))
    return json.loads(lines["DIAGNOSIS"]), json.loads(lines["STEPS"])


def assert_repro_tracks_the_plant(tmp_path: Path, diagnosis: dict, plants: str) -> None:
    repro = diagnosis["repro"]
    assert repro and Path(repro).is_file(), diagnosis
    source = Path(repro).read_text()
    assert "pytest_inductor_templates" not in source
    with_plant = run_repro(tmp_path, repro, plants)
    assert with_plant.returncode == 1, with_plant.stdout + with_plant.stderr
    assert "compiled differs from eager" in with_plant.stdout
    without = run_repro(tmp_path, repro, "")
    assert without.returncode == 0, without.stdout + without.stderr
    assert "the fault is gone" in without.stdout


def test_planted_lowering_on_a_graphnet_sample(tmp_path: Path) -> None:
    """Plant: Inductor's lowering of aten.sigmoid multiplies by 1.001."""
    root = tmp_path / "corpus"
    write_sample(root / "gated", {"model.py": SIGMOID_MODEL, "weight_meta.py": SIGMOID_META})
    build = f"""
    from pytest_inductor_templates.samples.graphnet import GraphNetSample
    build = GraphNetSample(Path({str(root)!r}), "gated")
    selection = Selection(template=Template("default", "the defaults"))
    """
    diagnosis, steps = diagnosed(tmp_path, "sigmoid", build)
    assert diagnosis["stage"] == "inductor / lowerings: sigmoid", steps
    assert diagnosis["op"] == "aten.sigmoid (model.py:9)", steps
    assert diagnosis["kind"] == "miscompile", steps
    assert diagnosis["figures"].startswith("RMSE against float64 at aten.sigmoid (model.py:9): compiled ")
    assert diagnosis["setting"] == "no settings (the backend's defaults)"
    assert diagnosis["partial"] is None and diagnosis["failed"] is None, diagnosis
    assert diagnosis["summary"] == (
        "inductor / lowerings: sigmoid; setting: no settings (the backend's defaults); "
        "first diverging op: aten.sigmoid (model.py:9); miscompile"
    )
    assert_repro_tracks_the_plant(tmp_path, diagnosis, "sigmoid")
    unplanted, _ = diagnosed(tmp_path, "", build)  # without the plant the item passes: nothing to diagnose
    assert unplanted["summary"] == "not reproduced with a fresh Inductor cache: pass", unplanted
