"""The parts behind isolation, timeouts, the results file and memory, one at a time (no inner session unless said)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from inner_runs import PARENT_VARIABLE, runpytest_warm

from conftest import no_cuda_machine, usage_error_line
from pytest_inductor_templates.integrations.xdist import pinned_gpus
from pytest_inductor_templates.limits import Limit
from pytest_inductor_templates.machine import Device
from pytest_inductor_templates.memory import parse_size
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.parent_watch import PARENT_ENV
from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.report.records import crashed_record
from pytest_inductor_templates.runs.files import RunError, load, merge
from pytest_inductor_templates.runs.results_file import ResultsWriter
from pytest_inductor_templates.samples.graphnet_meta import TensorMeta, chunks, rebuild
from pytest_inductor_templates.worker import protocol
from pytest_inductor_templates.worker.client import WorkerProcess, describe_exit, telling_line
from pytest_inductor_templates.worker.main import cuda_fault


def record(sample: str, template: str, kind: str, outcome: Outcome = Outcome.PASS, **fields: object) -> ItemRecord:
    nodeid = f"inductor-samples::{sample}::{kind}[{template}-cpu]"
    return ItemRecord(sample, template, "cpu", kind, nodeid=nodeid, outcome=outcome, **fields)  # type: ignore[arg-type]


def test_a_results_file_cut_off_mid_line_reads_as_partial(tmp_path: Path) -> None:
    writer = ResultsWriter(tmp_path / "run.jsonl")
    writer.start({"gpu": None, "torch": "2.13"})
    writer.add(record("s", "eager", "check"))
    writer.add(record("s", "default", "check", Outcome.CRASHED, reason="the worker process was killed by SIGSEGV"))
    with open(tmp_path / "run.jsonl", "a") as stream:
        stream.write('{"record": {"sample": "s", "templ')  # the run died while writing
    run = load(str(tmp_path / "run.jsonl"))
    assert run.partial == "the results file has no end line: the run was cut off"
    assert run.cells[("s", "default", "cpu")].outcome is Outcome.CRASHED
    assert run.machine == "no GPU, torch 2.13"


def test_a_finished_results_file_is_complete_and_an_interrupted_one_says_why(tmp_path: Path) -> None:
    for name, complete, why in (("done", True, None), ("cut", False, "terminated by SIGTERM")):
        writer = ResultsWriter(tmp_path / f"{name}.jsonl")
        writer.start({})
        writer.add(record("s", "eager", "check"))
        writer.end(0 if complete else 2, complete, [("cutlass", "not installed")], why)
    assert load(str(tmp_path / "done.jsonl")).partial is None
    assert load(str(tmp_path / "done.jsonl")).left_out == [{"template": "cutlass", "reason": "not installed"}]
    assert load(str(tmp_path / "cut.jsonl")).partial == "terminated by SIGTERM"
    (tmp_path / "bad.jsonl").write_text((tmp_path / "done.jsonl").read_text().replace('{"record"', "nonsense", 1))
    with pytest.raises(RunError, match="a malformed results file: line 2 is not JSON"):
        load(str(tmp_path / "bad.jsonl"))


def test_results_files_merge_and_a_shard_cut_short_makes_the_merge_partial(tmp_path: Path) -> None:
    shards = []
    for template, complete in (("default", True), ("cudagraphs", False)):
        writer = ResultsWriter(tmp_path / f"{template}.jsonl")
        writer.start({})
        writer.add(record("s", "eager", "bench", median=2.0))
        writer.add(record("s", template, "bench", median=1.0))
        writer.end(0 if complete else 2, complete, [], None if complete else "terminated by SIGTERM")
        shards.append(load(str(tmp_path / f"{template}.jsonl")))
    merged, notes = merge(shards)
    assert [r["template"] for r in merged["inductor_templates"]["items"]] == ["eager", "default", "cudagraphs"]
    assert merged["inductor_templates"]["partial"] == f"{tmp_path / 'cudagraphs.jsonl'}: terminated by SIGTERM"
    assert notes == [f"{tmp_path / 'cudagraphs.jsonl'}: 1 eager item(s) already in an earlier shard: dropped"]


def test_sizes_and_exits_read_as_people_write_them() -> None:
    assert [parse_size(t) for t in ("512MiB", "8GiB", "1.5GB", "100")] == [512 << 20, 8 << 30, 1_500_000_000, 100]
    with pytest.raises(ValueError, match="expected a size such as 512MiB"):
        parse_size("lots")
    assert describe_exit(-11) == "was killed by SIGSEGV"
    assert describe_exit(-9) == "was killed by SIGKILL (what the out-of-memory killer sends)"
    assert describe_exit(0) == "exited with code 0"


def test_the_telling_stderr_line_is_the_fatal_error_and_the_frame_that_died() -> None:
    stderr = [
        "Fatal Python error: Segmentation fault",
        "",
        "Thread 0x1 (most recent call first):",
        '  File "threading.py", line 1 in wait',
        "Current thread 0x2 (most recent call first):",
        '  File "model.py", line 9 in forward',
        '  File "runner.py", line 3 in call',
        "Extension modules: numpy, torch._C (total: 2)",
    ]
    assert telling_line(stderr) == 'Fatal Python error: Segmentation fault (File "model.py", line 9 in forward)'
    assert telling_line(["warming up", "RuntimeError: boom", "Extension modules: x"]) == "RuntimeError: boom"


# A stand-in for a ready sample worker: it answers a Release (or hangs in it, as a hung sample would), then exits at
# a Stop; no torch to import.
STAND_IN = """
import sys, time
from pytest_inductor_templates.worker import protocol as p

