"""The diagnosis's own limits, cheaply: a budget stops it with what it found, a crash or a raise is reported as
``failed`` and never raised into the caller."""

from __future__ import annotations

import importlib
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pytest_inductor_templates.diagnose import Diagnosis, DiagnosisRequest, diagnose, standby
from pytest_inductor_templates.diagnose.process import run_in_child
from pytest_inductor_templates.diagnose.steplog import read_log
from pytest_inductor_templates.diagnose.summary import assemble
from pytest_inductor_templates.engine.diagnosis import LEDGER, RunLedger
from pytest_inductor_templates.machine import CPU, Device
from pytest_inductor_templates.templates.registry import Template
from pytest_inductor_templates.templates.selection import Selection

BUILDERS = """
import os
import time


class Hangs:
    def make_model(self, device):
        time.sleep(3600)

    def make_inputs(self, device):
        return []


class Exits:
    def make_model(self, device):
        os._exit(3)

    def make_inputs(self, device):
        return []
"""


def request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builder: str, budget: float) -> DiagnosisRequest:
    """A request whose builder (a class of a module only ``sys_path`` finds) hangs or exits in the child."""
    (tmp_path / "diagnose_builders.py").write_text(BUILDERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("diagnose_builders")
    sys.modules.pop("diagnose_builders")
    monkeypatch.setitem(sys.modules, "diagnose_builders", module)  # removed at teardown: it lives in tmp_path
    selection = Selection(template=Template("default", ""))
    build = getattr(module, builder)()
    return DiagnosisRequest(
        build, selection, CPU, "accuracy_fail", tmp_path / "repro", budget_seconds=budget, sys_path=[str(tmp_path)]
    )


def test_a_budget_of_seconds_stops_a_hung_diagnosis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    start = time.monotonic()
    diagnosis = diagnose(request(tmp_path, monkeypatch, "Hangs", budget=2))
    assert time.monotonic() - start < 60
    assert diagnosis.partial == "nothing found (stopped at the budget of 2s)", diagnosis
    assert diagnosis.failed is None
    assert diagnosis.summary == "partial: nothing found (stopped at the budget of 2s)"


def test_an_interrupted_diagnosis_keeps_its_step_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (or a step's time limit) during a diagnosis ends it, and its step log stays beside the repro."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the child's work folder lands here

    def interrupt_once_it_started() -> bool:
        logs = [log for log in tmp_path.glob("inductor-diagnose-*/steps.jsonl") if log.read_text()]
        if logs:
            raise KeyboardInterrupt
        return False

    with pytest.raises(KeyboardInterrupt):
        run_in_child(request(tmp_path, monkeypatch, "Hangs", budget=120), stop_when=interrupt_once_it_started)
    assert [record["step"] for record in read_log(tmp_path / "repro" / "steps.jsonl")][:1] == ["start"]
    assert not list(tmp_path.glob("inductor-diagnose-*"))  # the work folder went, the child with it


def test_a_diagnosis_that_crashes_is_failed_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    diagnosis = diagnose(request(tmp_path, monkeypatch, "Exits", budget=120))
    assert diagnosis.failed is not None and diagnosis.failed.startswith(
        "diagnosis failed: the diagnosis process ended with exit code 3"
    ), diagnosis
    assert diagnosis.partial is None


def test_a_diagnosis_starts_in_the_process_kept_ready_and_another_is_started_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that diagnoses keeps a process ready, its imports done ahead: the diagnosis runs in it (its step log's
    ``start`` says so, with its pid), and a fresh one is started for the next diagnosis."""
    monkeypatch.setattr(standby, "_wanted", False)
    monkeypatch.setattr(standby, "_ready", None)
    exits = request(tmp_path, monkeypatch, "Exits", budget=120)  # sys.path as the worker's, before it starts one
    standby.keep_ready()
    ready = standby._ready
    assert ready is not None
    try:
        diagnosis = diagnose(exits)
        assert diagnosis.failed is not None and "exit code 3" in diagnosis.failed, diagnosis
        start = read_log(tmp_path / "repro" / "steps.jsonl")[0]
        assert (start["step"], start["ahead"], start["pid"]) == ("start", True, ready.process.pid)
        assert standby._ready is not None and standby._ready.process.pid != ready.process.pid
    finally:
        if (left := standby.take()) is not None:
            left.discard()
    assert not ready.folder.exists()


def test_a_process_kept_ready_is_not_used_once_a_variable_torch_reads_at_import_has_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A variable that torch, Triton or CUDA read as they load, set after the process was started (by a test, say),
    is one that process never saw: it is ended (its folder with it), and the diagnosis starts afresh."""
    monkeypatch.setattr(standby, "_wanted", False)
    monkeypatch.setattr(standby, "_ready", None)
    standby.keep_ready()
    ready = standby._ready
    assert ready is not None and ready.current()
    monkeypatch.setattr(sys, "path", [*sys.path, "/appended/by/an/import"])  # found after all it had: still current
    assert ready.current()
    monkeypatch.setenv("TORCHINDUCTOR_FREEZING", "1")
    assert standby.take() is None
    assert ready.process.poll() is not None and not ready.folder.exists()


def test_none_is_kept_ready_once_the_runs_ledger_allows_no_further_diagnosis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(standby, "_wanted", False)
    monkeypatch.setattr(standby, "_ready", None)
    ledger = RunLedger(tmp_path / LEDGER, most=2)
    assert ledger.claim(60) == 60 and not ledger.exhausted()
    assert ledger.claim(60) == 60 and ledger.exhausted()  # the cap
    budgeted = RunLedger(tmp_path / "budget.json", most=5, budget=100)
    budgeted.claim(60)
    budgeted.spend(60, 99.5)
    assert budgeted.exhausted()  # the run's budget
    standby.keep_ready()
    ready = standby._ready
    assert ready is not None
    standby.stop_keeping()
    assert standby._ready is None and ready.process.poll() is not None and not ready.folder.exists()
    standby.replenish()
    assert standby._ready is None


def test_a_worker_keeps_one_ready_only_with_four_cpus_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(standby, "usable_cpus", lambda: 16)
    assert [standby.worth_keeping(workers) for workers in (1, 4, 5)] == [True, True, False]


def test_what_is_not_a_compiler_failure_is_not_diagnosed(tmp_path: Path) -> None:
    diagnosis = diagnose(DiagnosisRequest(object(), Selection(), CPU, "eager_fail", tmp_path))  # type: ignore[arg-type]
    assert diagnosis.failed == (
        "diagnosis failed: outcome 'eager_fail' is not one of accuracy_fail, compile_fail, runtime_fail"
    )


@pytest.mark.parametrize(
    ("records", "stopped", "expected"),
    [
        (
            [
                {"step": "reproduce", "failing": True, "outcome": "accuracy_fail", "reason": ""},
                {"step": "bisect_check", "backend": "eager", "subsystem": None, "failing": False},
                {"step": "bisect_check", "backend": "inductor", "subsystem": None, "failing": True},
                {
                    "step": "bisect_check",
                    "backend": "inductor",
                    "subsystem": "pre_grad_passes",
                    "run_state": "test_disable",
                    "failing": True,
                },
            ],
            "stopped at the budget of 9s",
            Diagnosis(
                summary="inductor; partial: stage only, from the bisection's checks so far "
                "(stopped at the budget of 9s)",
                stage="inductor",
                partial="stage only, from the bisection's checks so far (stopped at the budget of 9s)",
            ),
        ),
        (
            [
                {"step": "reproduce", "failing": True, "outcome": "accuracy_fail", "reason": ""},
                {"step": "stage", "describe": "inductor / lowerings: relu", "kept_backend": True, "clean": True},
                {"step": "error", "name": "setting", "error": "RuntimeError: boom"},
            ],
            "stopped at the budget of 9s",
            Diagnosis(
                summary="inductor / lowerings: relu; partial: stage only (stopped at the budget of 9s); diagnosis "
                "failed: setting: RuntimeError: boom",
                stage="inductor / lowerings: relu",
                partial="stage only (stopped at the budget of 9s)",
                failed="diagnosis failed: setting: RuntimeError: boom",
            ),
        ),
        (  # not reproduced, and a later step raised: both said in the line
            [
                {"step": "reproduce", "failing": False, "outcome": "pass", "reason": ""},
                {"step": "error", "name": "repro", "error": "OSError: disk full"},
                {"step": "done"},
            ],
            None,
            Diagnosis(
                summary="not reproduced with a fresh Inductor cache: pass; diagnosis failed: repro: OSError: disk full",
                failed="diagnosis failed: repro: OSError: disk full",
                notes=["does not fail with a fresh cache: it ends pass"],
            ),
        ),
    ],
)
def test_a_stopped_diagnosis_keeps_what_its_log_found(records: list, stopped: str, expected: Diagnosis) -> None:
    diagnosis = assemble(records, 9.0, stopped)
    diagnosis.steps = []
    expected.seconds = 9.0
    assert diagnosis == expected


def fake_fault(subsystem: str, raise_at: str | None = None):
    """A check for torch's real bisector that compiles nothing: it "fails" from the inductor stage on, until
    ``subsystem`` is switched off; it raises under ``raise_at``."""
    from torch._inductor.compiler_bisector import CompilerBisector

    def fails() -> bool:
        backend, current = CompilerBisector.get_backend(), CompilerBisector.get_subsystem()
        if raise_at is not None and current == raise_at:
            raise RuntimeError("the check itself broke")
        return backend == "inductor" and current != subsystem

    return fails


@pytest.mark.parametrize("raise_at", [None, "pre_grad_passes"])
def test_the_bisector_runs_in_process_and_leaves_its_state_clean(tmp_path: Path, raise_at: str | None) -> None:
    """Trap: the bisector cleans up in a __del__, so a check that raises would leave it on; here it is caught,
    the stage is still found, and every piece of the bisector's state is as before."""
    from pytest_inductor_templates.diagnose.bisect import Answers
    from pytest_inductor_templates.diagnose.drawn import Counts
    from pytest_inductor_templates.diagnose.stage import bisector_state, find_stage
    from pytest_inductor_templates.diagnose.steplog import StepLog, read_log

    log = StepLog(tmp_path / "steps.jsonl")
    answers = Answers(fake_fault("inductor_layout_optimization", raise_at), log, {}, None, None, Counts())
    found = find_stage(answers, log, str(tmp_path))
    assert found.describe() == "inductor / inductor_layout_optimization"
    assert found.clean and not any(bisector_state().values())
    assert list(tmp_path.iterdir()) == [tmp_path / "steps.jsonl"]  # its state folder went with it
    checks = [r for r in read_log(tmp_path / "steps.jsonl") if r["step"] == "bisect_check"]
    assert [r["failing"] for r in checks if r["subsystem"] == "pre_grad_passes"] == [None if raise_at else True]


STARTER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", {child!r}], start_new_session=True)  # as run_in_child starts it
time.sleep(60)
"""
CHILD = """
import os, subprocess, sys, time
from pytest_inductor_templates.parent_watch import end_group, end_with_parent, started_by
end_with_parent(started_by(), end_group, 0.05)
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a helper: the child's group
open({pids!r}, "w").write(f"{{__import__('os').getpid()}} {{helper.pid}}")
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:  # a zombie has ended
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:  # gone, or reaped between the two looks
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_diagnosis_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    """The diagnosis child is a session of its own (the budget ends it whole), so a pytest or sample worker killed
    outright would leave it and its helpers diagnosing on the GPU: on the H100 an interrupted opus-mt diagnosis
    went on beside the next sample's run. Its parent killed with SIGKILL, the child's group ends too."""
    import signal
    import subprocess

    pids = tmp_path / "pids.txt"
    child_code = CHILD.format(pids=str(pids))
    starter = subprocess.Popen([sys.executable, "-c", STARTER.format(child=child_code)])
    deadline = time.monotonic() + 60
    while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child, helper = map(int, pids.read_text().split())
    assert _alive(child) and _alive(helper)
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + 30
    while (_alive(child) or _alive(helper)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child) and not _alive(helper), (child, helper)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_diagnosis_whose_parent_died_before_it_looked_ends_at_once(tmp_path: Path) -> None:
    """The parent's pid comes from the parent (``PYTEST_INDUCTOR_PARENT``), not from a late ``getppid``: a
    parent killed while the child still imported torch would otherwise be one the child never saw."""
    import os
    import subprocess

    from pytest_inductor_templates.parent_watch import PARENT_ENV

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that is no parent of the child's: the starter that died before the child looked
    code = CHILD.format(pids=str(tmp_path / "pids.txt"))
    child = subprocess.Popen(
        [sys.executable, "-c", code], start_new_session=True, env={**os.environ, PARENT_ENV: str(gone.pid)}
    )
    deadline = time.monotonic() + 30
    while child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child.returncode is not None, "the child outlived a parent it never saw"


def test_a_diagnosis_runs_with_the_items_threads_on_the_cpu_and_one_beside_a_gpu(tmp_path: Path) -> None:
    """On the CPU each of the diagnosis's processes runs the item's intra-op threads (Inductor bakes the count into
    its C++ kernels); on a GPU one, since the host only compares outputs there (spread over every CPU, a comparison
    waited for the other processes' compiles: 8 s against 0.03 s alone on an H100)."""
    gpu = Device("cuda:0", "cuda")
    assert DiagnosisRequest(object(), Selection(), CPU, "accuracy_fail", tmp_path, threads=3).process_threads() == 3  # type: ignore[arg-type]
    assert DiagnosisRequest(object(), Selection(), gpu, "accuracy_fail", tmp_path, threads=3).process_threads() == 1  # type: ignore[arg-type]
