"""Finding CUTLASS as Inductor does: the checkout's python/ packages (across the config-key move) and nvcc."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from torch._inductor import config

from pytest_inductor_templates.machine import _cutlass_section, cutlass_dir, cutlass_problem


def fake_checkout(root: Path) -> Path:
    for package in ("cutlass_library", "cutlass_cppgen", "pycute"):
        (root / "python" / package).mkdir(parents=True)
    return root


@pytest.fixture
def fake_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "cuda" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "nvcc").write_text("#!/bin/sh\n")
    (bin_dir / "nvcc").chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    return bin_dir / "nvcc"


def test_the_config_key_this_torch_reads_is_followed(tmp_path: Path, fake_nvcc: Path) -> None:
    section = _cutlass_section()
    assert section in ("cutlass", "cuda")  # torch >= 2.10 reads cutlass.cutlass_dir, older cuda.cutlass_dir
    checkout = fake_checkout(tmp_path / "cutlass")
    with config.patch({f"{section}.cutlass_dir": str(checkout)}):
        assert cutlass_dir() == str(checkout)
        assert cutlass_problem() is None
    assert "is not installed" in str(cutlass_problem())  # the default checkout does not exist here


def test_the_environment_variable_reaches_a_fresh_process(tmp_path: Path, fake_nvcc: Path) -> None:
    checkout = fake_checkout(tmp_path / "cutlass")
    env = {**os.environ, "TORCHINDUCTOR_CUTLASS_DIR": str(checkout)}
    code = "from pytest_inductor_templates.machine import package_missing; print(package_missing('cutlass_library'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"


def test_what_is_missing_is_named(tmp_path: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    section = _cutlass_section()
    (tmp_path / "partial" / "python" / "cutlass_library").mkdir(parents=True)
    with config.patch({f"{section}.cutlass_dir": str(tmp_path / "partial")}):
        problem = str(cutlass_problem())
    assert problem.startswith("the CUTLASS Python library (cutlass_library) is not installed: ")
    assert "set TORCHINDUCTOR_CUTLASS_DIR to a CUTLASS checkout" in problem
    if section == "cutlass":
        assert "has no python/cutlass_cppgen, python/pycute" in problem
    with config.patch({f"{section}.cutlass_dir": str(fake_checkout(tmp_path / "full"))}):
        monkeypatch.setenv("CUDA_HOME", str(tmp_path / "nowhere"))
        monkeypatch.setenv("PATH", str(tmp_path / "empty"))
        assert (
            cutlass_problem()
            == "nvcc is not found (on PATH or in CUDA_HOME/bin): Inductor compiles CUTLASS kernels with it"
        )
