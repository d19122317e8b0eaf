"""The template x device matrix for users' own tests, and the selection of templates and devices."""

from __future__ import annotations

import pytest
from inner_runs import runpytest_warm

from conftest import no_cuda_machine, usage_error_line

USER_TESTS = """
import pytest
import torch


def test_compiles(compiled_model):
    f = compiled_model(lambda x: x * 2)
    assert torch.equal(f(torch.ones(2)), torch.full((2,), 2.0))


def test_on_device(compiled_model, inductor_device):
    assert compiled_model(lambda x: x + 1)(torch.zeros(1, device=inductor_device)).device == inductor_device


def test_plain():
    pass


@pytest.mark.inductor_templates("aten")
def test_pinned(compiled_model, inductor_selection):
    assert inductor_selection.label == "aten"


@pytest.mark.inductor_templates(exclude=["freezing"])
def test_not_frozen(compiled_model, inductor_selection):
    assert inductor_selection.label != "freezing"
"""


def test_user_tests_are_parametrized_over_templates_and_devices(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_inprocess(
        "--inductor-template=default,freezing", "--inductor-devices=cpu,cuda", "--collect-only", "-q"
    )
    assert [line for line in result.stdout.lines if "::" in line] == [
        "test_user.py::test_compiles[default]",
        "test_user.py::test_compiles[freezing]",
        "test_user.py::test_on_device[default-cpu]",
        "test_user.py::test_on_device[default-cuda:0]",
        "test_user.py::test_on_device[freezing-cpu]",
        "test_user.py::test_on_device[freezing-cuda:0]",
        "test_user.py::test_plain",
        "test_user.py::test_pinned[aten]",
        "test_user.py::test_not_frozen[default]",
        "test_user.py::test_not_frozen[freezing]",
    ]


@no_cuda_machine
def test_unavailable_cells_are_skipped_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = runpytest_warm(
        pytester,
        "--inductor-template=default,freezing,cudagraphs",
        "--inductor-devices=cpu,cuda",
        "--inductor-cpu-probe=0",
        "-rs",
        "-W",
        "ignore::DeprecationWarning",
    )
    result.assert_outcomes(passed=7, skipped=7)
    result.stdout.fnmatch_lines_random(
        [
            "SKIPPED [[]3[]] test_user.py*: cuda:0 is not available: this machine has no CUDA device",
            "SKIPPED [[]2[]] test_user.py*: template 'cudagraphs' is unavailable on cpu: needs a cuda device, not cpu",
            "SKIPPED [[]1[]] test_user.py*: template 'freezing' excluded by @pytest.mark.inductor_templates",
        ]
    )


def test_all_means_every_template_available_here(pytester: pytest.Pytester) -> None:
    import torch

    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_inprocess("--inductor-template=all", "--collect-only", "-q", "-k", "test_compiles")
    ids = [line.split("[")[1].rstrip("]") for line in result.stdout.lines if "test_compiles[" in line]
    on_cpu = ["default", "cpp_wrapper", "max_autotune", "freezing", "aten"]
    if torch.cuda.is_available():
        assert set(on_cpu) <= set(ids) and "cudagraphs" in ids
    else:
        assert ids == on_cpu


def test_default_devices_are_cuda_if_any_else_cpu(pytester: pytest.Pytester) -> None:
    import torch

    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_inprocess("--inductor-template=default", "--collect-only", "-q", "-k", "on_device")
    expected = [f"cuda:{i}" for i in range(torch.cuda.device_count())] or ["cpu"]
    assert [line.split("-", 1)[1].rstrip("]") for line in result.stdout.lines if "on_device[" in line] == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--inductor-devices=gpu"], "--inductor-devices (command line): unknown device 'gpu'; use cpu, cuda, cuda:N"),
        (["--inductor-template=default,fastest"], "unknown template 'fastest'"),
        (["--inductor-template=all,default"], "all stands alone: give all by itself"),
    ],
)
def test_bad_matrix_options(sentinel_test: pytest.Pytester, args: list[str], expected: str) -> None:
    assert expected in usage_error_line(sentinel_test.runpytest_inprocess(*args))


def test_marker_with_unknown_template_fails_collection_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.inductor_templates('fastest')\ndef test_x(compiled_model):\n    pass\n"
    )
    result = pytester.runpytest_inprocess("--inductor-template=default", "--inductor-cpu-probe=0")
    result.stdout.fnmatch_lines(["*@pytest.mark.inductor_templates: unknown template 'fastest'*"])
    assert "Traceback" not in result.stdout.str()
    assert result.ret == pytest.ExitCode.INTERRUPTED
