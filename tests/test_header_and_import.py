"""The session header, and staying out of torch's import cost when the plugin is not used."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import no_cuda_machine

TORCH_PROBE_CONFTEST = """
import sys

def pytest_unconfigure(config):
    with open("torch_imported.txt", "w") as out:
        out.write(str("torch" in sys.modules))
"""


def test_importing_the_plugin_does_not_import_torch() -> None:
    code = "import sys, pytest_inductor_templates.plugin; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "ini",
    [None, "[pytest]\ninductor_template = default\n", "[pytest]\ninductor_timeout = abc\n"],
    ids=["no-ini", "ini-selection", "bad-ini-value"],
)
def test_pytest_help_does_not_import_torch(tmp_path: Path, ini: str | None) -> None:
    """``--help`` reads and validates nothing of the plugin's: fast, and shown even when the ini file is wrong."""
    if ini is not None:
        tmp_path.joinpath("pytest.ini").write_text(ini)
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "pytest", "--help"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert "--inductor-template=TEMPLATE" in out.stdout
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "pytest_inductor_templates.items.session" in imported  # the plugin was loaded
    assert "torch" not in imported


def test_a_plain_benchmark_run_is_left_alone(pytester: pytest.Pytester) -> None:
    """pytest-benchmark JSON of a session that does not use the plugin gets nothing of it, and no torch import."""
    pytester.makeconftest(TORCH_PROBE_CONFTEST)
    pytester.makepyfile("def test_timed(benchmark):\n    benchmark(sum, range(10))\n")
    result = pytester.runpytest_subprocess("--benchmark-json=run.json", "--benchmark-max-time=0.01")
    result.assert_outcomes(passed=1)
    data = json.loads(pytester.path.joinpath("run.json").read_text())
    assert "inductor_templates" not in data and "torch" not in data["machine_info"]
    assert pytester.path.joinpath("torch_imported.txt").read_text() == "False"


def test_run_without_plugin_options_does_not_import_torch(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(TORCH_PROBE_CONFTEST)
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["inductor-templates: template default (no --inductor-* option given)"])
    assert pytester.path.joinpath("torch_imported.txt").read_text() == "False"


def test_header_shows_torch_devices_selection_and_settings(pytester: pytest.Pytester) -> None:
    import torch

    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_inprocess(
        "--inductor-template=max_autotune,freezing",
        "--inductor-fullgraph",
        "--inductor-dynamic",
        "--inductor-devices=cpu",
    )
    result.stdout.fnmatch_lines(
        [
            f"inductor-templates: torch {torch.__version__}; visible devices: cpu*",
            "inductor-templates: template max_autotune, template freezing from --inductor-template (command line); "
            "backend inductor, fullgraph True, dynamic true",
            "inductor-templates: devices: cpu",
            "inductor-templates: max_autotune: effective Inductor settings: max_autotune=True, "
            "max_autotune_gemm=True, coordinate_descent_tuning=True, epilogue_fusion=True",
            "inductor-templates: freezing: effective Inductor settings: freezing=True",
            "inductor-templates: freezing: applied as a scoped config patch: freezing",
            "inductor-templates: freezing: inference only: compiled calls run under torch.no_grad()",
        ]
    )


def test_header_expands_a_mode_and_names_ini_source(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ninductor_mode = max-autotune\ninductor_dynamic = false\ninductor_devices = cpu\n")
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_inprocess()
    result.stdout.fnmatch_lines(
        [
            "inductor-templates: mode max-autotune from inductor_mode (tox.ini); backend inductor, fullgraph False, "
            "dynamic false",
            "inductor-templates: devices: cpu",
            "inductor-templates: mode-max-autotune: effective Inductor settings: max_autotune=True, "
            "triton.cudagraphs=True, coordinate_descent_tuning=True",
        ]
    )


@no_cuda_machine
def test_header_says_when_the_template_cannot_run_here(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_inprocess("--inductor-template=cudagraphs")
    result.stdout.fnmatch_lines(
        ["inductor-templates: skipped: template 'cudagraphs' is unavailable on cpu: needs a cuda device, not cpu"]
    )


def test_header_says_the_default_is_the_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest_inprocess("--inductor-fullgraph", "--inductor-devices=cpu")
    result.stdout.fnmatch_lines(
        [
            "inductor-templates: template default (no template, mode or options given: the default); "
            "backend inductor, fullgraph True, dynamic auto",
        ]
    )


def test_header_names_the_sample_timeout(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess(
        "--inductor-samples", "--inductor-timeout=30", "--inductor-devices=cpu", "--collect-only"
    )
    result.stdout.fnmatch_lines(["inductor-templates: a sample item is stopped after 30 s (--inductor-timeout)"])
