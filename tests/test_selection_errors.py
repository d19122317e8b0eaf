"""Every bad selection input ends in one UsageError line (exit code 4) before any test runs."""

from __future__ import annotations

import json

import pytest

from conftest import usage_error_line

BAD_COMMAND_LINES = [
    (
        ["--inductor-template=cudagraphs", "--inductor-mode=reduce-overhead"],
        "--inductor-template (command line) and --inductor-mode (command line): choose one",
    ),
    (
        ["--inductor-mode=default", '--inductor-options={"max_autotune": true}'],
        "--inductor-mode (command line) and --inductor-options (command line): choose one",
    ),
    (
        ["--inductor-template=cudagrahs"],
        "unknown template 'cudagrahs'; did you mean 'cudagraphs'? Known: eager, default, triton,",
    ),
    (
        ["--inductor-mode=reduce_overhead"],
        "unknown torch.compile mode 'reduce_overhead'; did you mean 'reduce-overhead'? Modes of this torch:",
    ),
    (
        ["--inductor-options={bad json"],
        "--inductor-options (command line): the value is not valid JSON: Expecting property name enclosed "
        "in double quotes at line 1 column 2 (char 1)",
    ),
    (["--inductor-options=[1, 2]"], "expected a JSON object of Inductor options, got list"),
    (
        ['--inductor-options={"max_autotun": true}'],
        "unknown Inductor option 'max_autotun'; did you mean 'max_autotune'",
    ),
    (['--inductor-options={"max_autotune": "yes"}'], "Inductor option 'max_autotune' takes bool, got str 'yes'"),
    (["--inductor-options=@missing.json"], "cannot read"),
    (["--inductor-backend=aot_eagr"], "unknown torch.compile backend 'aot_eagr'; did you mean 'aot_eager'?"),
    (
        ["--inductor-backend=eager", "--inductor-template=cudagraphs"],
        "template 'cudagraphs' sets Inductor options, which backend 'eager' cannot take",
    ),
    (
        ["--inductor-backend=eager", "--inductor-mode=reduce-overhead"],
        "--inductor-mode (command line): backend 'eager' takes no mode= argument",
    ),
    (
        ["--inductor-backend=aot_eager", '--inductor-options={"freezing": true}'],
        "--inductor-options (command line): backend 'aot_eager' takes no options= argument",
    ),
    (
        ["--inductor-timing-threads=0"],
        "--inductor-timing-threads (command line): expected a whole number of threads such as 4 (more than 0), got '0'",
    ),
    (
        ["--inductor-timing-processes=2.5"],
        "--inductor-timing-processes (command line): expected a whole number of processes such as 3, or a first and "
        "a most such as 4-8, got '2.5'",
    ),
    (
        ["--inductor-timing-processes=5-3"],
        "--inductor-timing-processes (command line): expected a whole number of processes such as 3, or a first and "
        "a most such as 4-8 (the first above 0, the most at least the first), got '5-3'",
    ),
    (
        ["--inductor-speedup-precision=tight"],
        "--inductor-speedup-precision (command line): expected a percentage above 0 and below 100 such as 2%, "
        "got 'tight'",
    ),
    (["--inductor-results=."], "is a directory: name a file, such as results.jsonl"),
    (
        ["--inductor-second-opinion=strict"],
        "--inductor-second-opinion (command line): expected on or off, got 'strict'",
    ),
    (["--inductor-dynamic=maybe"], "--inductor-dynamic (command line): expected true, false or auto, got 'maybe'"),
    (
        ["--inductor-sample-dtype=float8"],
        "--inductor-sample-dtype (command line): expected one of float16, bfloat16, float32, float64, got 'float8'",
    ),
    (
        ["--inductor-isolation=thread"],
        "--inductor-isolation (command line): expected one of process, none, got 'thread'",
    ),
    (
        ["--inductor-template=all,eager"],
        "--inductor-template (command line): all stands alone: give all by itself, or a comma list of templates "
        "without it (not eager)",
    ),
    (["--inductor-results=test_sentinel.py/run.jsonl"], "is a file, not a folder: run.jsonl cannot be made below it"),
]


@pytest.mark.parametrize(("args", "expected"), BAD_COMMAND_LINES, ids=lambda v: str(v)[:40])
def test_bad_command_line_is_one_line(sentinel_test: pytest.Pytester, args: list[str], expected: str) -> None:
    result = sentinel_test.runpytest_inprocess(*args)
    assert expected in usage_error_line(result)
    assert "test_must_not_run" not in result.stdout.str()


def test_options_file_with_bad_json_names_the_file(sentinel_test: pytest.Pytester) -> None:
    sentinel_test.path.joinpath("opts.json").write_text('{"max_autotune": true,}')
    line = usage_error_line(sentinel_test.runpytest_inprocess("--inductor-options=@opts.json"))
    assert "opts.json is not valid JSON" in line and "line 1 column 23" in line


@pytest.mark.parametrize(
    ("ini", "expected"),
    [
        (
            "inductor_template = cudagraphs\ninductor_mode = max-autotune",
            "inductor_template (tox.ini) and inductor_mode (tox.ini): choose one",
        ),
        ("inductor_template = fastest", "inductor_template (tox.ini): unknown template 'fastest'"),
        ('inductor_options = {"freezing": 1}', "inductor_options (tox.ini): Inductor option 'freezing' takes bool"),
        ("inductor_dynamic = sometimes", "inductor_dynamic (tox.ini): expected true, false or auto"),
        ("inductor_second_opinion = no", "inductor_second_opinion (tox.ini): expected on or off, got 'no'"),
        ("inductor_backend = nope", "inductor_backend (tox.ini): unknown torch.compile backend 'nope'"),
        (
            "inductor_timing_threads = two",
            "inductor_timing_threads (tox.ini): expected a whole number of threads such as 4, got 'two'",
        ),
        ("inductor_speedup_precision = 100%", "inductor_speedup_precision (tox.ini): expected a percentage above 0"),
        ("inductor_require_run = maybe", "inductor_require_run (tox.ini): invalid truth value 'maybe'"),
        ("inductor_fresh_cache = often", "inductor_fresh_cache (tox.ini): invalid truth value 'often'"),
    ],
)
def test_bad_ini_names_the_ini_file(sentinel_test: pytest.Pytester, ini: str, expected: str) -> None:
    sentinel_test.makeini(f"[pytest]\n{ini}\n")
    assert expected in usage_error_line(sentinel_test.runpytest_inprocess())


