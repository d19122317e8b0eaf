"""A torch.compile backend that plants faults; inductor_check must catch each with the right category and leaf."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from inner_runs import run_pytest_warm, runpytest_warm

from conftest import junit_properties, made_once_value

FAULTY_BACKEND = """
import pytest
import torch
from torch._dynamo import register_backend

FAULT = {"kind": None}
STATE = {}


@pytest.fixture(autouse=True)
def _fresh_state():
    STATE.clear()


@register_backend
def faulty(gm, example_inputs):
    kind = FAULT["kind"]
    if kind == "compile_error":
        raise RuntimeError("planted compile error")

    def run(*args):
        outs = list(gm(*args))
        STATE["calls"] = STATE.get("calls", 0) + 1
        if kind == "perturb":
            outs[0] = outs[0].clone()
            outs[0].view(-1)[3] += 0.5
        elif kind == "swap":
            outs[0], outs[1] = outs[1], outs[0]
        elif kind == "dtype":
            outs[0] = outs[0].double()
        elif kind == "shape":
            outs[0] = outs[0][:-1]
        elif kind == "nan":
            outs[0] = outs[0].clone()
            outs[0].view(-1)[5] = float("nan")
        elif kind == "stale":
            if "first" in STATE:
                return STATE["first"]
            STATE["first"] = tuple(o.clone() for o in outs)
        elif kind == "overwrite":
            buffers = STATE.setdefault("buffers", [o.clone() for o in outs])
            for buffer, out in zip(buffers, outs):
                buffer.copy_(out)
            return tuple(buffers)
        elif kind == "runtime_error" and STATE["calls"] == 2:
            raise RuntimeError("planted runtime error")
        return tuple(outs)

    return run
"""

FAULT_TESTS = """
import pytest
import torch
from conftest import FAULT


class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.fc(x)
        out = {"a": h.relu(), "b": h.sigmoid()}
        if torch.compiler.is_compiling() and FAULT["kind"] == "drop_key":
            del out["b"]
        return out


@pytest.mark.parametrize("kind", ["none", "perturb", "swap", "dtype", "shape", "nan", "stale", "overwrite",
                                  "drop_key", "compile_error", "runtime_error"])
def test_fault(inductor_check, kind):
    FAULT["kind"] = kind
    torch.manual_seed(0)
    inductor_check(TwoHeads().eval(), torch.randn(4, 8))


class TokenHead(torch.nn.Module):  # takes only integer token ids: the second call must vary them

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)

    def forward(self, ids):
        return self.embed(ids).sum(1), ids.argmax(-1)


def test_stale_with_token_ids_only(inductor_check):
    FAULT["kind"] = "stale"
    torch.manual_seed(0)
    inductor_check(TokenHead().eval(), torch.randint(0, 50, (4, 6)))


def test_eager_fails(inductor_check):
    def broken(x):
        raise ValueError("eager itself is broken")
    inductor_check(broken, torch.ones(2))


def test_eager_nondeterministic(inductor_check):
    inductor_check(lambda x: x + torch.rand_like(x), torch.ones(3))


def test_suppressed_backend_failure(inductor_check):
    FAULT["kind"] = "compile_error"
    with torch._dynamo.config.patch(suppress_errors=True):  # what TORCHDYNAMO_SUPPRESS_ERRORS=1 sets
        inductor_check(TwoHeads().eval(), torch.randn(4, 8))


@pytest.mark.inductor_tolerance(rtol=0.0, atol=1.0)
def test_marker_tolerance_accepts_a_small_error(inductor_check):
    FAULT["kind"] = "perturb"
    inductor_check(TwoHeads().eval(), torch.randn(4, 8))