request = p.read_message(sys.stdin.buffer)
if sys.argv[1] == "hang":
    time.sleep(600)
p.write_message(sys.stdout.buffer, p.Released())
sys.exit(0 if isinstance(p.read_message(sys.stdin.buffer), p.Stop) else 3)
"""


@pytest.mark.parametrize("case", ["answered", "hang"])
def test_a_worker_is_asked_to_stop_unless_it_is_still_working_on_a_request(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle worker is sent Stop and exits by itself; one still working on a request (the run was interrupted:
    Ctrl-C, SIGTERM) would read Stop only once that request ended, never for a hang: it is killed without one."""
    written: list[object] = []
    write = protocol.write_message
    monkeypatch.setattr(
        protocol, "write_message", lambda stream, message: (written.append(message), write(stream, message))
    )
    worker = WorkerProcess(hello=lambda: protocol.Hello(sys_path=[], conftests=[]))
    process = subprocess.Popen([sys.executable, "-c", STAND_IN, case], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdout is not None
    worker.process, worker._reader, worker._ready = process, protocol.MessageReader(process.stdout.fileno()), True
    wait = worker.send(protocol.Release(), Limit())
    if case == "answered":
        assert isinstance(worker.receive(wait), protocol.Released)
    worker.stop()
    if case == "answered":
        assert written == [protocol.Release(), protocol.Stop()] and process.returncode == 0
    else:
        assert written == [protocol.Release()] and process.returncode == -signal.SIGKILL
    assert worker.process is None


def test_cuda_faults_are_told_from_errors_that_leave_the_device_usable() -> None:
    cuda = Device("cuda:1", "cuda")
    assert cuda_fault(cuda, RuntimeError("CUDA error: device-side assert triggered\nmore")) == (
        "RuntimeError: CUDA error: device-side assert triggered"
    )
    wrapped = RuntimeError("the compiled model raised")
    wrapped.__cause__ = RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered")
    assert cuda_fault(cuda, wrapped) == "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered"
    assert cuda_fault(Device("cpu", "cpu"), RuntimeError("CUDA error: whatever")) is None


def test_a_crashed_xdist_worker_item_gets_its_record() -> None:
    sample = crashed_record("inductor-samples::corpus/a/b::bench[mode-reduce-overhead-cuda:1]", "gw1", [])
    assert sample is not None
    assert (sample.sample, sample.template, sample.device, sample.kind) == (
        "corpus/a/b",
        "mode-reduce-overhead",
        "cuda:1",
        "bench",
    )
    assert sample.outcome is Outcome.CRASHED and "gw1" in sample.reason
    user = crashed_record("tests/test_m.py::test_block[8-default-cpu]", "gw0", [("default", "cpu")])
    assert user is not None and (user.sample, user.template, user.source) == (
        "tests/test_m.py::test_block[8]",
        "default",
        "test",
    )
    assert crashed_record("tests/test_m.py::test_plain[3]", "gw0", [("default", "cpu")]) is None


@pytest.mark.parametrize(
    ("nodeid", "expected"),
    [
        ("inductor-samples::corpus/a/b::check[default-cpu]@corpus/a/b", ("corpus/a/b", "default", "cpu", "check")),
        (
            "inductor-samples::builtin/x::bench[mode-reduce-overhead-cuda:1]@builtin/x",
            ("builtin/x", "mode-reduce-overhead", "cuda:1", "bench"),
        ),
        (
            "tests/test_m.py::test_block[8-default-cpu]@mine",
            ("tests/test_m.py::test_block[8]", "default", "cpu", "check"),
        ),
        (
            "tests/test_m.py::test_block[a@b-default-cpu]",
            ("tests/test_m.py::test_block[a@b]", "default", "cpu", "check"),
        ),
    ],
    ids=["sample-check", "sample-bench", "user-test", "an-at-sign-in-a-parameter"],
)
def test_a_crashed_item_is_read_without_the_group_suffix_of_pytest_below_9_2(nodeid: str, expected) -> None:
    """Under pytest < 9.2 pytest-xdist's workers add ``@group`` to an ``xdist_group`` item's node id (a sample item's
    group is its sample), and its controller reports a crash under that id: the record is the item's all the same,
    under the node id without the suffix."""
    record = crashed_record(nodeid, "gw0", [("default", "cpu")])
    assert record is not None, nodeid
    assert (record.sample, record.template, record.device, record.kind) == expected
    assert record.nodeid == (nodeid.rsplit("@", 1)[0] if "]@" in nodeid else nodeid)
    assert record.outcome is Outcome.CRASHED


def test_the_xdist_workers_share_the_gpus_when_there_are_at_least_as_many(monkeypatch: pytest.MonkeyPatch) -> None:
    options = {"dist": "loadgroup", "tx": ["popen", "popen"]}  # -n 2, as pytest-xdist spells it out
    config = SimpleNamespace(getoption=lambda name, default=None: options.get(name, default))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert pinned_gpus(config, 2, None) == ["0", "1"]  # type: ignore[arg-type]
    assert pinned_gpus(config, 1, None) == ["0"]  # type: ignore[arg-type]  (two workers on one GPU)
    assert pinned_gpus(config, 1, "cuda:0") == ["0"]  # type: ignore[arg-type]  (its only GPU, named)
    assert pinned_gpus(config, 2, "cuda:0") == []  # type: ignore[arg-type]  (one of two: the matrix is not every GPU)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert pinned_gpus(config, 2, "cuda") == ["4", "6"]  # type: ignore[arg-type]
    assert pinned_gpus(config, 4, None) == []  # type: ignore[arg-type]  (fewer workers than GPUs)
    assert pinned_gpus(config, 2, "cuda:0,cuda:1") == []  # type: ignore[arg-type]
    options["tx"] = ["3*popen"]  # --tx 3*popen --dist load
    assert pinned_gpus(config, 2, None) == ["4", "6"]  # type: ignore[arg-type]
    options["dist"] = "no"  # --tx alone: nothing is distributed
    assert pinned_gpus(config, 1, None) == []  # type: ignore[arg-type]


LIMITS_SEEN = """
import time

import pytest

from pytest_inductor_templates.integrations.timeout import item_limit


def test_plain(request):
    print("LIMIT plain:", item_limit(request.node, 30.0).for_request(time.monotonic())[1])


@pytest.mark.timeout(50)
def test_marked(request):
    print("LIMIT marked:", item_limit(request.node, 30.0).for_request(time.monotonic())[1])


@pytest.mark.timeout(0)
def test_off(request):
    print("LIMIT off:", item_limit(request.node, None).for_request(time.monotonic()))
"""


@pytest.mark.parametrize("func_only", ["false", "true"])
def test_the_limit_is_what_pytest_timeout_resolved(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, func_only: str
) -> None:
    """pytest-timeout reads its option, then PYTEST_TIMEOUT, then its ini key, then the marker over all; the worker's
    deadline follows what it resolved (read from its own hook), also when its timer starts at the call."""
    pytest.importorskip("pytest_timeout")
    pytester.makeini(f"[pytest]\ntimeout = 100\ntimeout_func_only = {func_only}\n")
    pytester.makepyfile(test_limits=LIMITS_SEEN)
    monkeypatch.setenv("PYTEST_TIMEOUT", "20")
    result = runpytest_warm(pytester, "-s", "-p", "no:cacheprovider", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    # the variable beats the ini key
    result.stdout.fnmatch_lines(["*LIMIT plain: 17 s (before pytest-timeout's 20 s)*"])
    result.stdout.fnmatch_lines(["*LIMIT marked: --inductor-timeout=30 s*"])  # the marker's 50 s: ours is shorter
    result.stdout.fnmatch_lines(["*LIMIT off: (None, '')*"])  # no limit at all: nothing stops the worker


def test_inputs_are_drawn_in_chunks_with_the_values_of_one_draw() -> None:
    assert chunks(10, 4) == [(0, 4), (4, 10)] and chunks(40, 16) == [(0, 16), (16, 40)] and chunks(0) == []
    meta = TensorMeta("x", (3, 1000, 357), "torch.float16", mean=0.5, std=2.0, min_val=-1.0, max_val=1.5)
    built = rebuild(meta, torch.Generator().manual_seed(7))
    one_draw = torch.randn(3 * 1000 * 357, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    one_draw = (one_draw * 2.0 * 0.2 + 0.5).clamp(-1.0, 1.5).to(torch.float16).reshape(3, 1000, 357)
    assert torch.equal(built, one_draw)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--inductor-timeout=0",), "--inductor-timeout (command line): expected a number of seconds such as 300"),
        (("--inductor-memory-budget=lots",), "--inductor-memory-budget (command line): expected a size such as"),
        (("--inductor-recycle-triples=1.5",), "--inductor-recycle-triples (command line): expected a whole number"),
        (("--inductor-timeout=5", "--inductor-isolation=none"), "needs --inductor-isolation=process"),
        (("-o", "inductor_timeout=soon"), "-o inductor_timeout (command line): expected a number of seconds"),
    ],
)
def test_bad_values_are_one_line_before_any_test_runs(sentinel_test: pytest.Pytester, args, message) -> None:
    assert message in usage_error_line(sentinel_test.runpytest_inprocess(*args))


def test_an_ini_value_given_with_o_is_named_so_and_relative_to_where_pytest_started(
    sentinel_test: pytest.Pytester,
) -> None:
    sentinel_test.mkdir("config").joinpath("pytest.ini").write_text("[pytest]\ninductor_results = only_here\n")
    sentinel_test.mkdir("only_here")  # a folder beside where pytest starts, not beside the ini file
    assert sentinel_test.runpytest_inprocess("-c", "config/pytest.ini").ret == pytest.ExitCode.TESTS_FAILED  # ran
    line = usage_error_line(
        sentinel_test.runpytest_inprocess("-c", "config/pytest.ini", "-o", "inductor_results=only_here")
    )
    assert line.startswith("ERROR: -o inductor_results (command line): ") and "is a directory" in line


@no_cuda_machine
def test_require_run_fails_a_run_in_which_everything_was_skipped(pytester: pytest.Pytester) -> None:
    args = (
        "--inductor-samples",
        "--inductor-devices=cuda:0",
        "-k",
        "launch_bound",
        "-p",
        "no:cacheprovider",
        "--inductor-cpu-probe=0",
    )
    assert pytester.runpytest_inprocess(*args).ret == pytest.ExitCode.OK
    required = pytester.runpytest_inprocess(*args, "--inductor-require-run", "--inductor-results=run.jsonl")
    assert required.ret == pytest.ExitCode.TESTS_FAILED
    required.stdout.fnmatch_lines(["*--inductor-require-run: every item was skipped, so the run fails*"])
    end = json.loads((pytester.path / "run.jsonl").read_text().splitlines()[-1])["end"]
    assert end["exitstatus"] == 1 and end["complete"] is True
    pytester.makeini("[pytest]\ninductor_require_run = true\n")  # on in ini, off for one run with pytest's -o
    assert pytester.runpytest_inprocess(*args).ret == pytest.ExitCode.TESTS_FAILED
    assert pytester.runpytest_inprocess(*args, "-o", "inductor_require_run=false").ret == pytest.ExitCode.OK


@no_cuda_machine
def test_require_run_fails_a_run_in_which_only_the_samples_eager_rows_ran(pytester: pytest.Pytester) -> None:
    """A template this machine lacks skips every compiled item, and the samples' eager rows still run: the
    reference of nothing. A CI job that found no GPU fails under --inductor-require-run all the same."""
    args = ("--inductor-samples", "--inductor-template=cudagraphs", "-k", "launch_bound", "-p", "no:cacheprovider",
            "--inductor-cpu-probe=0", "--inductor-require-run")  # fmt: skip
    required = pytester.runpytest_inprocess(*args)
    assert required.ret == pytest.ExitCode.TESTS_FAILED, required.stdout.str()
    required.assert_outcomes(passed=2, skipped=2)  # the eager row's check and bench; cudagraphs' two skipped
    required.stdout.fnmatch_lines([
        "--inductor-require-run: every item but the samples' eager rows (2 items, the reference) was skipped, so "
        "the run fails: template 'cudagraphs' is unavailable on cpu: needs a cuda device, not cpu (2 items)"
    ])  # fmt: skip


@pytest.mark.parametrize(
    ("args", "dist"),
    [
        (("-n", "2", "--inductor-samples"), "loadgroup"),  # a triple's items stay on one xdist worker
        (("-n", "2", "--inductor-samples", "--dist", "load"), "load"),  # the user's choice stands
        (("-n", "2", "--inductor-samples", "--inductor-isolation=none"), "no"),  # xdist hangs: see group_triples
        (
            (
                "-n",
                "2",
            ),
            "no",
        ),  # no samples
    ],
)
def test_samples_under_xdist_default_to_loadgroup(pytester: pytest.Pytester, args: tuple[str, ...], dist: str) -> None:
    from pytest_inductor_templates import plugin

    config = pytester.parseconfig(*args)
    assert plugin.pytest_cmdline_main(config) is None
    assert config.option.dist == dist


def test_a_dist_mode_from_pytest_addopts_stands(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_inductor_templates import plugin

    monkeypatch.setenv("PYTEST_ADDOPTS", "--dist=load")
    config = pytester.parseconfig("-n", "2", "--inductor-samples")
    assert plugin.pytest_cmdline_main(config) is None
    assert config.option.dist == "load"


def test_every_phase_reads_as_a_time_in_a_sentence() -> None:
    """Messages name where a triple was as ``during the eager call``, never ``while eager call``."""
    from pytest_inductor_templates import phases

    named = [v for k, v in vars(phases).items() if k.isupper() and isinstance(v, str)]
    worded = {phase: phases.describe(phase) for phase in named}
    assert worded[phases.EAGER_CALL] == "during the eager call"
    assert worded[phases.COMPILED_CALL] == "during the compiled call"
    assert worded[phases.COMPILING] == "while compiling"
    assert worded[phases.BUILDING] == "while building the sample"
    assert set(named) <= set(phases._WORDED)  # every phase is worded on purpose, none by the fallback
    assert all(text.startswith(("during the ", "while ")) for text in worded.values())
    assert phases.describe(None) == "before it began" and phases.describe(None, "while running") == "while running"


def test_a_warm_child_rewrites_the_variable_the_plugins_processes_watch_their_parent_by() -> None:
    """The tests' warm children point the plugin's parent watch at their real parent: the same variable's name."""
    assert PARENT_VARIABLE == PARENT_ENV
