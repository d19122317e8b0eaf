"""The diagnosis of a failing item, on real CPU compiles with planted compiler faults (``diagnose_plants``).

Each test runs its parent side in a subprocess that sees the plant (as the pytest process of a broken install
would), calls ``diagnose`` there (which spawns its own child), then runs the standalone repro with the plant
(exit 1) and without it (exit 0). Without the plant, nothing fails: the diagnosis says it does not reproduce.
"""

from __future__ import annotations

import itertools
import json
import textwrap
from pathlib import Path

import pytest
from diagnose_plants import run_python, run_repro
from graphnet_tree import tensor_meta, write_sample

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
                           no_grad={no_grad}, sys_path=[{here!r}], name="planted"{extra})
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

SIGMOID_META = tensor_meta("L_x_", [4, 16], device="cuda:0") + tensor_meta(
    "L_self_modules_fc_parameters_weight_", [8, 16], device="cuda:0", std=0.3
)


def diagnosed(
    tmp_path: Path,
    plants: str,
    build: str,
    outcome: str = "accuracy_fail",
    budget: float = 500,
    no_grad: bool = True,
    extra: str = "",
) -> tuple[dict, list[dict]]:
    """The Diagnosis (as a dict, without its steps) and the child's steps, from a parent that sees ``plants``;
    ``extra``: more of the request's fields (``, processes=1``)."""
    code = PARENT.format(
        extra=extra,
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


@pytest.mark.slow  # the plugin-level test (test_diagnose_wiring.py) plants the same fault on CI
def test_planted_lowering_on_a_graphnet_sample(tmp_path: Path) -> None:
    """Plant: Inductor's lowering of aten.sigmoid multiplies by 1.001."""
    root = tmp_path / "corpus"
    write_sample(root / "gated", {"model.py": SIGMOID_MODEL, "weight_meta.py": SIGMOID_META})
    build = f"""
    from pytest_inductor_templates.samples.graphnet import GraphNetSample
    build = GraphNetSample(Path({str(root)!r}), "gated")
    selection = Selection(template=Template("default", "the defaults"))
    """
    diagnosis, steps = diagnosed(tmp_path, "sigmoid", build, extra=", threads=3")
    assert diagnosis["stage"] == "inductor / lowerings: sigmoid", steps
    prepared = next(r for r in steps if r["step"] == "prepared")
    assert prepared["threads"] == 3 and prepared["conftests_seconds"] >= 0 and prepared["tf32_seconds"] >= 0, (
        steps
    )  # the item's
    assert next(r for r in steps if r["step"] == "saved")["frozen"] > 100_000, steps  # torch, out of gc's reach
    eager = next(r for r in steps if r["step"] == "bisect_check" and r["backend"] == "eager")
    ready = next(r["at"] for r in steps if r["step"] == "helper" and r.get("ready"))
    if ready < next(r["at"] for r in steps if r["step"] == "capture"):  # the helper was up while this one captured
        assert eager.get("pid"), steps  # so it checked the first stage meanwhile
    checked = next(r for r in steps if r["step"] == "repro_check")
    assert checked["code"] == 1 and checked.get("pid"), steps  # by the helper kept, while this process localised
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


USER_MODELS = """
import torch


class Gate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 8)

    def forward(self, x):
        y = self.fc(x)
        return torch.tanh(y) * y
"""


@pytest.mark.slow
def test_the_one_setting_of_a_three_setting_template_that_triggers_a_fault(tmp_path: Path) -> None:
    """Plant: aten.tanh's lowering multiplies by 1.001 only under aggressive_fusion=True; a user model checked as
    inductor_check does (a pickled copy, its class found through sys_path, calls with grad)."""
    (tmp_path / "usermodels.py").write_text(USER_MODELS)
    build = """
    import torch
    from usermodels import Gate
    torch.manual_seed(0)
    build = PickledModel.of(Gate(), [Inputs((torch.randn(4, 16),))])
    settings = {"epilogue_fusion": False, "aggressive_fusion": True, "shape_padding": True}
    selection = Selection(template=Template("trio", "three settings", settings))
    """
    diagnosis, steps = diagnosed(tmp_path, "tanh_aggressive_fusion", build, no_grad=False)
    assert diagnosis["stage"] == "inductor / lowerings: tanh", steps
    assert diagnosis["setting"] == "aggressive_fusion=True", steps
    assert diagnosis["op"] == "aten.tanh (usermodels.py:12)", steps
    assert diagnosis["kind"] == "miscompile", steps
    assert_repro_tracks_the_plant(tmp_path, diagnosis, "tanh_aggressive_fusion")
    assert "'aggressive_fusion': True" in Path(diagnosis["repro"]).read_text()


@pytest.mark.slow
def test_planted_decomposition(tmp_path: Path) -> None:
    """Plant: Inductor's decomposition of aten.hardswish multiplies by 1.001 (seen from aot_eager_decomp_partition)."""
    build = """
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Hardswish())
    build = PickledModel.of(model, [Inputs((torch.randn(4, 16),))])
    selection = Selection(template=Template("default", "the defaults"))
    """
    diagnosis, steps = diagnosed(tmp_path, "hardswish_decomp", build)
    assert diagnosis["stage"] == "aot_eager_decomp_partition / decomposition: aten.hardswish.default", steps
    assert diagnosis["op"] == "aten.hardswish (decomposed)", steps
    assert diagnosis["kind"] == "miscompile", steps
    assert "at the outputs (call 1 of 2: out)" in diagnosis["figures"], diagnosis
    after = {before["step"]: r["compiles"] for before, r in itertools.pairwise(steps) if r["step"] == "counts"}
    assert after["kind"] == after["operator"], steps  # the failing check's own float64 figures: no compile
    assert_repro_tracks_the_plant(tmp_path, diagnosis, "hardswish_decomp")


BF16_MODEL = SIGMOID_MODEL.replace("torch.sigmoid(linear)", "torch.cos(linear)")
BF16_META = SIGMOID_META.replace("torch.float32", "torch.bfloat16")


@pytest.mark.slow
def test_bf16_failure_that_precision_casts_fix_is_numerics(tmp_path: Path) -> None:
    """Plant: bf16 cos 3% off unless Inductor emulates eager's precision casts (emulate_precision_casts)."""
    root = tmp_path / "corpus"
    write_sample(root / "wave", {"model.py": BF16_MODEL, "weight_meta.py": BF16_META})
    build = f"""
    from pytest_inductor_templates.samples.graphnet import GraphNetSample
    build = GraphNetSample(Path({str(root)!r}), "wave")
    selection = Selection(template=Template("default", "the defaults"))
    """
    diagnosis, steps = diagnosed(tmp_path, "cos_bf16", build)
    assert diagnosis["stage"] == "inductor / inductor_emulate_precision_casts", steps
    assert diagnosis["op"] == "aten.cos (model.py:9)", steps
    assert diagnosis["kind"] == "numerics", steps
    assert diagnosis["figures"].endswith("emulate_precision_casts fixes it"), diagnosis
    assert_repro_tracks_the_plant(tmp_path, diagnosis, "cos_bf16")


@pytest.mark.slow
def test_a_bisection_stopped_part_way_keeps_the_stage_and_leaves_the_bisector_clean(tmp_path: Path) -> None:
    """Plants: sigmoid's lowering is wrong, and hangs once the bisector bisects lowerings; the child is stopped
    there (as the budget stops it), and the stage comes from the checks it logged."""
    marker = tmp_path / "hanging"
    root = tmp_path / "corpus"
    write_sample(root / "gated", {"model.py": SIGMOID_MODEL, "weight_meta.py": SIGMOID_META})
    code = f"""
import json, os
from pathlib import Path
from pytest_inductor_templates.diagnose import DiagnosisRequest
from pytest_inductor_templates.diagnose.process import run_in_child
from pytest_inductor_templates.machine import CPU
from pytest_inductor_templates.samples.graphnet import GraphNetSample
from pytest_inductor_templates.templates.registry import Template
from pytest_inductor_templates.templates.selection import Selection
marker = Path({str(marker)!r})
request = DiagnosisRequest(GraphNetSample(Path({str(root)!r}), "gated"), Selection(template=Template("default", "")),
                           CPU, "accuracy_fail", Path({str(tmp_path / "repro")!r}), budget_seconds=550)
diagnosis = run_in_child(request, stop_when=marker.exists)
state_dir = marker.read_text()
from torch._inductor.compiler_bisector import CompilerBisector, get_is_bisection_enabled
print("RESULT " + json.dumps({{"partial": diagnosis.partial, "stage": diagnosis.stage, "failed": diagnosis.failed,
      "state_dir": state_dir, "state_dir_left": os.path.exists(state_dir), "enabled": get_is_bisection_enabled()}}))
"""
    env_plants = "sigmoid,hang_bisecting_lowerings"
    import os

    os.environ["INDUCTOR_TEST_MARKER"] = str(marker)
    try:
        done = run_python(tmp_path, env_plants, code)
    finally:
        del os.environ["INDUCTOR_TEST_MARKER"]
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["stage"] == "inductor / lowerings", result
    assert result["partial"] == "stage only, from the bisection's checks so far (stopped at the budget of 550s)"
    assert result["failed"] is None
    assert "inductor-diagnose-" in result["state_dir"], result  # the bisector's state lived in the work folder,
    assert not result["state_dir_left"]  # which went with the child
    assert result["enabled"] is False


@pytest.mark.slow
def test_planted_compile_failure(tmp_path: Path) -> None:
    """Plant: Inductor's lowering of aten.relu raises."""
    build = """
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
    build = PickledModel.of(model, [Inputs((torch.randn(4, 16),))])
    selection = Selection(template=Template("default", "the defaults"))
    """
    diagnosis, steps = diagnosed(tmp_path, "relu_raises", build, outcome="compile_fail")
    assert diagnosis["stage"] == "inductor / lowerings: relu", steps
    assert diagnosis["op"] is None and diagnosis["kind"] is None  # those are for accuracy failures
    repro = diagnosis["repro"]
    with_plant = run_repro(tmp_path, repro, "relu_raises")
    assert with_plant.returncode == 1, with_plant.stdout + with_plant.stderr
    assert "compiled raised" in with_plant.stdout and "planted: no lowering for relu" in with_plant.stdout
    assert run_repro(tmp_path, repro, "").returncode == 0
