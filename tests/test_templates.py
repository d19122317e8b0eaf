"""The registry: built-ins valid on this torch, requirements per device, user templates."""

from __future__ import annotations

import pytest

from conftest import no_cuda_machine, usage_error_line
from pytest_inductor_templates.machine import CPU, Device
from pytest_inductor_templates.templates.registry import BUILTIN_TEMPLATES, Template, TemplateRegistry

H200 = Device("cuda:0", "cuda", "NVIDIA H200", (9, 0))
A100 = Device("cuda:0", "cuda", "NVIDIA A100", (8, 0))


@pytest.mark.parametrize("template", BUILTIN_TEMPLATES, ids=lambda t: t.name)
def test_builtin_settings_are_valid_for_installed_torch(template: Template) -> None:
    assert template.unavailable_reason() is None


def test_freezing_is_always_a_scoped_patch_and_inference_only() -> None:
    freezing = TemplateRegistry()["freezing"]
    assert freezing.config_patches == {"freezing": True}
    assert freezing.compile_options == {}
    assert freezing.requires.inference_only
    user = Template("mine", "", {"freezing": True, "max_autotune": True})
    assert user.config_patches == {"freezing": True} and user.compile_options == {"max_autotune": True}


def test_gemm_backend_templates_turn_gemm_autotuning_on() -> None:
    # max_autotune_gemm_backends alone changes nothing (measured: docs/design.md)
    for name in ("tma", "cutlass", "aten"):
        assert TemplateRegistry()[name].settings["max_autotune_gemm"] is True


def test_device_requirements() -> None:
    registry = TemplateRegistry()
    assert registry["cudagraphs"].device_problem(CPU) == "needs a cuda device, not cpu"
    assert registry["cudagraphs"].device_problem(A100) is None
    assert registry["default"].device_problem(CPU) is None


def test_tma_falls_back_below_sm90_and_says_so() -> None:
    tma = TemplateRegistry()["tma"]
    assert tma.device_problem(A100) is None
    assert tma.fallback_note(A100) == (
        "tma: cuda:0 has compute capability 8.0: no TMA; the non-TMA Triton GEMM templates are autotuned instead"
    )
    assert tma.fallback_note(H200) is None


def test_capability_without_fallback_is_a_device_problem() -> None:
    hopper_only = Template(
        "hopper",
        "",
        requires=TemplateRegistry()["tma"].requires.__class__(device_types=("cuda",), min_capability=(9, 0)),
    )
    assert hopper_only.device_problem(A100) == ("needs compute capability >= 9.0; cuda:0 has 8.0")
    assert hopper_only.machine_problem([CPU, A100]) == hopper_only.device_problem(A100)
    assert hopper_only.machine_problem([CPU, H200]) is None


def test_key_this_torch_lacks_makes_template_unavailable_naming_it() -> None:
    future = Template("future", "", {"triton.enable_warp_drive": True})
    assert "unknown Inductor option 'triton.enable_warp_drive'" in future.unavailable_reason()
    wrong_type = Template("typo", "", {"max_autotune": "yes"})
    assert wrong_type.unavailable_reason() == "Inductor option 'max_autotune' takes bool, got str 'yes'"


def test_missing_package_is_reported() -> None:
    needs = Template(
        "needs", "", requires=TemplateRegistry()["default"].requires.__class__(packages=("surely_not_installed_pkg",))
    )
    assert needs.machine_problem([CPU]) == "the Python package 'surely_not_installed_pkg' is not installed"


CONFTEST_TEMPLATES = """
from pytest_inductor_templates import Template

def pytest_inductor_templates(config):
    return [
        {"name": "tuned_frozen", "extends": "max_autotune", "settings": {"freezing": True},
         "description": "max_autotune with frozen weights"},
        Template("plain_triton_off", "no cpp wrapper", {"cpp_wrapper": False}),
    ]
"""

TOML_TEMPLATES = """
[templates.from_toml]
description = "coordinate descent only"
settings = { coordinate_descent_tuning = true }

[templates.from_toml_child]
extends = "from_toml"
settings = { "triton.cudagraphs" = true }
requires = { device_types = ["cuda"], min_capability = "8.0" }

[templates.from_the_future]
settings = { "triton.enable_warp_drive" = true }
"""


@no_cuda_machine
def test_user_templates_are_listed_beside_builtins(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST_TEMPLATES)
    pytester.path.joinpath("templates.toml").write_text(TOML_TEMPLATES)
    pytester.makeini("[pytest]\ninductor_templates_file = templates.toml\n")
    result = pytester.runpytest_inprocess("--inductor-list-templates")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "Inductor templates for torch * on cpu*",
            "default (built-in): available",
            "cudagraphs (built-in): UNAVAILABLE: needs a cuda device; this machine has only cpu",
            "from_toml (templates.toml): available",
            "from_toml_child (templates.toml): UNAVAILABLE: needs a cuda device; this machine has only cpu",
            "    settings: coordinate_descent_tuning=True, triton.cudagraphs=True",
            "    requires: cuda, sm >= 8.0",
            "from_the_future (templates.toml): UNAVAILABLE: unknown Inductor option 'triton.enable_warp_drive'*",
            "tuned_frozen (conftest): available",
            "    max_autotune with frozen weights",
            "    settings: max_autotune=True, max_autotune_gemm=True, coordinate_descent_tuning=True, "
            "epilogue_fusion=True",
            "    scoped config patch: freezing=True",
            "plain_triton_off (conftest): available",
        ]
    )
    assert "passed" not in result.stdout.str()


