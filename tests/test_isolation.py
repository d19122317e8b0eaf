"""A crash, sys.exit, hang or oversized sample ends its own item; every other item runs; nothing is lost."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from graphnet_tree import FAULTS, fault_model, tensor_meta, write_fault_sample, write_sample
from inner_runs import run_pytest_warm

from conftest import FAST, QUIET, junit_properties, outcomes, standalone_environment
from pytest_inductor_templates.engine.triples import SampleCase, TripleCache
from pytest_inductor_templates.machine import CPU
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.runs.files import load
from pytest_inductor_templates.samples.builtin import builtin_sample
from pytest_inductor_templates.templates.matrix import Case
from pytest_inductor_templates.templates.registry import BUILTIN_TEMPLATES
from pytest_inductor_templates.templates.selection import Selection

CRASHES = ("abort", "segfault", "os_exit", "sys_exit_init")
BIG_META = tensor_meta("L_x_", [512, 1024])

SILENT = (*FAST, *QUIET, "-W", "ignore")  # the fault samples warn on purpose


def fault_tree(root: Path, names: tuple[str, ...]) -> Path:
    """The fault samples ``names``, a good GraphNet sample, and one over a 1 MiB budget, under ``root``."""
    for name in names:
        write_fault_sample(root / "faults" / name, FAULTS[name][0])
    write_sample(root / "good" / "tiny")
    write_fault_sample(root / "big" / "two_mib", FAULTS["abort"][0].replace("os.abort()", "pass"), BIG_META)
    return root


def test_every_fault_ends_its_own_item_and_the_good_ones_pass(tmp_path: Path) -> None:
    """One run without -n (its checks below, one test so that pytest-xdist does not run it twice): the crashing
    samples in the eager row, the good one in eager and default, one over the memory budget."""
    fault_tree(tmp_path / "corpus", CRASHES)
    result = run_pytest_warm(
        tmp_path, "--inductor-samples=corpus", "--inductor-template=default",
        "--inductor-devices=cpu", "-k", "eager or good", "--inductor-memory-budget=1MiB",
        "--benchmark-json=run.json", "--junitxml=run.xml", "--inductor-results=run.jsonl", *SILENT,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:]
    data = json.loads((tmp_path / "run.json").read_text())
    found = outcomes(tmp_path)
    for name in CRASHES:
        assert found[(f"corpus/faults/{name}", "eager", "cpu", "check")] == "crashed"
        assert found[(f"corpus/faults/{name}", "eager", "cpu", "bench")] == "skipped"
    good = {key: outcome for key, outcome in found.items() if key[0] == "corpus/good/tiny"}
    assert len(good) == 4 and set(good.values()) == {"pass"}
    assert found[("corpus/big/two_mib", "eager", "cpu", "check")] == "skipped"
    assert {b["extra_info"]["sample"] for b in data["benchmarks"]} == {"corpus/good/tiny"}
    each_crash_says_how_and_where(result.stdout, data["inductor_templates"]["items"])
    a_crash_costs_a_fresh_worker_and_sys_exit_does_not(tmp_path / "run.jsonl")
    junit = junit_properties(tmp_path / "run.xml")
    assert junit["inductor-samples.corpus/faults/abort::check[eager-cpu]"]["inductor_outcome"] == "crashed"
    run = load(str(tmp_path / "run.jsonl"))  # the results file tells the JSON's story
    assert run.partial is None
    from_json = load(str(tmp_path / "run.json"))
    assert {k: c.outcome for k, c in run.cells.items()} == {k: c.outcome for k, c in from_json.cells.items()}
    assert run.cells[("corpus/good/tiny", "default", "cpu")].speedup is not None


def each_crash_says_how_and_where(stdout: str, records: list[dict]) -> None:
    reasons = {r["sample"].rsplit("/", 1)[1]: r.get("reason") for r in records if r["kind"] == "check"}
    assert re.match(
        r"the worker process was killed by SIGABRT during the eager call; stderr: Fatal Python error", reasons["abort"]
    )
    assert re.match(
        r"the worker process was killed by SIGSEGV during the eager call; stderr: "
        r"Fatal Python error: Segmentation fault "
        r"\(File \".+\", line \d+ in \w+\)",
        reasons["segfault"],
    )
    assert reasons["os_exit"] == "the worker process exited with code 0 during the eager call"
    assert reasons["sys_exit_init"] == "the sample called sys.exit(3) while building the sample"
    assert reasons["two_mib"] == "its tensors take 2.0 MiB, more than --inductor-memory-budget (1.0 MiB): not built"
    bench = next(r for r in records if r["sample"].endswith("segfault") and r["kind"] == "bench")
    assert bench["reason"].startswith(
        "Skipped: the triple's check ended crashed: the worker process was killed by SIGSEGV"
    )
    assert "last lines of the worker's stderr:" in stdout  # the item's failure shows the tail


def a_crash_costs_a_fresh_worker_and_sys_exit_does_not(results: Path) -> None:
    checks = [r for r in load(str(results)).records if r.kind == "check"]
    pid = {(r.sample.split("/", 1)[1], r.template): r.pid for r in checks}
    assert pid[("faults/segfault", "eager")] is None  # its worker died before it could reply
    after = pid[("faults/sys_exit_init", "eager")]  # caught in the worker, which carries on
    assert pid[("big/two_mib", "eager")] != after == pid[("good/tiny", "eager")] == pid[("good/tiny", "default")]


def test_the_worker_is_recycled_after_n_triples(tmp_path: Path) -> None:
    """Without recycling a worker runs triple after triple (the good sample's two triples above share a pid)."""
    result = run_pytest_warm(
        tmp_path, "--inductor-samples", "--inductor-template=eager", "--inductor-devices=cpu", "-k",
        "launch_bound or norm_softmax", "--benchmark-skip", "--inductor-recycle-triples=1",
        "--inductor-results=run.jsonl", *SILENT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    assert "samples run in a worker process (a crash or hang ends one item), replaced after 1 triple" in result.stdout
    pids = [r.pid for r in load(str(tmp_path / "run.jsonl")).records if r.kind == "check"]
    assert len(pids) == 2 and None not in pids and pids[0] != pids[1]


KEEPING_META = tensor_meta("L_x_", [4096, 2560])  # 40 MiB an input: the two it keeps pass the worker's 64 MiB


def test_a_triple_whose_tensors_outlive_it_costs_its_worker(tmp_path: Path) -> None:
    """A sample that keeps its inputs somewhere global (as Inductor's freezing keeps a frozen model's
    parameters): they outlive the triple, the worker says so, and is replaced with a warning; the next
    sample's triples, which leave nothing behind, share the fresh worker."""
    keeping = FAULTS["abort"][0].replace("os.abort()", "sys.__dict__.setdefault('kept_by_sample', []).append(L_x_)")
    keeping = keeping.replace("torch.relu(L_x_)", "torch.relu(L_x_[:4])")  # a small output: a cheap comparison
    write_fault_sample(tmp_path / "corpus" / "a" / "keeping", keeping, KEEPING_META)
    write_sample(tmp_path / "corpus" / "good" / "tiny")
    result = run_pytest_warm(
        tmp_path, "--inductor-samples=corpus", "--inductor-template=default", "--inductor-devices=cpu",
        "-k", "keeping and eager or tiny", "--benchmark-skip", "--inductor-results=run.jsonl",
        "-W", "error::pytest_inductor_templates.worker.remote.WorkerWarning", "-p", "no:cacheprovider",
    )  # fmt: skip
    checks = {(r.sample.split("/", 1)[1], r.template): r for r in load(str(tmp_path / "run.jsonl")).records
              if r.kind == "check"}  # fmt: skip
    assert {key: r.outcome.value for key, r in checks.items()} == {
        ("a/keeping", "eager"): "pass", ("good/tiny", "eager"): "pass", ("good/tiny", "default"): "pass"
    }, result.stdout[-3000:]  # fmt: skip
    # raised as an error by -W error (in the teardown of the triple's last item), after the worker was replaced
    assert re.search(r"corpus/a/keeping \[eager-cpu\]: [\d.]+ MiB of the tensors it built stayed alive", result.stdout)
    pid = {key: record.pid for key, record in checks.items()}
    assert pid[("a/keeping", "eager")] != pid[("good/tiny", "eager")] == pid[("good/tiny", "default")]


def failing_for_release(gm, example_inputs):
    raise RuntimeError("planted compile error")


def test_a_failed_compile_leaves_nothing_alive_after_the_release() -> None:
    """What the backend raised is dropped at the release: its traceback's frames hold the model and its inputs,
    and Dynamo keeps the recording backend that holds it (before, conv_bn's 37 KB stayed alive after each failure)."""
    from torch._dynamo import register_backend

    register_backend(failing_for_release)
    cache = TripleCache()
    default = next(t for t in BUILTIN_TEMPLATES if t.name == "default")
    case = Case(Selection(template=default, backend="failing_for_release"), CPU)
    triple = cache.get(SampleCase(builtin_sample("conv_bn"), case, "check"))
    assert triple.result().outcome is Outcome.COMPILE_FAIL
    assert triple.tensors and all(ref() is not None for ref in triple.tensors)
    del triple
    assert cache.release() == 0


def test_hangs_end_in_timeout_naming_the_phase(tmp_path: Path) -> None:
    """A hang in forward (in the eager row) and one in compilation (in default) stop after the timeout."""
    fault_tree(tmp_path / "corpus", ("hang_forward", "hang_compile"))
    result = run_pytest_warm(
        tmp_path, "--inductor-samples=corpus", "--inductor-template=default", "--inductor-devices=cpu",
        "-k", "hang_forward and eager or hang_compile and default and check", "--inductor-timeout=3",
        "--inductor-results=run.jsonl", *SILENT,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:]
    found = {
        (r.sample.rsplit("/", 1)[1], r.kind): (r.outcome.value, r.reason)
        for r in load(str(tmp_path / "run.jsonl")).records
    }
    assert found[("hang_forward", "check")] == (
        "timeout",
        "no result within --inductor-timeout=3 s during the eager call; the worker process was stopped",
    )
    assert found[("hang_compile", "check")] == (
        "timeout",
        "no result within --inductor-timeout=3 s while compiling; the worker process was stopped",
    )
    assert found[("hang_forward", "bench")][0] == "skipped"


def test_a_timeout_prints_the_worker_stack_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """faulthandler's stack of a hung worker is in the item's reason once, not again as its captured stderr nor in
    the short summary (which quotes whole failure messages on CI: the run has CI=true, as CI sets it); what the
    sample printed before it hung is shown once too."""
    monkeypatch.setenv("CI", "true")
    hang = fault_model(forward="print('about to hang', file=sys.stderr, flush=True); time.sleep(600)")
    write_fault_sample(tmp_path / "corpus" / "faults" / "hang_forward", hang)
    result = run_pytest_warm(
        tmp_path, "--inductor-samples=corpus", "--inductor-template=eager", "--inductor-devices=cpu",
        "-k", "check", "--inductor-timeout=3", *FAST,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:]
    assert "no result within --inductor-timeout=3 s" in result.stdout, result.stdout[-3000:]
    assert result.stdout.count("Stack (most recent call first)") == 1, result.stdout
    assert result.stdout.count('hang_forward/model.py", line') == 1, result.stdout
    assert result.stdout.count("about to hang") == 1, result.stdout
    summary = result.stdout.split("short test summary info")[1].splitlines()[1:]
    assert summary[0].startswith("FAILED inductor-samples::corpus/faults/hang_forward::check[eager-cpu] - Failed: ")
    assert summary[0].endswith("; the worker process was stopped") and summary[1].startswith("="), summary


@pytest.mark.slow  # ~30 s: the hang must outlast the worker's start on a loaded machine (limits: test_worker_parts)
def test_under_pytest_timeout_the_plugin_stops_the_hang_first(tmp_path: Path) -> None:
    """With pytest-timeout's thread method (which would end the whole session), the sample item stops a little
    before its limit with the phase named, and the run goes on."""
    pytest.importorskip("pytest_timeout")
    fault_tree(tmp_path / "corpus", ("hang_forward",))
    result = run_pytest_warm(
        tmp_path, "--inductor-samples=corpus", "--inductor-template=eager", "--inductor-devices=cpu",
        "-k", "hang_forward or big", "--timeout=15", "--timeout-method=thread", "--inductor-results=run.jsonl", *SILENT,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:]
    found = {(r.sample.rsplit("/", 1)[1], r.kind): r for r in load(str(tmp_path / "run.jsonl")).records}
    assert found[("hang_forward", "check")].reason == (
        "no result within 12 s (before pytest-timeout's 15 s) during the eager call; the worker process was stopped"
    )
    assert found[("two_mib", "check")].outcome.value == "pass"  # runs first
    assert "Timeout" not in result.stdout


def test_sigterm_midway_leaves_valid_partial_results(tmp_path: Path) -> None:
    fault_tree(tmp_path / "corpus", ("hang_forward",))
    command = [
        sys.executable, "-m", "pytest", "--inductor-samples=corpus", "--inductor-template=eager",
        "--inductor-devices=cpu", "-k", "big or hang_forward", "--inductor-results=run.jsonl",
        "--junitxml=run.xml", *SILENT,
    ]  # fmt: skip
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=standalone_environment(), text=True)  # fmt: skip
    results = tmp_path / "run.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and (results.read_text() if results.exists() else "").count('"pass"') < 2:
        time.sleep(0.5)  # until both items of the first sample have ended
    time.sleep(2.0)  # the hanging sample is now running
    process.send_signal(signal.SIGTERM)
    try:
        output, _ = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    run = load(str(results))
    assert run.partial == "terminated by SIGTERM"
    assert run.cells[("corpus/big/two_mib", "eager", "cpu")].outcome.value == "pass"  # it runs first
    assert ("corpus/faults/hang_forward", "eager", "cpu") not in run.cells
    junit = (tmp_path / "run.xml").read_text()  # written at the interrupt, with the items that had ended
    assert 'classname="inductor-samples.corpus/big/two_mib" name="check[eager-cpu]"' in junit, output[-3000:]


def test_sys_exit_in_the_pytest_process_ends_only_its_sample(tmp_path: Path) -> None:
    """Without isolation a sys.exit while building is caught: that sample is crashed, the next one passes."""
    fault_tree(tmp_path / "corpus", ("sys_exit_init",))
    result = run_pytest_warm(
        tmp_path, "--inductor-samples=corpus", "--inductor-template=eager", "--inductor-isolation=none",
        "--inductor-devices=cpu", "-k", "sys_exit or good", "--benchmark-disable", "--junitxml=run.xml", *SILENT,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:]
    junit = junit_properties(tmp_path / "run.xml")
    assert junit["inductor-samples.corpus/faults/sys_exit_init::check[eager-cpu]"]["inductor_outcome"] == "crashed"
    assert junit["inductor-samples.corpus/good/tiny::check[eager-cpu]"]["inductor_outcome"] == "pass"
    assert "not torn down properly" not in result.stdout


CRASHING_USER_TEST = """
import os


def test_block(compiled_model):
    os._exit(1)
"""


@pytest.mark.slow
def test_faults_under_xdist(tmp_path: Path) -> None:
    """The same faults spread over two xdist workers: each sample ends its own item, without an xdist worker
    dying; a user test that crashes its xdist worker is recorded crashed too (--dist load: see the guide)."""
    fault_tree(tmp_path / "corpus", CRASHES)
    (tmp_path / "test_user.py").write_text(CRASHING_USER_TEST)
    result = run_pytest_warm(
        tmp_path, "-n", "2", "--dist", "load", "test_user.py", "--inductor-samples=corpus",
        "--inductor-template=default", "--inductor-devices=cpu", "-k", "corpus and eager or good or block",
        "--inductor-memory-budget=1MiB",
        "--benchmark-skip", "--junitxml=run.xml", "--inductor-results=run.jsonl", *SILENT,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout[-3000:]
    records = load(str(tmp_path / "run.jsonl")).records
    found = outcomes(tmp_path)
    assert {found[(f"corpus/faults/{n}", "eager", "cpu", "check")] for n in CRASHES} == {"crashed"}
    good = [found[("corpus/good/tiny", template, "cpu", "check")] for template in ("default", "eager")]
    assert good == ["pass", "pass"]
    assert found[("corpus/big/two_mib", "eager", "cpu", "check")] == "skipped"
    (user,) = [r for r in records if r.source == "test"]
    assert (user.sample, user.template, user.outcome.value) == ("test_user.py::test_block", "default", "crashed")
    assert result.stdout.count("replacing crashed worker") == 1  # the user test's; the samples crashed no xdist worker
