"""The sample worker: a fresh Python process in which (sample, template, device) triples are built, checked and
timed for the pytest process, so that a crash, a hang or a CUDA fault ends one triple and not the run.

Started by ``worker.client`` as ``python -m pytest_inductor_templates.worker.main``. Requests come on
stdin, replies leave on a private copy of stdout; whatever the samples print goes to stderr, which the
pytest process keeps in a file (its last lines explain a crash). The same ``TripleCache`` as in the pytest
process does the work (the cell engine), so both paths build, check and time a triple alike.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import os
import signal
import sys
import threading
import traceback

from .. import phases
from ..compile.failures import first_line
from ..compile.pool import start_compile_pool, wait_for_compile_pool
from ..conftest_files import import_conftests
from ..diagnose import standby
from ..engine.triples import TripleCache
from ..machine import Device
from ..parent_watch import end_with_parent, started_by
from ..timing import host_lock
from . import protocol as p

FAULT_EXIT = 70  # the exit code after a CUDA fault was reported
PARENT_POLL_SECONDS = 1.0
CUDA_FAULT_MARKERS = (
    "CUDA error",
    "CUDA driver error",
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "Triton Error [CUDA]",
)


def cuda_fault(device: Device, error: BaseException | None = None) -> str | None:
    """Why the CUDA context of ``device`` is no longer usable (an error that poisons it, or a failing
    synchronize), or None. Out-of-memory errors leave it usable."""
    if device.type != "cuda":
        return None
    seen = error
    while seen is not None:
        if type(seen).__name__ == "AcceleratorError" or any(m in str(seen) for m in CUDA_FAULT_MARKERS):
            return first_line(seen)
        seen = seen.__cause__ or seen.__context__
    import torch

    try:
        torch.cuda.synchronize(torch.device(device.name))
    except Exception as sync_error:
        return first_line(sync_error)
    return None


def portable(error: BaseException | None) -> p.RemoteError | None:
    """``error`` as something pickle can carry: its first line, then its traceback."""
    if error is None:
        return None
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    return p.RemoteError(f"{first_line(error)}\n{text}")


class Server:
    """Answers the pytest process's requests with one ``TripleCache``."""

    def __init__(self, hello: p.Hello) -> None:
        self.triples = TripleCache(hello.tolerance, hello.policy, hello.memory_budget)

    def handle(self, request: object) -> object:
        device = request.case.case.device if isinstance(request, (p.Run, p.Diagnose)) else self._device()
        try:
            if isinstance(request, p.Run):
                return self._run(request)
            if isinstance(request, p.Diagnose):
                return p.Diagnosed(self.triples.diagnose(request.case, request.plan, request.verdict))
            if isinstance(request, p.Release):
                retained = self.triples.release()
                fault = cuda_fault(device) if device is not None else None
                return p.Faulted(fault) if fault else p.Released(retained)
            return p.Raised(p.RemoteError(f"unknown request {request!r}"))
        except Exception as error:
            fault = cuda_fault(device, error) if device is not None else None
            return p.Faulted(fault) if fault else p.Raised(portable(error))

    def _device(self) -> Device | None:
        current = self.triples.current
        return current.case.device if current is not None else None

    def _run(self, request: p.Run) -> object:
        cell = self.triples.get(request.case).result(request.plan, repeat=request.repeat)
        if fault := cuda_fault(request.case.case.device, cell.verdict.result.error):
            return p.Faulted(fault)
        result = dataclasses.replace(cell.verdict.result, error=portable(cell.verdict.result.error))
        verdict = dataclasses.replace(cell.verdict, result=result)
        stats = cell.stats
        if stats is not None:
            stats = dataclasses.replace(stats, compile_failure=portable(stats.compile_failure))
        return p.Ran(dataclasses.replace(cell, verdict=verdict, stats=stats))


def main() -> int:
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the samples print goes to stderr, not into the reply pipe
    requests = sys.stdin.buffer
    faulthandler.enable(all_threads=False)  # a crash prints the Python stack to stderr
    faulthandler.register(signal.SIGUSR1, all_threads=False)  # a timed-out request: where it hung
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the pytest process decides when this worker stops
    end_with_parent(started_by(), lambda: os._exit(1), PARENT_POLL_SECONDS)  # pytest killed without stopping it
    hello = p.read_message(requests)
    assert isinstance(hello, p.Hello)
    host_lock.use(hello.host_lock, settle=wait_for_compile_pool)
    with host_lock.work():  # importing torch takes the CPU as a compile does
        sys.path[:] = hello.sys_path
        warnings = import_conftests(hello.conftests)
        if hello.diagnose:  # with the conftests' variables; its imports go on beside this worker's and its checks
            standby.keep_ready(hello.host_lock)
        import torch  # ready before the first request, whose timeout should not pay for it
        import torch._dynamo

        if hello.threads is not None and torch.get_num_threads() != hello.threads:  # as the pytest process runs
            torch.set_num_threads(hello.threads)  # its items (Inductor bakes the count into the CPU kernels)
        if hello.host_lock is not None:  # beside the other workers' starts, not later beside their timings
            start_compile_pool()

    lock = threading.Lock()

    def send(message: object) -> None:
        with lock:
            p.write_message(replies, message)

    send(p.Ready(os.getpid(), warnings))
    server = Server(hello)
    with phases.listening(lambda phase: send(p.Phase(phase))):
        while True:
            try:
                request = p.read_message(requests)
            except EOFError:
                return 0
            if isinstance(request, p.Stop):
                server.triples.release()
                return 0
            reply = server.handle(request)
            send(reply)
            if isinstance(reply, p.Faulted):
                os._exit(FAULT_EXIT)


if __name__ == "__main__":
    sys.exit(main())
