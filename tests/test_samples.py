"""Sample items through whole pytest runs: built-ins, GraphNet roots, broken samples, lists, ids, sharing."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest
from graphnet_tree import BROKEN, write_tree
from inner_runs import runpytest_warm

from conftest import QUIET, SharedRuns, no_cuda_machine, usage_error_line
from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES


def collected_ids(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if line.startswith("inductor-samples::")]


# half the built-ins, the others in the bfloat16 test; all under --run-slow
FP32_ON_CI = ("launch_bound", "gemm_bf16", "embedding", "dataclass_output", "buffer_mutation", "graph_break")
FP32_ON_CI = (*FP32_ON_CI, "dynamic_batch")


@no_cuda_machine  # on a GPU machine, all adds GPU-only templates (run there by benchmarks/run_gpu_checks.sh)
def test_builtins_pass_under_every_template_available_on_cpu(
    pytester: pytest.Pytester, request: pytest.FixtureRequest
) -> None:
    every = request.config.getoption("--run-slow")
    chosen = () if every else ("-k", " or ".join(FP32_ON_CI))
    # the verdicts, not isolation: in the pytest process, every template one after another
    result = runpytest_warm(
        pytester, "--inductor-samples", "--inductor-template=all", "--benchmark-skip", "--inductor-devices=cpu",
        "--inductor-isolation=none", *chosen, *QUIET,
    )  # fmt: skip
    columns = ["eager", "default", "cpp_wrapper", "max_autotune", "freezing", "aten"]
    n = len(BUILTIN_SAMPLES) if every else len(FP32_ON_CI)
    result.assert_outcomes(passed=n * len(columns), skipped=n * len(columns))
    result.stdout.fnmatch_lines(
        [
            "*= inductor-templates: sample checks on cpu =*",
            "sample * " + "  ".join(columns).replace("  ", "*"),
            "builtin/launch_bound *pass*",
            "*= inductor-templates: check outcomes per template =*",
            "template *items  pass  accuracy_fail  compile_fail  runtime_fail  eager_fail  eager_nondeterministic  "
            "no_effect  crashed  timeout  skipped  pass rate",
            *(f"{c} * {n} * {n} * 0 * 0 * 0 * 0 * 0 * 0 * 0 * 0 * 0 * 100%" for c in columns),
        ]
    )


def test_ids_name_sample_kind_template_and_device(pytester: pytest.Pytester) -> None:
    write_tree(pytester.path / "corpus", good=("vision/tiny",))
    result = pytester.runpytest_inprocess(
        "--inductor-samples=corpus",
        "--inductor-samples",
        "--inductor-template=default,freezing",
        "--inductor-devices=cpu",
        "--collect-only",
        "-q",
        "-k",
        "vision or launch_bound",
    )
    assert collected_ids(result) == [
        f"inductor-samples::{sample}::{kind}[{template}-cpu]"
        for sample in ("corpus/vision/tiny", "builtin/launch_bound")
        for template in ("eager", "default", "freezing")
        for kind in ("check", "bench")
    ]


def test_ids_do_not_depend_on_where_the_root_lies(pytester: pytest.Pytester) -> None:
    for parent in ("here", "elsewhere/deeper"):
        write_tree(pytester.path / parent / "corpus")
    runs = [
        collected_ids(pytester.runpytest_inprocess(f"--inductor-samples={parent}/corpus", "--collect-only", "-q"))
        for parent in ("here", "elsewhere/deeper")
    ]
    assert runs[0] == runs[1] and len(runs[0]) == 2 * 2 * (2 + len(BROKEN))


def test_collection_is_lazy(pytester: pytest.Pytester) -> None:
    root = write_tree(pytester.path / "corpus", good=("ok",))
    (root / "ok" / "model.py").write_text("raise SystemExit('model.py was imported at collection')\n")
    (root / "ok" / "weight_meta.py").write_text("this is not python (\n")
    result = pytester.runpytest_inprocess("--inductor-samples=corpus", "--collect-only", "-q")
    assert result.ret == 0
    assert len(collected_ids(result)) == 2 * 2 * (1 + len(BROKEN))


def test_graphnet_root_runs_and_broken_samples_fail_alone(pytester: pytest.Pytester) -> None:
    write_tree(pytester.path / "corpus")
    result = runpytest_warm(
        pytester, "--inductor-samples=corpus", "--inductor-template=default", "--benchmark-disable",
        "--inductor-isolation=none", *QUIET,
    )  # fmt: skip
    good, items_per_sample = 2, 2 * 2  # (eager, default) x (check, bench)
    # a broken sample fails its first check item with the reason; its other items skip, pointing there
    result.assert_outcomes(
        passed=good * items_per_sample, failed=len(BROKEN), skipped=len(BROKEN) * (items_per_sample - 1)
    )
    assert "PytestBenchmarkWarning" not in result.stdout.str()  # untimed bench items end without noise
    for relative, (_, reason) in BROKEN.items():
        result.stdout.fnmatch_lines([f"*sample corpus/{relative} is broken: {reason}*"])
    result.stdout.fnmatch_lines(["corpus/broken/syntax_error *EAGER *skip", "corpus/vision/tiny *pass *pass"])


def test_a_broken_model_py_is_named_by_file_and_line_in_the_one_line_reason(pytester: pytest.Pytester) -> None:
    """A syntax error, an exception at import and one in ``__init__``: each item's reason names ``model.py``'s
    file and line, in the failing items list and the short summary, without ``--tb=long``."""
    from graphnet_tree import fault_model, write_fault_sample

    models = {
        "syntax": "import torch\n\nclass GraphModule(torch.nn.Module)\n    pass\n",
        "at_import": "import torch\n\nSCALE = undefined_name * 2\n",
        "in_init": fault_model(init="self.w = torch.ones(2, 3) @ torch.ones(4, 5)"),
    }
    for name, model in models.items():
        write_fault_sample(pytester.path / "corpus" / name, model)
    init_line = 1 + models["in_init"].splitlines().index("        self.w = torch.ones(2, 3) @ torch.ones(4, 5)")
    result = runpytest_warm(
        pytester, "--inductor-samples=corpus", "--inductor-template=eager", "--inductor-devices=cpu", "-k", "check",
        "--benchmark-disable", "--inductor-isolation=none", "-rf", *QUIET,
    )  # fmt: skip
    result.assert_outcomes(failed=3)
    output = result.stdout.str()
    for name, where in [
        ("syntax", "corpus/syntax/model.py:3: syntax error: expected ':'"),
        ("at_import", "corpus/at_import/model.py:3: model.py failed to import: NameError: name 'undefined_name'"),
        ("in_init", f"corpus/in_init/model.py:{init_line}: GraphModule() raised RuntimeError: mat1 and mat2"),
    ]:
        failing = f"eager_fail inductor-samples::corpus/{name}::check[[]eager-cpu[]]: sample corpus/{name} is broken: "
        result.stdout.fnmatch_lines([failing + where.replace("[", "[[]") + "*"])
        assert output.count(where) >= 2, output  # the item's failure text too, not only the plugin's list


def test_an_output_eager_leaves_all_nan_passes_with_a_warning(pytester: pytest.Pytester) -> None:
    """As torchvision's fcn_resnet101 graph does with the weights the plugin draws: eager's output is NaN
    everywhere, so compiled matching its NaNs is all there is to check; the pass says so everywhere."""
    from graphnet_tree import GOOD_MODEL, write_sample

    from pytest_inductor_templates.runs.files import load
    from pytest_inductor_templates.runs.markdown import as_markdown

    nan_model = GOOD_MODEL.replace("return (masked.relu(),", 'return (masked.relu() * float("nan"),')
    assert nan_model != GOOD_MODEL
    write_sample(pytester.path / "corpus" / "nan", {"model.py": nan_model})
    result = runpytest_warm(
        pytester, "--inductor-samples=corpus", "--inductor-template=default", "--inductor-devices=cpu",
        "--benchmark-disable", "--inductor-isolation=none", "--inductor-results=run.jsonl", *QUIET,
    )  # fmt: skip
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(
        [
            "*passed with nothing compared in some output*",
            "*corpus/nan::check[[]default-cpu[]]: out[[]0[]]: NaN or Inf everywhere in eager, as in compiled",
        ]
    )
    run = load(str(pytester.path / "run.jsonl"))
    checks = {r.template: r for r in run.records if r.kind == "check"}
    assert checks["default"].uncompared == "out[0]: NaN or Inf everywhere in eager, as in compiled"
    assert "| corpus/nan [cpu] | pass, **NaN output** |" in as_markdown(run)


def test_keyword_selects_samples_by_path(pytester: pytest.Pytester) -> None:
    write_tree(pytester.path / "corpus")
    result = pytester.runpytest_inprocess("--inductor-samples=corpus", "--collect-only", "-q", "-k", "nlp/tiny")
    assert {i.split("::")[1] for i in collected_ids(result)} == {"corpus/nlp/tiny"}


def test_sample_list_restricts_the_run(pytester: pytest.Pytester) -> None:
    write_tree(pytester.path / "corpus")
    pytester.path.joinpath("list.txt").write_text("# the two good ones\nvision/tiny\n\nnlp/tiny/\nbuiltin/embedding\n")
    result = pytester.runpytest_inprocess(
        "--inductor-samples=corpus", "--inductor-samples", "--inductor-sample-list=list.txt", "--collect-only", "-q"
    )
    assert {i.split("::")[1] for i in collected_ids(result)} == {
        "corpus/vision/tiny",
        "corpus/nlp/tiny",
        "builtin/embedding",
    }


def test_sample_list_naming_unknown_samples_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_tree(pytester.path / "corpus")
    pytester.path.joinpath("list.txt").write_text("vision/tiny\nvision/huge\n")
    line = usage_error_line(
        pytester.runpytest_inprocess("--inductor-samples=corpus", "--inductor-sample-list=list.txt")
    )
    assert "--inductor-sample-list (command line): list.txt lists 1 sample(s) found under no root: vision/huge" in line


def test_missing_root_is_a_usage_error(pytester: pytest.Pytester) -> None:
    line = usage_error_line(pytester.runpytest_inprocess("--inductor-samples=nowhere"))
    assert "--inductor-samples (command line): sample root 'nowhere' is not a directory" in line


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--inductor-samples", "test_sentinel.py"],  # the bare flag took the test path as its root
            "--inductor-samples (command line): sample root 'test_sentinel.py' is a file (--inductor-samples PATH "
            "takes PATH as a sample root: for the built-in samples beside test paths, write "
            "--inductor-samples=builtin)",
        ),
        (
            ["--inductor-samples", "empty"],
            "sample root 'empty' holds no sample (no directory with a model.py) (--inductor-samples PATH",
        ),
        (
            ["--inductor-samples=one/corpus", "--inductor-samples=two/corpus"],
            "sample id 'corpus/*' is found twice, in */one/corpus and in */two/corpus: rename one root",
        ),
        (["--inductor-samples=one/corpus", "--inductor-sample-list=empty.txt"], "empty.txt lists no sample"),
        (["--inductor-samples=one/corpus", "--inductor-sample-list=latin1.txt"], "latin1.txt is not UTF-8"),
        (["--inductor-options=@latin1.txt"], "latin1.txt is not UTF-8: invalid continuation byte at byte 0"),
        (["--inductor-options=@deep.json"], "deep.json is nested too deeply to read"),
    ],
    ids=[
        "test-path-taken-as-root",
        "empty-root",
        "same-root-name",
        "empty-list",
        "latin1-list",
        "latin1-options",
        "deep-options",
    ],
)
def test_sample_roots_and_files_that_would_run_nothing_or_the_wrong_thing(
    sentinel_test: pytest.Pytester, args: list[str], expected: str
) -> None:
    """Each is one line and exit code 4 before any test runs: a run that silently ran nothing, or one
    sample of two, or an INTERNALERROR, would all pass unnoticed in CI."""
    for parent in ("one", "two"):
        write_tree(sentinel_test.path / parent / "corpus", good=("vision/tiny",))
    (sentinel_test.path / "empty").mkdir()
    (sentinel_test.path / "empty.txt").write_text("# nothing here\n\n")
    (sentinel_test.path / "latin1.txt").write_bytes("\xe9t\xe9\n".encode("latin-1"))
    (sentinel_test.path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    line = usage_error_line(sentinel_test.runpytest_inprocess(*args))
    assert fnmatch.fnmatch(line, f"*{expected}*"), line


def test_ini_twins_and_relative_roots(pytester: pytest.Pytester) -> None:
    write_tree(pytester.path / "corpus", good=("vision/tiny",))
    pytester.path.joinpath("list.txt").write_text("vision/tiny\n")
    pytester.makeini("[pytest]\ninductor_samples =\n    corpus\ninductor_sample_list = list.txt\n")
    result = pytester.runpytest_inprocess("--collect-only", "-q")
    assert {i.split("::")[1] for i in collected_ids(result)} == {"corpus/vision/tiny"}


COMPILE_COUNTER = """
import pytest
from pytest_inductor_templates.compile.compiled import RecordingBackend