def test_pyproject_toml_is_named(sentinel_test: pytest.Pytester) -> None:
    sentinel_test.makepyprojecttoml('[tool.pytest.ini_options]\ninductor_mode = "turbo"\n')
    line = usage_error_line(sentinel_test.runpytest_inprocess())
    assert "inductor_mode (pyproject.toml): unknown torch.compile mode 'turbo'. Modes of this torch: default" in line


def test_command_line_overrides_ini_without_conflict(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ninductor_template = freezing\n")
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_inprocess("--inductor-mode=max-autotune-no-cudagraphs", "--inductor-cpu-probe=0")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "inductor-templates: mode max-autotune-no-cudagraphs from --inductor-mode (command line)*",
            "inductor-templates: overridden by the command line: inductor_template (tox.ini) = 'freezing'",
        ]
    )


def test_two_kinds_on_different_levels_conflict_only_within_a_level(sentinel_test: pytest.Pytester) -> None:
    sentinel_test.makeini("[pytest]\ninductor_mode = reduce-overhead\n")
    line = usage_error_line(
        sentinel_test.runpytest_inprocess("--inductor-template=default", '--inductor-options={"freezing": true}')
    )
    assert "--inductor-template (command line) and --inductor-options (command line)" in line


def test_valid_options_file_is_used(pytester: pytest.Pytester) -> None:
    pytester.path.joinpath("opts.json").write_text(json.dumps({"max_autotune": True, "epilogue_fusion": False}))
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_inprocess("--inductor-options=@opts.json", "--inductor-cpu-probe=0")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*effective Inductor settings: max_autotune=True, epilogue_fusion=False*"])


def test_backend_that_names_options_takes_them(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from torch._dynamo import register_backend

        @register_backend
        def my_backend(gm, example_inputs, options=None):
            return gm.forward
        """
    )
    pytester.makepyfile("def test_ok():\n    pass\n")
    result = pytester.runpytest_inprocess(
        "--inductor-backend=my_backend", '--inductor-options={"freezing": true}', "--inductor-cpu-probe=0"
    )
    assert result.ret == 0, result.stderr.str()


@pytest.mark.parametrize(
    ("marker", "expected"),
    [
        ("rtol='tight', atol=1e-5", "@pytest.mark.inductor_tolerance rtol must be a finite number >= 0, got 'tight'"),
        ("rtol=float('nan'), atol=0", "@pytest.mark.inductor_tolerance rtol must be a finite number >= 0, got nan"),
        ("rtol=0, atol=-1", "@pytest.mark.inductor_tolerance atol must be a finite number >= 0, got -1"),
        ("rtol=1e-3", "@pytest.mark.inductor_tolerance takes rtol= and atol= only, got (rtol=0.001)"),
        ("1e-3, 1e-5", "@pytest.mark.inductor_tolerance takes rtol= and atol= only, got (0.001, 1e-05)"),
    ],
)
def test_a_bad_tolerance_marker_is_a_usage_error_of_that_test(
    pytester: pytest.Pytester, marker: str, expected: str
) -> None:
    """Not a runtime_fail of the compiler, nor a chained traceback: the module fails collection in one line."""
    pytester.makepyfile(
        test_marked=f"import pytest\n\n\n@pytest.mark.inductor_tolerance({marker})\n"
        "def test_checked(inductor_check):\n    raise AssertionError('ran')\n",
        test_other="def test_other():\n    pass\n",
    )
    result = pytester.runpytest_inprocess("-p", "no:randomly")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.assert_outcomes(errors=1)
    output = result.stdout.str()
    assert expected in output, output
    assert "During handling" not in output and "Traceback" not in output and "AssertionError: ran" not in output
    assert "check outcomes per template" not in output  # no item ran, so none counts as a compiler failure


def test_a_model_that_is_not_callable_fails_in_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_relu="""
        import torch

        def test_compiled(compiled_model):
            compiled_model("relu")

        def test_checked(inductor_check):
            inductor_check("relu", torch.ones(2))
        """
    )
    result = pytester.runpytest_inprocess(
        "-p", "no:randomly", "--inductor-devices=cpu", "-W", "ignore", "--inductor-cpu-probe=0"
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "*compiled_model takes a torch.nn.Module or a function, got str 'relu'",
            "*inductor_check takes a torch.nn.Module or a function, got str 'relu'",
        ]
    )
    assert "torch/" not in result.stdout.str()


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        ((), "", True),
        (("--inductor-second-opinion=off",), "", False),
        ((), "inductor_second_opinion = off", False),
        (("--inductor-second-opinion=on",), "inductor_second_opinion = off", True),
    ],
)
def test_the_second_opinion_is_on_unless_switched_off(pytester: pytest.Pytester, args, ini, expected) -> None:
    from pytest_inductor_templates.settings import Settings

    pytester.makeini(f"[pytest]\n{ini}\n")
    assert Settings(pytester.parseconfigure(*args)).second_opinion is expected
