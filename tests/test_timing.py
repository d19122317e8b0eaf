"""Timing through pytest-benchmark: the JSON fields, speedups, groups, the summary table, the xdist note."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import run_pytest
from pytest_inductor_templates.timing.timers import median_per_call, warm_up

FAST = ("--benchmark-max-time=0.05", "--benchmark-min-rounds=3", "-p", "no:cacheprovider")
QUIET = ("-W", "ignore::DeprecationWarning")

USER_TESTS = """
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 32)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2


def test_block_speed(inductor_benchmark):
    torch.manual_seed(0)
    with torch.no_grad():
        inductor_benchmark(Block().eval(), torch.randn(8, 32))
"""


@pytest.fixture(scope="module")
def timed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """One real run: two built-in samples and a user test under default and freezing, on the CPU."""
    root = tmp_path_factory.mktemp("timed")
    (root / "test_user.py").write_text(USER_TESTS)
    run = run_pytest(
        root,
        "--inductor-samples",
        "--inductor-template=default,freezing",
        "--inductor-devices=cpu",
        "-k",
        "launch_bound or norm_softmax or block_speed",
        "--benchmark-json=run.json",
        *FAST,
        *QUIET,
    )
    return run, json.loads((root / "run.json").read_text())


def _entries(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["fullname"]: b for b in data["benchmarks"]}


def test_sample_entries_carry_speedup_over_the_eager_row(timed_run) -> None:
    run, data = timed_run
    assert run.returncode == 0, run.stdout[-3000:]
    entries = _entries(data)
    eager = entries["inductor-samples::builtin/launch_bound::bench[eager-cpu]"]
    compiled = entries["inductor-samples::builtin/launch_bound::bench[freezing-cpu]"]
    info = compiled["extra_info"]
    assert info["eager_median"] == eager["stats"]["median"]
    assert info["speedup"] == pytest.approx(eager["stats"]["median"] / compiled["stats"]["median"])
    assert "speedup" not in eager["extra_info"]  # the baseline itself has none
    assert info["sample"] == "builtin/launch_bound" and info["template"] == "freezing" and info["device"] == "cpu"
    assert info["settings"] == {"freezing": True} and info["outcome"] == "pass" and info.get("gpu") is None
    assert info["compile_seconds"] > 0 and info["graphs"] == 1 and info["graph_breaks"] == 0
    assert info["cudagraph_skips"] == 0 and info["warmup_calls"] >= 5 and info["timer"] == "time.perf_counter"
    assert "device_time_ms" not in info  # CUDA only


def test_groups_hold_every_template_of_one_sample_and_device(timed_run) -> None:
    _, data = timed_run
    groups: dict[str, set[str]] = {}
    for entry in data["benchmarks"]:
        groups.setdefault(entry["group"], set()).add(entry["extra_info"]["template"])
    assert groups == {
        "builtin/launch_bound[cpu]": {"eager", "default", "freezing"},
        "builtin/norm_softmax[cpu]": {"eager", "default", "freezing"},
        "test_user.py::test_block_speed[cpu]": {"default", "freezing"},
    }


def test_user_benchmark_times_eager_in_the_same_test(timed_run) -> None:
    _, data = timed_run
    info = _entries(data)["test_user.py::test_block_speed[default]"]["extra_info"]
    median = _entries(data)["test_user.py::test_block_speed[default]"]["stats"]["median"]
    assert info["sample"] == "test_user.py::test_block_speed" and info["source"] == "test" and info["eager_rounds"] > 0
    assert info["eager_median"] > 0 and info["eager_rounds"] >= 3
    assert info["speedup"] == pytest.approx(info["eager_median"] / median)
    assert _entries(data)["test_user.py::test_block_speed[default]"]["params"] == {"inductor_selection": "default"}


def test_machine_info_and_outcomes_in_the_json(timed_run) -> None:
    import torch

    _, data = timed_run
    machine = data["machine_info"]
    assert machine["torch"] == torch.__version__ and machine["cuda"] == torch.version.cuda
    assert {"gpu", "gpu_count", "gpu_compute_capability", "gpu_driver", "triton"} <= set(machine)
    outcomes = data["inductor_templates"]["items"]
    assert {(o["sample"], o["template"], o["outcome"]) for o in outcomes} >= {
        ("builtin/launch_bound", "eager", "pass"),
        ("builtin/norm_softmax", "freezing", "pass"),
    }


def test_summary_shows_a_speedup_table_with_geomeans(timed_run) -> None:
    run, data = timed_run
    out = run.stdout
    assert "inductor-templates: speedup over eager (eager median / median)" in out
    table = out[out.index("speedup over eager") :].splitlines()[1:6]
    assert table[0].split() == ["sample", "[device]", "default", "freezing"]
    rows = {line.split()[0]: line.split()[-2:] for line in table[1:]}
    assert set(rows) == {"builtin/launch_bound", "builtin/norm_softmax", "test_user.py::test_block_speed", "geomean"}
    entry = _entries(data)["inductor-samples::builtin/norm_softmax::bench[default-cpu]"]
    assert rows["builtin/norm_softmax"][0] == f"{entry['extra_info']['speedup']:.2f}x"


def test_failed_items_show_their_outcome_and_are_kept_in_the_json(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "import torch\n\n"
        "def broken(gm, example_inputs):\n"
        "    raise RuntimeError('planted compile error')\n\n"
        "torch._dynamo.register_backend(name='broken')(broken)\n"
    )
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    run = run_pytest(
        tmp_path, "--inductor-backend=broken", "--inductor-samples", "-k", "launch_bound or block_speed",
        "--inductor-devices=cpu", "--benchmark-json=run.json", *FAST, *QUIET,
    )  # fmt: skip
    assert run.returncode == 1
    assert "PytestBenchmarkWarning" not in run.stdout + run.stderr  # untimed items fail without noise
    assert "compile_fail: compile failed in backend 'broken': RuntimeError: planted compile error" in run.stdout
    table = run.stdout[run.stdout.index("speedup over eager") :].splitlines()
    assert any(line.startswith("builtin/launch_bound [cpu]") and line.split()[-1] == "COMPILE" for line in table)
    assert any(line.startswith("test_user.py::test_block_speed [cpu]") and "COMPILE" in line for line in table)
    data = json.loads((tmp_path / "run.json").read_text())
    assert [b["extra_info"]["template"] for b in data["benchmarks"]] == ["eager"]  # only eager could be timed
    failed = {(o["sample"], o["outcome"]) for o in data["inductor_templates"]["items"] if o["template"] == "default"}
    assert failed == {("builtin/launch_bound", "compile_fail"), ("test_user.py::test_block_speed", "compile_fail")}


def test_under_xdist_timing_is_off_the_checks_run_and_the_plugin_says_so_once(tmp_path: Path) -> None:
    run = run_pytest(
        tmp_path, "-n", "2", "--inductor-samples", "--inductor-template=default", "--inductor-devices=cpu",
        "-k", "launch_bound or norm_softmax", *FAST, *QUIET,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:]
    assert run.stdout.count("pytest-xdist is active, so pytest-benchmark disabled timing") == 1
    assert "8 passed" in run.stdout and "speedup over eager" not in run.stdout
    assert re.search(r"builtin/launch_bound +pass +pass", run.stdout)  # the check grid is there


@pytest.mark.parametrize(
    ("flag", "outcomes"),
    [
        ("--benchmark-skip", {"passed": 2, "skipped": 2}),  # checks run, bench items skip
        ("--benchmark-only", {"passed": 2, "skipped": 2}),  # bench items run (and check), checks skip
        ("--benchmark-disable", {"passed": 4}),  # bench items run once, untimed
    ],
)
def test_benchmark_switches_behave_as_in_pytest_benchmark(
    pytester: pytest.Pytester, flag: str, outcomes: dict[str, int]
) -> None:
    result = pytester.runpytest_subprocess(
        "--inductor-samples", "--inductor-template=default", "--inductor-devices=cpu", "-k", "norm_softmax",
        flag, "--benchmark-json=run.json", *FAST, *QUIET,
    )  # fmt: skip
    result.assert_outcomes(**outcomes)
    written = pytester.path.joinpath("run.json").exists()
    assert written == (flag == "--benchmark-only")
    if flag == "--benchmark-only":  # the bench items ran the check themselves
        data = json.loads(pytester.path.joinpath("run.json").read_text())
        assert {b["extra_info"]["outcome"] for b in data["benchmarks"]} == {"pass"}


def test_warm_up_runs_until_steady_and_median_per_call_follows_pytest_benchmark() -> None:
    calls = []
    assert warm_up(lambda: calls.append(1), None) == len(calls) >= 5
    clock = iter(range(1_000_000))
    median, rounds = median_per_call(lambda: None, lambda: float(next(clock)), 0.0, 10.0, 3)
    assert median == 1.0 and rounds == 10  # each round is one call long on this clock


def test_cross_gpu_compare_is_refused(pytester: pytest.Pytester) -> None:
    args = ("--inductor-samples", "--inductor-template=default", "--inductor-devices=cpu", "-k", "norm_softmax")
    pytester.runpytest_subprocess(*args, "--benchmark-save=base", *FAST, *QUIET).assert_outcomes(passed=4)
    (saved,) = pytester.path.joinpath(".benchmarks").rglob("0001_base.json")
    data = json.loads(saved.read_text())
    data["machine_info"].update(gpu="NVIDIA A100-SXM4-80GB", gpu_compute_capability="8.0")
    saved.write_text(json.dumps(data))
    result = pytester.runpytest_subprocess(*args, "--benchmark-compare=0001", *FAST, *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --benchmark-compare: the saved run was timed on NVIDIA A100-SXM4-80GB (sm 8.0), this one runs on *"]
    )


CUDA_MARKER_CONFTEST = """
import pytest
from pytest_inductor_templates.timing.bench import use_synchronizing_timer