COMPILES = []
_original = RecordingBackend.__call__


def counting(self, *args, **kwargs):
    COMPILES.append(1)
    return _original(self, *args, **kwargs)


RecordingBackend.__call__ = counting


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = len(COMPILES)
    yield
    print(f"COMPILES {item.nodeid} {len(COMPILES) - before}")
"""


def test_items_of_one_triple_share_one_compile(pytester: pytest.Pytester) -> None:
    """In the pytest process (the counter sees its compiles); the worker process shares a triple the same way. On
    Dynamo's eager backend: what is counted is the plugin's backend's calls, whatever it wraps."""
    pytester.makeconftest(COMPILE_COUNTER)
    result = runpytest_warm(
        pytester,
        "--inductor-isolation=none",
        "--inductor-samples",
        "--inductor-template=default",
        "--inductor-backend=eager",
        "--inductor-devices=cpu",
        "--benchmark-disable",
        "-s",
        "-k",
        "conv_bn",
        *QUIET,
    )
    result.assert_outcomes(passed=4)
    counts = dict(re.findall(r"COMPILES (\S+) (\d+)", result.stdout.str()))
    base = "inductor-samples::builtin/conv_bn::"
    assert counts == {
        f"{base}check[eager-cpu]": "0",
        f"{base}bench[eager-cpu]": "0",
        f"{base}check[default-cpu]": "1",
        f"{base}bench[default-cpu]": "0",  # the bench item reuses the check item's compiled model
    }


