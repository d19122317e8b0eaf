"""Timing through pytest-benchmark: the JSON fields, speedups, groups, the summary table (under pytest-xdist:
test_xdist.py)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from inner_runs import run_pytest_warm, runpytest_warm
from shared_runs import TIMED_USER_TESTS as USER_TESTS

from conftest import FAST, QUIET, SharedRuns
from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.report.terminal import SPEEDUP_TITLE
from pytest_inductor_templates.tables import speedup_text
from pytest_inductor_templates.timing.paired import FULL_SPEED_MIN_ROUNDS
from pytest_inductor_templates.timing.timers import warm_up


@pytest.fixture
def timed_run(shared_runs: SharedRuns) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """One real run: two built-in samples and a user test under default and freezing, on the CPU (the session's
    timed run, tests/shared_runs.py)."""
    returncode, output = shared_runs.output("timed")
    run = subprocess.CompletedProcess(["timed"], returncode, output, "")
    return run, json.loads(shared_runs["timed"].read_text())


def _entries(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["fullname"]: b for b in data["benchmarks"]}


def _paired(entry: dict[str, Any]) -> None:
    """A compiled entry's paired figures: at least 10 rounds, the speedup inside its interval, unstable exactly
    when the interval is wider than the default target (+-2%); its pytest-benchmark rounds are its paired compiled
    blocks (one measurement behind the JSON's statistics and the speedup); the CPU probe's share of slow rounds, and
    the speedup over the full-speed rounds where at least 10 ran at full speed (the speedup itself where none ran
    slow)."""
    info = entry["extra_info"]
    assert info["paired_rounds"] >= 10 and info["eager_median"] > 0 and info["threads"] >= 1
    assert entry["stats"]["rounds"] == info["paired_rounds"]
    assert entry["stats"]["median"] == pytest.approx(info["compiled_median"]) == pytest.approx(info["median"])
    assert info["speedup_target"] == 0.02 and info["timing_seconds"] >= info["paired_seconds"]
    assert 0 <= info["cpu_slow_rounds"] < 1  # the fastest probe's round is a full-speed one
    full_speed_rounds = round(info["paired_rounds"] * (1 - info["cpu_slow_rounds"]))
    if full_speed_rounds != FULL_SPEED_MIN_ROUNDS - 1:  # (a round's rounding off the share aside)
        assert ("full_speed_speedup" in info) == (full_speed_rounds >= FULL_SPEED_MIN_ROUNDS), info
    if info["cpu_slow_rounds"] == 0:
        assert info["full_speed_speedup"] == pytest.approx(info["speedup"]) and info["speedup_of"] == "all rounds"
    elif full_speed_rounds > FULL_SPEED_MIN_ROUNDS:  # the speedup is the full-speed rounds', every round's beside it
        assert info["speedup_of"] == "full-speed rounds" and info["speedup"] == pytest.approx(
            info["full_speed_speedup"]
        )
        assert info["all_rounds_speedup"] > 0
    assert 0 < info["speedup_low"] <= info["speedup"] <= info["speedup_high"]
    half_width = (info["speedup_high"] - info["speedup_low"]) / 2 / info["speedup"]
    assert info["unstable"] is (half_width > 0.02)


def test_compiled_entries_carry_a_paired_speedup_with_its_interval(timed_run) -> None:
    run, data = timed_run
    assert run.returncode == 0, run.stdout[-3000:]
    entries = _entries(data)
    eager = entries["inductor-samples::builtin/launch_bound::bench[eager-cpu]"]
    for template in ("default", "freezing"):
        entry = entries[f"inductor-samples::builtin/launch_bound::bench[{template}-cpu]"]
        _paired(entry)
        assert entry["extra_info"]["paired_seconds"] >= 0.3  # --inductor-timing-min-seconds=0.3, beyond 0.05 s
    info = entries["inductor-samples::builtin/launch_bound::bench[freezing-cpu]"]["extra_info"]
    assert not {"speedup", "paired_rounds", "eager_median"} & set(eager["extra_info"])  # the eager row: its time
    assert eager["extra_info"]["threads"] == info["threads"] == data["machine_info"]["timing_threads"]
    assert info["sample"] == "builtin/launch_bound" and info["template"] == "freezing" and info["device"] == "cpu"
    assert info["settings"] == {"freezing": True} and info["outcome"] == "pass" and info.get("gpu") is None
    assert info["compile_seconds"] > 0 and info["graphs"] == 1 and info["graph_breaks"] == 0
    clock = "time.process_time" if info["threads"] == 1 else "time.perf_counter"  # one timing thread: CPU time
    assert info["cudagraph_skips"] == 0 and info["warmup_calls"] >= 5 and info["timer"] == clock
    assert "device_time_ms" not in info and "device_speedup" not in info  # CUDA only


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


def test_user_benchmark_pairs_eager_in_the_same_test(timed_run) -> None:
    _, data = timed_run
    entry = _entries(data)["test_user.py::test_block_speed[default]"]
    info = entry["extra_info"]
    assert info["sample"] == "test_user.py::test_block_speed" and info["source"] == "test"
    _paired(entry)
    assert entry["params"] == {"inductor_selection": "default"}


def test_machine_info_and_outcomes_in_the_json(timed_run) -> None:
    import torch

    _, data = timed_run
    machine = data["machine_info"]
    assert machine["torch"] == torch.__version__ and machine["cuda"] == torch.version.cuda
    assert {"gpu", "gpu_count", "gpu_compute_capability", "gpu_driver", "triton", "load_average"} <= set(machine)
    usable = machine["usable_cpus"]  # the default: every usable CPU, one thread on a share of at most two
    assert machine["timing_threads"] == (1 if usable <= 2 else usable)
    assert machine.get("cpu_timer") == ("time.process_time" if usable <= 2 else None)
    outcomes = data["inductor_templates"]["items"]
    assert {(o["sample"], o["template"], o["outcome"]) for o in outcomes} >= {
        ("builtin/launch_bound", "eager", "pass"),
        ("builtin/norm_softmax", "freezing", "pass"),
    }


def test_summary_shows_a_speedup_table_with_geomeans(timed_run) -> None:
    run, data = timed_run
    out = run.stdout
    assert f"inductor-templates: {SPEEDUP_TITLE}" in out
    table = out[out.index(SPEEDUP_TITLE) :].splitlines()[1:6]
    assert table[0].split() == ["sample", "[device]", "default", "freezing"]
    rows = {line.split()[0]: line for line in table[1:]}
    assert set(rows) == {"builtin/launch_bound", "builtin/norm_softmax", "test_user.py::test_block_speed", "geomean"}
    eager_entry = _entries(data)["inductor-samples::builtin/norm_softmax::bench[eager-cpu]"]
    eager = ItemRecord.from_dict(eager_entry["extra_info"])
    for template in ("default", "freezing"):
        info = _entries(data)[f"inductor-samples::builtin/norm_softmax::bench[{template}-cpu]"]["extra_info"]
        assert speedup_text(ItemRecord.from_dict(info), eager) in rows["builtin/norm_softmax"]  # e.g. 1.23x ±4.1%
    assert re.fullmatch(r"geomean +[0-9.]+x +[0-9.]+x", rows["geomean"])


def test_failed_items_show_their_outcome_and_are_kept_in_the_json(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "import torch\n\n"
        "def broken(gm, example_inputs):\n"
        "    raise RuntimeError('planted compile error')\n\n"
        "torch._dynamo.register_backend(name='broken')(broken)\n"
    )
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    run = run_pytest_warm(
        tmp_path, "--inductor-backend=broken", "--inductor-samples", "-k", "launch_bound or block_speed",
        "--inductor-devices=cpu", "--inductor-isolation=none", "--inductor-timing-processes=3",
        "--benchmark-json=run.json", *FAST, *QUIET,
    )  # fmt: skip
    assert run.returncode == 1
    assert "PytestBenchmarkWarning" not in run.stdout + run.stderr  # untimed items fail without noise
    assert "compile_fail: compile failed in backend 'broken': RuntimeError: planted compile error" in run.stdout
    assert "each compiled sample item timed in 4 loads on CUDA" in run.stdout  # unisolated: no process to repeat in
    assert "; --inductor-timing-processes=3 needs --inductor-isolation=process (no other process" in run.stdout
    table = run.stdout[run.stdout.index(SPEEDUP_TITLE) :].splitlines()
    assert any(line.startswith("builtin/launch_bound [cpu]") and line.split()[-1] == "COMPILE" for line in table)
    assert any(line.startswith("test_user.py::test_block_speed [cpu]") and "COMPILE" in line for line in table)
    data = json.loads((tmp_path / "run.json").read_text())
    assert [b["extra_info"]["template"] for b in data["benchmarks"]] == ["eager"]  # only eager could be timed
    failed = {(o["sample"], o["outcome"]) for o in data["inductor_templates"]["items"] if o["template"] == "default"}
    assert failed == {("builtin/launch_bound", "compile_fail"), ("test_user.py::test_block_speed", "compile_fail")}


THREAD_TESTS = """
import torch

BEFORE = torch.get_num_threads()


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 32)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2


