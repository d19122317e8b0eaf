"""The GraphNet loader on its own: metadata by ast, seeded tensors, device rewriting, broken samples."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from graphnet_tree import BROKEN, GOOD_META, tensor_meta, write_sample, write_tree

from pytest_inductor_templates.samples.base import SampleError
from pytest_inductor_templates.samples.graphnet import GraphNetSample, discover


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "corpus")


def test_discover_finds_every_sample_dir_sorted(corpus: Path) -> None:
    assert discover(corpus) == sorted(["nlp/tiny", "vision/tiny", *BROKEN])


def test_metadata_is_read_without_executing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXECUTED", raising=False)
    poisoned = (
        "import os\nos.environ['EXECUTED'] = 'module'\n\n"
        "class Program_input_tensor_meta_y:\n    name = 'y'\n    shape = [2]\n    dtype = 'torch.float32'\n"
        "    data = __import__('os').environ.setdefault('EXECUTED', 'class')\n"
    )
    sample = GraphNetSample(write_sample(tmp_path / "c" / "s", {"input_meta.py": poisoned}).parent, "s")
    with pytest.raises(
        SampleError, match=r"input_meta.py: Program_input_tensor_meta_y.data at line 8 is not a literal"
    ):
        sample.metas  # noqa: B018
    import os

    assert "EXECUTED" not in os.environ


def test_tensors_follow_the_metadata_and_the_seed(corpus: Path) -> None:
    sample = GraphNetSample(corpus, "vision/tiny", weights="inputs")
    first, again = sample.make_inputs("cpu")[0].kwargs, sample.make_inputs("cpu")[0].kwargs
    for name in first:
        assert torch.equal(first[name], again[name]), name
    ids = first["L_ids_"]
    assert ids.dtype == torch.int64 and int(ids.min()) >= 3 and int(ids.max()) <= 7
    assert torch.equal(first["L_scale_"], torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
    assert first["L_mask_"].dtype == torch.bool and first["L_mask_"].shape == (4, 6)
    assert torch.all(first["L_self_modules_fc_parameters_bias_"] == 0.1)  # std 0: the mean, exactly
    x = first["L_x_"]
    assert x.shape == (4, 16) and abs(float(x.mean()) - 0.5) < 0.15 and float(x.std()) < 0.4  # randn*std*0.2+mean
    other = GraphNetSample(corpus, "nlp/tiny").make_inputs("cpu")[0].kwargs
    assert not torch.equal(other["L_x_"], x)  # seeded per sample


def test_the_second_input_set_keeps_the_weights_and_varies_every_input(corpus: Path) -> None:
    sample = GraphNetSample(corpus, "vision/tiny", weights="inputs")
    first, second = (inputs.kwargs for inputs in sample.make_inputs("cpu"))
    for name in ("L_self_modules_fc_parameters_weight_", "L_self_modules_fc_parameters_bias_"):
        assert second[name] is first[name]  # the module's state: the same tensors
    assert not torch.equal(second["L_x_"], first["L_x_"])  # floats redrawn by the metadata's rule
    assert abs(float(second["L_x_"].mean()) - 0.5) < 0.15
    ids = second["L_ids_"]  # integers redrawn within min_val/max_val
    assert not torch.equal(ids, first["L_ids_"]) and int(ids.min()) >= 3 and int(ids.max()) <= 7
    assert second["L_scale_"].tolist() == [6.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # literal data: rolled by one place
    assert second["L_mask_"].dtype == torch.bool and not torch.equal(second["L_mask_"], first["L_mask_"])


def test_a_constant_input_varies_around_its_value_on_the_second_call(tmp_path: Path) -> None:
    meta = GOOD_META.replace("std = 1.0", "std = 0.0")  # L_x_: the constant 0.5, as a captured all-0.5 image
    sample = GraphNetSample(write_sample(tmp_path / "c" / "s", {"weight_meta.py": meta}).parent, "s")
    first, second = (inputs.kwargs["L_x_"] for inputs in sample.make_inputs("cpu"))
    assert torch.all(first == 0.5)
    assert abs(float(second.mean()) - 0.5) < 0.05 and 0.1 < float(second.std()) < 0.3  # 0.5 + 0.2 * randn


SYMINT_MODEL = """
import torch


