"""``diagnose``: the work runs in a spawned child (never forked: CUDA) that is killed at the budget; its step
log says what it had found."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..timing.threads import COMPILE_THREADS, usable_cpus
from . import standby
from .child import HELPERS, LOG, PACKAGE_ROOT, REQUEST, SYS_PATH, started_environment
from .request import DIAGNOSED, Diagnosis, DiagnosisRequest
from .steplog import read_log
from .summary import assemble

BOOT = "import sys; from pytest_inductor_templates.diagnose.child import main; main(sys.argv[1])"
GRACE_SECONDS = 5.0  # on top of the budget, for the child's start (importing torch)
OUTPUT_TAIL = 1500
POLL_SECONDS = 0.5


def _tail(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-OUTPUT_TAIL:].strip()
    except OSError:
        return ""


def _kill(process: subprocess.Popen[bytes]) -> None:
    """The child and what it started (its own process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()


def _keep_log(log: Path, folder: Path) -> None:
    """The step log beside the repro (``steps.jsonl``: each check, its answer, what it cost, when)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, folder / "steps.jsonl")
    except OSError:
        pass


def diagnose(request: DiagnosisRequest) -> Diagnosis:
    """Diagnose one failing item within ``request.budget_seconds``; never raises (a failure of the diagnosis
    itself is returned as ``failed``)."""
    return run_in_child(request)


def _wait(process: subprocess.Popen[bytes], seconds: float, stop_when: Callable[[], bool] | None) -> int | None:
    """The child's exit code, or None when ``seconds`` passed or ``stop_when()`` said stop first."""
    if stop_when is None:
        try:
            return process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop_when():
        if (code := process.poll()) is not None:
            return code
        time.sleep(POLL_SECONDS)
    return process.poll()


def _started(work: Path, ahead: standby.Standby | None, threads: str) -> tuple[subprocess.Popen[bytes], Path]:
    """The diagnosis of ``work`` started, in the process kept ready (``ahead``; a fresh one where it has ended), its
    compile pool ``threads`` processes; the process and the file its output goes to."""
    if ahead is not None:
        try:
            ahead.hand(work, standby.handed_environment(threads))
            return ahead.process, ahead.output
        except OSError:  # it ended after it was taken (killed for memory as it imported, say)
            ahead.discard()
    env = started_environment({COMPILE_THREADS: threads})  # it ends with this process, even one killed early
    output = work / "output.txt"
    with open(output, "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", BOOT, str(work)], stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env, start_new_session=True,
        )  # fmt: skip
    return process, output


def run_in_child(request: DiagnosisRequest, stop_when: Callable[[], bool] | None = None) -> Diagnosis:
    """``diagnose``, with ``stop_when`` polled to stop the child early as the budget would (for tests)."""
    start = time.monotonic()
    if request.outcome not in DIAGNOSED:
        return Diagnosis(
            summary=f"not diagnosed: {request.outcome} is not a compiler failure",
            failed=f"diagnosis failed: outcome {request.outcome!r} is not one of {', '.join(DIAGNOSED)}",
        )
    work = Path(tempfile.mkdtemp(prefix="inductor-diagnose-"))
    try:
        try:
            (work / REQUEST).write_bytes(pickle.dumps(request))
        except Exception as error:
            return Diagnosis(
                summary="diagnosis failed",
                failed=f"diagnosis failed: the request cannot be pickled: {type(error).__name__}: {error}",
                seconds=round(time.monotonic() - start, 1),
            )
        (work / SYS_PATH).write_text(json.dumps([PACKAGE_ROOT, *request.sys_path]))
        (work / HELPERS).write_text(str(request.process_count() - 1))
        # on the CPU a compile pool would cost more to start than the C++ kernels save; on a GPU each of the
        # diagnosis's processes compiles its Triton kernels in a pool of its share of the CPUs (_kill ends them)
        share = max(2, usable_cpus() // request.process_count())
        threads = os.environ.get(COMPILE_THREADS, "1" if request.device.type == "cpu" else str(share))
        ahead = standby.take()
        try:
            process, output = _started(work, ahead, threads)
            stopped = crashed = None
            try:
                code = _wait(process, request.budget_seconds + GRACE_SECONDS, stop_when)
            except BaseException:  # an interrupt (Ctrl-C, a step's limit): the log still says how far it got
                _kill(process)
                _keep_log(work / LOG, Path(request.repro_dir))
                raise
            _kill(process)  # its helpers too, where the child ended without closing them (a crash, a kill)
            if code is None:
                stopped = f"stopped at the budget of {request.budget_seconds:g}s"
            elif code != 0:
                how = f"signal {-code}" if code < 0 else f"exit code {code}"
                crashed = f"the diagnosis process ended with {how}: {_tail(output)[-300:]}"
        finally:
            if ahead is not None:
                ahead.discard()
        standby.replenish()  # the next diagnosis's, where one is kept ready
        _keep_log(work / LOG, Path(request.repro_dir))
        return assemble(read_log(work / LOG), time.monotonic() - start, stopped, crashed)
    except Exception as error:
        return Diagnosis(
            summary="diagnosis failed",
            failed=f"diagnosis failed: {type(error).__name__}: {error}",
            seconds=round(time.monotonic() - start, 1),
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