def test_xdist_runs_every_item_once(pytester: pytest.Pytester) -> None:
    write_tree(pytester.path / "corpus", good=("vision/tiny",))
    result = runpytest_warm(
        pytester,
        "-n",
        "2",
        "--inductor-samples=corpus",
        "--inductor-samples",
        "--inductor-template=default",
        "-k",
        "vision or broken or norm_softmax or embedding",
        "--benchmark-disable",  # the items once, not their timing (the workers would time their CPU items)
        "--junitxml=out.xml",
        *QUIET,
    )
    ids = re.findall(r'<testcase classname="([^"]*)" name="([^"]*)"', Path(pytester.path / "out.xml").read_text())
    expected = (1 + len(BROKEN) + 2) * 2 * 2
    assert len(ids) == len(set(ids)) == expected
    # a sample's items stay on one xdist worker: a broken one fails its first check item there, and skips the rest
    result.assert_outcomes(passed=3 * 2 * 2, failed=len(BROKEN), skipped=len(BROKEN) * (2 * 2 - 1))


BF16_ON_CI = ("attention", "gemm_fp16", "conv_bn", "norm_softmax")  # with FP32_ON_CI: 11 of 14; all: --run-slow


@no_cuda_machine
def test_builtins_pass_in_bfloat16_under_every_template_available_on_cpu(
    pytester: pytest.Pytester, request: pytest.FixtureRequest
) -> None:
    """Every template's bfloat16 verdicts on the built-ins (on CI four of them: every template compiles each)."""
    every = request.config.getoption("--run-slow")
    chosen = () if every else ("-k", " or ".join(BF16_ON_CI))
    result = runpytest_warm(
        pytester, "--inductor-samples", "--inductor-template=all", "--inductor-sample-dtype=bfloat16",
        "--benchmark-skip", "--junitxml=out.xml", "--inductor-isolation=none", *chosen, *QUIET,
    )  # fmt: skip
    columns = 6  # eager, default, cpp_wrapper, max_autotune, freezing, aten
    n = len(BUILTIN_SAMPLES) if every else len(BF16_ON_CI)
    result.assert_outcomes(passed=n * columns, skipped=n * columns)
    result.stdout.fnmatch_lines(
        ["builtin/gemm_fp16@bfloat16 *pass*", f"aten * {n} * {n} * 0 * 0 * 0 * 0 * 0 * 0 * 100%"]
    )
    junit = (pytester.path / "out.xml").read_text()
    assert (
        'name="check[max_autotune-cpu]"' in junit and 'classname="inductor-samples.builtin/attention@bfloat16"' in junit
    )