class GraphModule(torch.nn.Module):
    def forward(self, s0: torch.SymInt, L_x_: torch.Tensor):
        size = torch.Size([s0, s0])
        return (torch.nn.functional.interpolate(L_x_, size=size, mode="bilinear", align_corners=False),)
"""

SYMINT_META = tensor_meta("s0", [], "torch.int64", mean=None, std=None, data=[4]) + tensor_meta("L_x_", [1, 2, 8, 8])


# Inductor's CPU lowering imports torch.utils.mkldnn, whose ScriptModules warn on torch 2.13
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_a_symint_parameter_gets_a_python_int_and_compiles(tmp_path: Path) -> None:
    """As torchvision's fcn_resnet101 graph does: with a 0-dim tensor for the size, Inductor fails ("torch.Size()
    takes an iterable of 'int' (item 0 is 'FunctionalTensor')"); with the int the graph was captured with, not."""
    from pytest_inductor_templates.compile.isolation import isolated_compile_state

    files = {"model.py": SYMINT_MODEL, "weight_meta.py": SYMINT_META}
    sample = GraphNetSample(write_sample(tmp_path / "c" / "s", files).parent, "s")
    assert sample.symint_parameters == {"s0"}
    first, second = sample.make_inputs("cpu")
    assert first.kwargs["s0"] == second.kwargs["s0"] == 4 and type(first.kwargs["s0"]) is int
    model = sample.make_model("cpu")
    with isolated_compile_state(), torch.no_grad():
        compiled = torch.compile(model)(**first.kwargs)
    assert compiled[0].shape == (1, 2, 4, 4) and torch.allclose(compiled[0], model(**first.kwargs)[0])


def test_hard_coded_cuda_strings_run_on_cpu(corpus: Path) -> None:
    sample = GraphNetSample(corpus, "vision/tiny")
    model = sample.make_model("cpu")
    out = model(**sample.make_inputs("cpu")[0].kwargs)
    assert out[0].device.type == "cpu" and out[0].shape == (4, 6)


@pytest.mark.parametrize("relative", list(BROKEN))
def test_each_broken_sample_names_its_reason(corpus: Path, relative: str) -> None:
    sample = GraphNetSample(corpus, relative)
    with pytest.raises(SampleError) as raised:
        sample.make_model("cpu")
        sample.make_inputs("cpu")
    assert BROKEN[relative][1] in str(raised.value)


def test_graphnet_float_literals_are_read_without_executing_anything(tmp_path: Path) -> None:
    """GraphNet writes ``std = float("nan")`` (torchaudio/squim_subjective), infinities and negative numbers:
    they are literals to it, and to the loader; any other call is still refused."""
    meta = GOOD_META.replace("mean = 0.5\n    std = 1.0", 'mean = -0.5\n    std = float("nan")')
    meta = meta.replace("min_val = 3\n    max_val = 7", 'min_val = -2\n    max_val = float("7")')
    sample = GraphNetSample(write_sample(tmp_path / "c" / "s", {"weight_meta.py": meta}).parent, "s")
    by_name = {m.name: m for m in sample.metas}
    assert by_name["L_x_"].mean == -0.5 and math.isnan(by_name["L_x_"].std)
    assert (by_name["L_ids_"].min_val, by_name["L_ids_"].max_val) == (-2, 7.0)
    x = sample.make_inputs("cpu")[0].kwargs["L_x_"]
    assert torch.equal(x, torch.full((4, 16), -0.5))  # a NaN std: the mean, as GraphNet's nan_to_num gives
    for call in ('float("nan") + 1', 'float("bad")', "len([1])", "float(x)"):
        bad = GOOD_META.replace("std = 1.0", f"std = {call}")
        broken = GraphNetSample(write_sample(tmp_path / "b" / "s", {"weight_meta.py": bad}).parent, "s")
        with pytest.raises(SampleError, match=r"L_x_\.std at line 8 is not a literal"):
            broken.metas  # noqa: B018


def test_symlinked_sample_directories_are_found_once(tmp_path: Path) -> None:
    elsewhere = write_sample(tmp_path / "elsewhere" / "real")
    root = tmp_path / "corpus"
    write_sample(root / "here")
    (root / "linked").symlink_to(elsewhere, target_is_directory=True)
    (root / "here" / "loop").symlink_to(root, target_is_directory=True)  # a cycle: not followed
    (root / "here" / "again").symlink_to(root / "linked", target_is_directory=True)  # a tree already walked
    assert discover(root) == ["here", "linked"]
