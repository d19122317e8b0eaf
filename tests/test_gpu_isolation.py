"""On a CUDA host: a CUDA fault ends its own item (on the last GPU, cuda:1 on a host with two). With two GPUs or
more: every GPU works, in one process and with one xdist worker per GPU. Run with
``pytest tests/test_gpu_isolation.py -m gpu -s``; skipped without the GPUs each test needs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from graphnet_tree import tensor_meta, write_fault_sample

from conftest import QUIET, outcomes, run_pytest
from pytest_inductor_templates.runs.files import load

pytestmark = pytest.mark.gpu
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
BUILTINS = (  # a few small built-ins: the point is that every GPU works, not the GPU-sized ones' compile time
    "--inductor-samples", "--inductor-template=default,cudagraphs", "-k", "conv_bn or launch_bound or attention",
)  # fmt: skip
OUT_OF_BOUNDS = """
import torch


class GraphModule(torch.nn.Module):
    def forward(self, L_x_, L_index_):
        return (L_x_[L_index_] * 2,)
"""
OUT_OF_BOUNDS_META = tensor_meta("L_x_", [4, 8], device="cuda:0") + tensor_meta(
    "L_index_", [16], "torch.int64", "cuda:0", None, None, min_val=1000000, max_val=2000000
)


SAMPLES_ONLY = (*QUIET, "-W", "ignore", "-m", "inductor_sample", "--inductor-results=run.jsonl")


@two_gpus
def test_builtins_pass_on_both_gpus_in_one_process(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, *BUILTINS, "--inductor-devices=cuda:0,cuda:1", "--benchmark-skip", *SAMPLES_ONLY)
    found = outcomes(tmp_path)
    checks = {k: v for k, v in found.items() if k[3] == "check"}
    assert {k[2] for k in checks} == {"cuda:0", "cuda:1"}
    assert set(checks.values()) == {"pass"}, result.stdout[-4000:]
    assert result.returncode == 0


@two_gpus
def test_builtins_pass_with_one_xdist_worker_per_gpu(tmp_path: Path) -> None:
    """-n equal to the number of GPUs: each worker owns one GPU (it sees it as cuda:0) and times there."""
    count = torch.cuda.device_count()
    result = run_pytest(tmp_path, "-n", str(count), *BUILTINS, "--benchmark-max-time=0.05", *SAMPLES_ONLY)
    found = outcomes(tmp_path)
    assert set(found.values()) == {"pass"}, result.stdout[-4000:]
    assert {k[2] for k in found} == {"cuda:0"}
    timed = [r for r in load(str(tmp_path / "run.jsonl")).records if r.kind == "bench"]
    assert timed and all(r.median is not None for r in timed)
    assert "speedup over eager" in result.stdout
    assert result.returncode == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_cuda_fault_ends_its_own_item_and_the_next_items_pass(tmp_path: Path) -> None:
    device = f"cuda:{torch.cuda.device_count() - 1}"  # the last GPU: on two, the cuda:1 that once faulted alone
    write_fault_sample(tmp_path / "corpus" / "oob", OUT_OF_BOUNDS, OUT_OF_BOUNDS_META)
    result = run_pytest(
        tmp_path, "--inductor-samples=corpus", "--inductor-samples", "--inductor-template=default",
        f"--inductor-devices={device}", "-k", "oob or conv_bn or launch_bound", "--benchmark-skip", *SAMPLES_ONLY,
    )  # fmt: skip
    found = outcomes(tmp_path)
    assert found[("corpus/oob", "eager", device, "check")] == "crashed"
    assert found[("corpus/oob", "default", device, "check")] == "crashed"
    others = {k: v for k, v in found.items() if k[0] != "corpus/oob" and k[3] == "check"}
    assert len(others) == 4 and set(others.values()) == {"pass"}, result.stdout[-4000:]
    run = load(str(tmp_path / "run.jsonl"))
    assert "CUDA fault during the eager call" in run.cells[("corpus/oob", "eager", device)].verdict.reason
    assert result.returncode == 1