def test_unavailable_cells_record_the_skipped_outcome(pytester: pytest.Pytester) -> None:
    """(Nothing compiles: the eager row runs in the pytest process, a subprocess, with no sample worker to start.)"""
    write_tree(pytester.path / "corpus", good=("vision/tiny",))
    result = runpytest_warm(
        pytester,
        "--inductor-isolation=none",
        "--inductor-samples=corpus",
        "--inductor-template=cudagraphs",
        "--inductor-devices=cpu",
        "--inductor-cpu-probe=0",
        "-k",
        "vision",
        "--junitxml=out.xml",
        *QUIET,
    )
    result.assert_outcomes(passed=2, skipped=2)
    cells = re.findall(
        r'name="(check\[[^"]+\])".*?name="inductor_outcome" value="([a-z_]+)"',
        (pytester.path / "out.xml").read_text(),
        re.S,
    )
    assert cells == [("check[eager-cpu]", "pass"), ("check[cudagraphs-cpu]", "skipped")]


def test_benchmark_json_carries_the_check_outcome(shared_runs: SharedRuns) -> None:
    """The bench entry of a sample in pytest-benchmark's JSON carries its check's outcome (the session's timed run,
    tests/shared_runs.py)."""
    import json

    returncode, output = shared_runs.output("timed")
    assert returncode == 0, output[-3000:]
    entries = {b["fullname"]: b for b in json.loads(shared_runs["timed"].read_text())["benchmarks"]}
    entry = entries["inductor-samples::builtin/norm_softmax::bench[default-cpu]"]
    info = entry["extra_info"]
    assert entry["name"] == "bench[default-cpu]"
    assert info["sample"] == "builtin/norm_softmax" and info["template"] == "default" and info["device"] == "cpu"
    assert info["outcome"] == "pass" and isinstance(info["tolerance_level"], int)
    assert info["check_rule"] == "first comparison"
    assert entry["group"] == "builtin/norm_softmax[cpu]"