def test_inside(inductor_check):
    print("INSIDE", torch.get_num_threads())
    inductor_check(Block().eval(), torch.randn(8, 32))


def test_speed(inductor_benchmark):
    with torch.no_grad():
        inductor_benchmark(Block().eval(), torch.randn(8, 32))


def test_speed_then_fail(inductor_benchmark):
    with torch.no_grad():
        inductor_benchmark(Block().eval(), torch.randn(8, 32))
    raise AssertionError("planted failure after timing")


def test_outside():
    print("OUTSIDE", torch.get_num_threads(), "BEFORE", BEFORE)
"""


def test_thread_setting_holds_for_the_plugins_items_and_an_impossible_precision_marks_unstable(tmp_path: Path) -> None:
    """--inductor-timing-threads=1: the plugin's items run with one intra-op thread, other tests with the count
    from before; machine_info, the records and the header say so. --inductor-speedup-precision=0.001%: no real
    interval is that narrow, so every speedup is marked unstable in the table, the JSON and report. A test that
    fails after timing keeps no speedup."""
    (tmp_path / "test_threads.py").write_text(THREAD_TESTS)
    run = run_pytest_warm(
        tmp_path, "--inductor-template=default", "--inductor-devices=cpu", "--inductor-timing-threads=1",
        "--inductor-speedup-precision=0.001%", "-p", "no:randomly", "-s", "--benchmark-json=run.json", *FAST, *QUIET,
    )  # fmt: skip
    assert run.returncode == 1, run.stdout[-3000:]
    assert (
        "inductor-templates: timing: 1 intra-op thread(s); CPU items timed by the process's CPU time "
        "(time.process_time); speedups paired with eager, until their 95% interval is within ±0.0%"
    ) in run.stdout
    defaults = (
        "each compiled sample item timed in 8 processes on CUDA (the band from the spread between them), once on the "
        "CPU"
    )
    assert f"; {defaults}\n" in run.stdout  # the loads' and processes' defaults, named where the run starts
    assert "INSIDE 1" in run.stdout and re.search(r"OUTSIDE (\d+) BEFORE \1\b", run.stdout)
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["machine_info"]["timing_threads"] == 1
    entries = _entries(data)
    assert {e["extra_info"]["threads"] for e in entries.values()} == {1}
    timed = entries["test_threads.py::test_speed[default]"]["extra_info"]
    assert timed["unstable"] is True and timed["paired_rounds"] >= 10
    row = next(line for line in run.stdout.splitlines() if line.startswith("test_threads.py::test_speed [cpu]"))
    assert row.endswith(speedup_text(ItemRecord.from_dict(timed)))  # "1.2x ±9% unstable", or "noise [0.07x, 0.4x]"
    failed = entries["test_threads.py::test_speed_then_fail[default]"]["extra_info"]
    assert failed["outcome"] == "runtime_fail" and "speedup" not in failed and "unstable" not in failed
    report = subprocess.run(
        [sys.executable, "-m", "pytest_inductor_templates.runs.cli", "report", str(tmp_path / "run.json")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"| test_threads.py::test_speed [cpu] | pass / {speedup_text(ItemRecord.from_dict(timed))} |" in report


COLLECTOR_TESTS = """
import gc