def test_a_named_user_template_this_torch_cannot_take_is_a_usage_error(pytester: pytest.Pytester) -> None:
    """Named on purpose, it stops the run in one line before any test runs (as the same key in --inductor-options
    does); under all it is left out, with the reason in the header."""
    pytester.path.joinpath("templates.toml").write_text(TOML_TEMPLATES)
    pytester.makepyfile("def test_uses(compiled_model):\n    raise AssertionError('ran')\n")
    for value in ("from_the_future", "default,from_the_future"):
        named = pytester.runpytest_inprocess(
            "--inductor-templates-file=templates.toml", f"--inductor-template={value}", "--inductor-devices=cpu"
        )
        assert usage_error_line(named).startswith(
            "ERROR: --inductor-template (command line): template 'from_the_future' (templates.toml) cannot run here: "
            "unknown Inductor option 'triton.enable_warp_drive'"
        )
    pytester.makeini("[pytest]\ninductor_templates_file = templates.toml\ninductor_template = from_the_future\n")
    assert "inductor_template (tox.ini): template 'from_the_future'" in usage_error_line(pytester.runpytest_inprocess())
    every = pytester.runpytest_inprocess("--inductor-template=all", "--inductor-devices=cpu", "--collect-only")
    assert every.ret == pytest.ExitCode.OK, every.stdout.str()
    every.stdout.fnmatch_lines(
        ["inductor-templates: all: left out from_the_future: unknown Inductor option 'triton.enable_warp_drive'*"]
    )
    assert "test_uses[from_the_future]" not in every.stdout.str()


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        (
            "[templates.a]\nsetings = {}\n",
            "templates.toml: template 'a': unknown field 'setings'; did you mean 'settings'?",
        ),
        (
            '[templates.a]\nextends = "maxautotune"\n',
            "extends unknown template 'maxautotune'; did you mean 'max_autotune'?",
        ),
        ('[templates.a]\nextends = "b"\n[templates.b]\nextends = "a"\n', "extend each other in a cycle: a, b"),
        (
            '[templates.a]\nextends = ["default"]\n',
            "template 'a': 'extends' must be a template's name, got ['default']",
        ),
        ("[templates.a]\nextends = 5\n", "template 'a': 'extends' must be a template's name, got 5"),
        ("[templates.default]\n", "template 'default' (templates.toml) is already defined (built-in)"),
        ('[templates.a]\nrequires = { min_capability = "nine" }\n', 'requires.min_capability must look like "9.0"'),
        ("[templates.a\n", "is not valid TOML"),
        (
            '[templates.a]\nsettings = { max_autotune = true }\nscoped = ["max_autotun"]\n',
            "template 'a': 'scoped' names 'max_autotun', which is not among its settings; did you mean "
            "'max_autotune'? (max_autotune)",
        ),
        ('[templates."a,b"]\n', "templates.toml: template name 'a,b': use letters, digits, '_' and '.'"),
        ('[templates."x[y]-cpu::z"]\n', "template name 'x[y]-cpu::z': use letters, digits"),
        ('[templates.""]\n', "template name '': use letters, digits"),
        ("[templates.all]\n", "template name 'all' is reserved"),
        (b"[templates.a]\ndescription = '\xff'\n", "templates.toml is not UTF-8"),
        ("x = " + "[" * 2000 + "]" * 2000 + "\n", "is nested too deeply"),
        ("other = 1\n", "must hold only [templates.NAME] tables"),
    ],
)
def test_bad_templates_file_is_one_line(sentinel_test: pytest.Pytester, toml: str | bytes, expected: str) -> None:
    path = sentinel_test.path.joinpath("templates.toml")
    path.write_bytes(toml) if isinstance(toml, bytes) else path.write_text(toml)
    line = usage_error_line(sentinel_test.runpytest_inprocess("--inductor-templates-file=templates.toml"))
    assert expected in line


def test_missing_templates_file_is_one_line(sentinel_test: pytest.Pytester) -> None:
    line = usage_error_line(sentinel_test.runpytest_inprocess("--inductor-templates-file=nope.toml"))
    assert line.startswith("ERROR: --inductor-templates-file (command line): cannot read templates file")
    assert "nope.toml" in line


def test_bad_conftest_template_is_one_line(sentinel_test: pytest.Pytester) -> None:
    sentinel_test.makeconftest("def pytest_inductor_templates(config):\n    return [{'settings': {}}]\n")
    line = usage_error_line(sentinel_test.runpytest_inprocess("--inductor-template=default"))
    assert "must return Template objects or tables with a 'name'" in line


def test_bad_conftest_template_is_caught_at_collection_without_options(sentinel_test: pytest.Pytester) -> None:
    sentinel_test.makeconftest(
        "def pytest_inductor_templates(config):\n    return [{'name': 'x', 'extends': 'nope'}]\n"
    )
    sentinel_test.makepyfile(test_uses="def test_uses(compiled_model):\n    raise AssertionError('ran')\n")
    line = usage_error_line(sentinel_test.runpytest_inprocess())
    assert "conftest: template 'x': extends unknown template 'nope'" in line