"""

EXPECTED = {  # outcome, reason, the rule that decided
    "none": ("pass", None, "first comparison"),
    "perturb": (
        "accuracy_fail",
        "call 1 of 2: out['a']: float32 [4, 8]: 1 of 32 elements (3.1%) differ",
        "second opinion: RMSE",
    ),
    "swap": ("accuracy_fail", "call 1 of 2: out['a']: float32 [4, 8]", "second opinion: RMSE"),
    "dtype": ("accuracy_fail", "call 1 of 2: out['a']: dtype compiled torch.float64, eager torch.float32", "dtype"),
    "shape": ("accuracy_fail", "call 1 of 2: out['a']: shape compiled (3, 8), eager (4, 8)", "shape"),
    "nan": (
        "accuracy_fail",
        "call 1 of 2: out['a']: float32 [4, 8]: 1 of 32 elements (3.1%) differ: 1 NaN where eager is finite; "
        "first at index (0, 5): compiled nan, eager ",
        "nonfinite",
    ),
    "stale": (
        "accuracy_fail",
        "call 2 of 2 returned a stale output: out['a']: call 2 returned call 1's values again, while eager's output "
        "changed (in ",
        "stale output",
    ),
    "overwrite": (
        "accuracy_fail",
        "the first call's output changed after a later call (overwritten in place): out['a']",
        "overwritten",
    ),
    "drop_key": ("accuracy_fail", "call 1 of 2: out: keys missing from the compiled output: ['b']", "structure"),
    "compile_error": (
        "compile_fail",
        "compile failed in backend 'faulty': RuntimeError: planted compile error",
        None,
    ),
    "runtime_error": (
        "runtime_fail",
        "the compiled model raised on call 2: RuntimeError: planted runtime error",
        None,
    ),
}


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[str, dict[str, dict[str, str]]]:
    """One run of every planted fault (its output and each test's JUnit properties), made once a session."""
    return made_once_value(tmp_path_factory, worker_id, "fault-run", _fault_run)


def _fault_run(root: Path) -> tuple[str, dict[str, dict[str, str]]]:
    (root / "conftest.py").write_text(FAULTY_BACKEND)
    (root / "test_faults.py").write_text(FAULT_TESTS)
    run = run_pytest_warm(
        root,
        "--inductor-backend=faulty",
        "--inductor-devices=cpu",
        "--inductor-cpu-probe=0",
        "-p",
        "no:cacheprovider",
        "-rA",
        "--junitxml=out.xml",
        "-o",
        "junit_family=xunit1",
        "-W",
        "ignore::DeprecationWarning",
    )
    return run.stdout, junit_properties(root / "out.xml")


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_each_planted_fault_is_caught_with_its_category_and_leaf(fault_run, kind: str) -> None:
    output, properties = fault_run
    outcome, reason, rule = EXPECTED[kind]
    props = properties[f"test_faults::test_fault[{kind}-default]"]
    assert props["inductor_outcome"] == outcome, output
    if reason:
        assert props["inductor_reason"].startswith(reason), props["inductor_reason"]
    assert props.get("inductor_check_rule") == rule
    assert props["inductor_template"] == "default" and props["inductor_device"] == "cpu"


def test_accuracy_failure_explains_without_a_traceback(fault_run) -> None:
    output, _ = fault_run
    section = output.split("_ test_fault[perturb-default] _")[1].split("\n_")[0]
    assert "accuracy_fail: compiled output differs from eager on call 1 of 2:" in section
    assert "max abs error 0.5" in section and "worst at index (0, 3)" in section
    assert "Traceback" not in section and "torch/" not in section
    assert "torch.__trace" not in output  # no flood of torch's structured-trace records in captured logs


def test_a_stale_output_is_caught_for_a_model_that_takes_only_token_ids(fault_run) -> None:
    _, properties = fault_run
    props = properties["test_faults::test_stale_with_token_ids_only[default]"]
    assert props["inductor_outcome"] == "accuracy_fail" and props["inductor_check_rule"] == "stale output"
    assert props["inductor_reason"].startswith("call 2 of 2 returned a stale output: out[0]: call 2 returned call 1's")


def test_eager_problems_are_not_blamed_on_the_compiler(fault_run) -> None:
    output, properties = fault_run
    assert properties["test_faults::test_eager_fails[default]"]["inductor_outcome"] == "eager_fail"
    assert (
        properties["test_faults::test_eager_fails[default]"]["inductor_reason"]
        == "eager raised: ValueError: eager itself is broken"
    )
    assert (
        properties["test_faults::test_eager_nondeterministic[default]"]["inductor_outcome"] == "eager_nondeterministic"
    )
    assert re.search(r"SKIPPED \[1\] test_faults.py:\d+: eager_nondeterministic: eager disagrees with itself", output)
    reason = properties["test_faults::test_eager_nondeterministic[default]"]["inductor_reason"]
    assert "eager run 2 " in reason and "eager run 1 " in reason and "compiled" not in reason  # no compiler involved


def test_a_compile_failure_hidden_by_suppress_errors_is_still_a_compile_failure(fault_run) -> None:
    """With suppress_errors Dynamo runs the code eagerly when the backend fails, and the call returns eager's
    output: without this, the item would pass (and time eager as the compiled model's speed)."""
    _, properties = fault_run
    props = properties["test_faults::test_suppressed_backend_failure[default]"]
    assert props["inductor_outcome"] == "compile_fail"
    assert props["inductor_reason"] == (
        "compile failed in backend 'faulty': RuntimeError: planted compile error; Dynamo ran the code eagerly "
        "instead (torch._dynamo.config.suppress_errors, TORCHDYNAMO_SUPPRESS_ERRORS)"
    )


def test_marker_tolerance_is_used(fault_run) -> None:
    _, properties = fault_run
    assert properties["test_faults::test_marker_tolerance_accepts_a_small_error[default]"]["inductor_outcome"] == "pass"


def test_summary_table_counts_every_category(fault_run) -> None:
    output, _ = fault_run
    table = output.split("inductor-templates: check outcomes per template")[1]
    assert re.search(r"default\s+16\s+2\s+9\s+2\s+1\s+1\s+1\s+0\s+0\s+0\s+0\s+12%", table), table
    assert "accuracy_fail test_faults.py::test_fault[perturb-default]: call 1 of 2: out['a']" in output


def test_long_traceback_shows_the_compile_error(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(FAULTY_BACKEND)
    pytester.makepyfile(test_faults=FAULT_TESTS)
    result = runpytest_warm(
        pytester,
        "--inductor-backend=faulty",
        "--tb=long",
        "-k",
        "compile_error",
        "-W",
        "ignore::DeprecationWarning",
        "--inductor-cpu-probe=0",
    )
    result.assert_outcomes(failed=1, deselected=15)
    result.stdout.fnmatch_lines(['*raise RuntimeError("planted compile error")*', "*BackendCompilerFailed*"])


TOLERANCE_TESTS = """
import torch
from conftest import FAULT


def test_small_planted_error(inductor_check):
    FAULT["kind"] = "perturb"
    inductor_check(torch.nn.Linear(8, 8), torch.randn(4, 8))
"""


@pytest.mark.parametrize(
    ("config", "outcome"),
    [
        ([], "failed"),
        (["--inductor-tolerance=0,1"], "passed"),
        (["-o", "inductor_tolerance=0,1"], "passed"),
    ],
)
def test_session_tolerance_from_command_line_and_ini(
    pytester: pytest.Pytester, config: list[str], outcome: str
) -> None:
    pytester.makeconftest(FAULTY_BACKEND)
    pytester.makepyfile(test_tol=TOLERANCE_TESTS)
    result = runpytest_warm(
        pytester, "--inductor-backend=faulty", *config, "-W", "ignore::DeprecationWarning", "--inductor-cpu-probe=0"
    )
    result.assert_outcomes(**{outcome: 1})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("tight", "expected RTOL,ATOL such as 1e-4,1e-5, got 'tight'"),
        ("nan,nan", "rtol must be a finite number >= 0, got nan (in 'nan,nan')"),  # would turn every check off
        ("1e-3,inf", "atol must be a finite number >= 0, got inf (in '1e-3,inf')"),
        ("-1e-3,0", "rtol must be a finite number >= 0, got -0.001 (in '-1e-3,0')"),
    ],
)
def test_bad_session_tolerance_is_one_line(sentinel_test: pytest.Pytester, value: str, expected: str) -> None:
    from conftest import usage_error_line

    line = usage_error_line(sentinel_test.runpytest_inprocess(f"--inductor-tolerance={value}"))
    assert f"--inductor-tolerance (command line): {expected}" in line
    sentinel_test.makeini(f"[pytest]\ninductor_tolerance = {value}\n")
    assert f"inductor_tolerance (tox.ini): {expected}" in usage_error_line(sentinel_test.runpytest_inprocess())