import torch

SEEN = []


@torch.compiler.disable
def note():
    SEEN.append(gc.isenabled())


class Block(torch.nn.Module):
    def forward(self, x):
        note()
        return torch.relu(x) * 2


def test_speed(inductor_benchmark):
    with torch.no_grad():
        inductor_benchmark(Block().eval(), torch.randn(8, 32))
    print("SEEN", SEEN.index(False), SEEN.count(False), len(SEEN), "AFTER", gc.isenabled())
"""


def test_the_garbage_collector_is_held_off_in_the_paired_rounds_only(tmp_path: Path) -> None:
    """The check and pytest-benchmark's rounds run with Python's collector on (pytest-benchmark's default), the
    paired rounds (the last calls, at least 10 rounds of an eager and a compiled block) with it off, and the test
    goes on with it on again."""
    (tmp_path / "test_collector.py").write_text(COLLECTOR_TESTS)
    run = run_pytest_warm(tmp_path, "--inductor-template=default", "--inductor-devices=cpu", "-s", *FAST, *QUIET)
    assert run.returncode == 0, run.stdout[-3000:]
    seen = re.search(r"SEEN (\d+) (\d+) (\d+) AFTER (\w+)", run.stdout)
    assert seen is not None, run.stdout[-3000:]
    first_off, off, calls, after = int(seen[1]), int(seen[2]), int(seen[3]), seen[4]
    assert first_off > 0 and first_off + off == calls  # on through the check and pytest-benchmark, then off to the end
    assert off >= 2 * 10 and after == "True"


# Dynamo's eager backend in the pytest process (a subprocess): pytest-benchmark's switches are the point, not
# Inductor's compile or the sample worker
SELECTION = ("--inductor-samples", "--inductor-template=default", "--inductor-devices=cpu", "-k", "norm_softmax")
EAGER_NORM_SOFTMAX = (*SELECTION, "--inductor-backend=eager", "--inductor-isolation=none")


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
    result = runpytest_warm(pytester, *EAGER_NORM_SOFTMAX, flag, "--benchmark-json=run.json", *FAST, *QUIET)
    result.assert_outcomes(**outcomes)
    written = pytester.path.joinpath("run.json").exists()
    assert written == (flag == "--benchmark-only")
    if flag == "--benchmark-only":  # the bench items ran the check themselves
        data = json.loads(pytester.path.joinpath("run.json").read_text())
        assert {b["extra_info"]["outcome"] for b in data["benchmarks"]} == {"pass"}


def test_warm_up_runs_until_steady() -> None:
    calls = []
    assert warm_up(lambda: calls.append(1), None) == len(calls) >= 5


def test_cross_gpu_compare_is_refused(pytester: pytest.Pytester) -> None:
    args = EAGER_NORM_SOFTMAX
    runpytest_warm(pytester, *args, "--benchmark-save=base", *FAST, *QUIET).assert_outcomes(passed=4)
    (saved,) = pytester.path.joinpath(".benchmarks").rglob("0001_base.json")
    data = json.loads(saved.read_text())
    data["machine_info"].update(gpu="NVIDIA A100-SXM4-80GB", gpu_compute_capability="8.0")
    saved.write_text(json.dumps(data))
    result = runpytest_warm(pytester, *args, "--benchmark-compare=0001", *FAST, *QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --benchmark-compare: the saved run was timed on NVIDIA A100-SXM4-80GB (sm 8.0), this one runs on *"]
    )


CUDA_MARKER_CONFTEST = """
import pytest
from pytest_inductor_templates.integrations.benchmark import mark_timing


def pytest_collection_modifyitems(items):
    for item in items:
        mark_timing(item, "cuda", cpu_time=True)  # a CUDA item keeps the synchronizing timer
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


CPU_CLOCK_CONFTEST = """
from pytest_inductor_templates.integrations.benchmark import mark_timing


def pytest_collection_modifyitems(items):
    for item in items:
        mark_timing(item, "cpu", cpu_time="cputime" in item.name)
"""
CPU_CLOCK_TESTS = """
import pytest


def settings(request):
    marker = request.node.get_closest_marker("benchmark")
    return sorted((k, getattr(v, "__name__", v)) for k, v in marker.kwargs.items()) if marker else None


def test_cputime(request):
    print("CPUTIME", settings(request))


@pytest.mark.benchmark(max_time=3.0, timer=lambda: 0.0)
def test_cputime_own(request):
    print("OWN", settings(request))


def test_wall(request):
    print("WALL", settings(request))
"""


def test_cpu_items_of_a_one_thread_session_are_timed_by_cpu_time_and_keep_their_whole_max_time(
    pytester: pytest.Pytester,
) -> None:
    """A session timing with one thread gives its CPU items the process's CPU time as their timer, unless the item
    chose one; nothing halves an item's max time any more (a compiled item's rounds are its paired blocks)."""
    pytester.makeconftest(CPU_CLOCK_CONFTEST)
    pytester.makepyfile(CPU_CLOCK_TESTS)
    result = pytester.runpytest_inprocess("-s", "--benchmark-max-time=0.4")
    result.assert_outcomes(passed=3)
    printed = result.stdout.str()
    assert "CPUTIME [('timer', 'process_time')]" in printed
    assert "OWN [('max_time', 3.0), ('timer', '<lambda>')]" in printed and "WALL None" in printed


def test_sample_items_in_the_worker_process_run_with_the_sessions_threads_and_are_timed_in_pairs(
    tmp_path: Path,
) -> None:
    """The worker process that builds, checks and times the samples takes --inductor-timing-threads from the
    pytest process, and pairs each compiled model with eager there."""
    run = run_pytest_warm(
        tmp_path, "--inductor-samples", "--inductor-template=default", "--inductor-devices=cpu",
        "--inductor-isolation=process", "--inductor-timing-threads=1", "-k", "launch_bound",
        "--benchmark-json=run.json", *FAST, *QUIET,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:]
    entries = _entries(json.loads((tmp_path / "run.json").read_text()))
    compiled = entries["inductor-samples::builtin/launch_bound::bench[default-cpu]"]
    eager = entries["inductor-samples::builtin/launch_bound::bench[eager-cpu]"]["extra_info"]
    assert compiled["extra_info"]["threads"] == eager["threads"] == 1
    _paired(compiled)


def test_an_eager_column_times_the_model_once_over_and_the_results_file_names_the_timing_threads(
    tmp_path: Path,
) -> None:
    """Under ``--inductor-template=eager`` nothing compiles: inductor_benchmark times the model without pairing
    it with itself (no speedup), and the results file's machine_info carries the timing settings."""
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    run = run_pytest_warm(
        tmp_path, "--inductor-template=eager", "--inductor-devices=cpu", "--inductor-timing-threads=1",
        "--benchmark-json=run.json", "--inductor-results=run.jsonl", *FAST, *QUIET,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:]
    info = _entries(json.loads((tmp_path / "run.json").read_text()))["test_user.py::test_block_speed[eager]"]
    assert info["extra_info"]["median"] > 0
    assert not {"speedup", "paired_rounds", "eager_median"} & set(info["extra_info"])
    header = json.loads((tmp_path / "run.jsonl").read_text().splitlines()[0])
    assert header["machine_info"]["timing_threads"] == 1 and "usable_cpus" in header["machine_info"]
