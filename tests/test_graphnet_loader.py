"""The GraphNet loader on its own: metadata by ast, seeded tensors, device rewriting, broken samples."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from graphnet_tree import BROKEN, write_sample, write_tree

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
    sample = GraphNetSample(corpus, "vision/tiny")
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