def pytest_collection_modifyitems(items):
    for item in items:
        use_synchronizing_timer(item, "cuda")
"""
CUDA_MARKER_TESTS = """
import pytest


def settings(request):
    return dict(request.node.get_closest_marker("benchmark").kwargs)


def test_plain(request):
    print("PLAIN", sorted((k, getattr(v, "__name__", v)) for k, v in settings(request).items()))


@pytest.mark.benchmark(min_time=0.1, group="mine")
def test_own_settings(request):
    print("OWN", sorted((k, getattr(v, "__name__", v)) for k, v in settings(request).items()))
"""


@pytest.mark.parametrize(
    ("args", "plain", "own"),
    [
        (
            (),
            "PLAIN [('min_time', 0.005), ('timer', 'cuda_synchronized_perf_counter')]",
            "OWN [('group', 'mine'), ('min_time', 0.1), ('timer', 'cuda_synchronized_perf_counter')]",
        ),
        (
            ("--benchmark-timer=time.process_time",),
            "PLAIN [('min_time', 0.005)]",
            "OWN [('group', 'mine'), ('min_time', 0.1)]",
        ),
        (
            ("--benchmark-min-time=0.002",),
            "PLAIN [('timer', 'cuda_synchronized_perf_counter')]",
            "OWN [('group', 'mine'), ('min_time', 0.1), ('timer', 'cuda_synchronized_perf_counter')]",
        ),
    ],
)
def test_cuda_items_get_the_synchronizing_timer_and_long_rounds_unless_chosen(
    pytester: pytest.Pytester, args: tuple[str, ...], plain: str, own: str
) -> None:
    pytester.makeconftest(CUDA_MARKER_CONFTEST)
    pytester.makepyfile(CUDA_MARKER_TESTS)
    result = pytester.runpytest_inprocess("-s", *args)
    result.assert_outcomes(passed=2)
    assert plain in result.stdout.str() and own in result.stdout.str()
