"""The sample worker: a fresh Python process in which (sample, template, device) triples are built, checked and
timed for the pytest process, so that a crash, a hang or a CUDA fault ends one triple and not the run.

Started by ``worker.client`` as ``python -m pytest_inductor_templates.worker.main``. Requests come on
stdin, replies leave on a private copy of stdout; whatever the samples print goes to stderr, which the
pytest process keeps in a file (its last lines explain a crash). The same ``TripleCache`` as in the pytest
process does the work, so both paths build, check and time a triple alike.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import importlib.util
import os
import signal
import sys
import threading
import time
import traceback
from types import SimpleNamespace
from typing import Any

from .. import phases
from ..compile.failures import first_line
from ..machine import Device
from ..samples.triples import TripleCache
from ..timing import host_lock
from ..timing.paired import DEFAULT_PRECISION
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


class _QuietLogger:
    """pytest-benchmark's logger, for a fixture outside a pytest session: says nothing."""

    def debug(self, *args: Any, **kwargs: Any) -> None:
        pass

    info = warning = debug


def benchmark_fixture(request: p.Time) -> Any:
    """A pytest-benchmark fixture with the settings of the item's own (see ``remote.benchmark_settings``)."""
    from pytest_benchmark.fixture import BenchmarkFixture

    settings = dict(request.benchmark)
    disabled = settings.pop("disabled", True)
    # the item as the fixture reads it: pytest-benchmark 5.3 reads ``nodeid``, 5.2 ``_nodeid``
    node = SimpleNamespace(name=request.name, nodeid=request.nodeid, _nodeid=request.nodeid)
    quiet = _QuietLogger()
    return BenchmarkFixture(
        node, add_stats=lambda stats: None, logger=quiet, warner=quiet.debug, disabled=disabled, **settings
    )


class _MarkedItem:
    """What timing reads from an item: its benchmark marker, here holding the item's resolved settings."""

    def __init__(self, settings: dict[str, Any]) -> None:
        import pytest

        chosen = {name: settings[name] for name in ("min_time", "max_time", "min_rounds")}
        self._marker = pytest.mark.benchmark(timer=settings["timer"].target, **chosen).mark

    def get_closest_marker(self, name: str) -> Any:
        return self._marker if name == "benchmark" else None


class Server:
    """Answers the pytest process's requests with one ``TripleCache``."""

    def __init__(self, hello: p.Hello) -> None:
        precision = hello.precision if hello.precision is not None else DEFAULT_PRECISION
        self.triples = TripleCache(hello.tolerance, hello.require_effect, hello.memory_budget, precision)

    def handle(self, request: object) -> object:
        device = request.case.case.device if isinstance(request, (p.Check, p.Time)) else self._device()
        try:
            if isinstance(request, p.Check):
                return self._check(request)
            if isinstance(request, p.Time):
                return self._time(request)
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

    def _check(self, request: p.Check) -> object:
        triple = self.triples.get(request.case)
        verdict = triple.judged()
        if fault := cuda_fault(triple.case.device, verdict.result.error):
            return p.Faulted(fault)
        result = dataclasses.replace(verdict.result, error=portable(verdict.result.error))
        stats = triple.stats
        if stats is not None:
            stats = dataclasses.replace(stats, compile_failure=portable(stats.compile_failure))
        verdict = dataclasses.replace(verdict, result=result)
        return p.Checked(verdict, stats, triple.pid, triple.rss_mib, triple.cuda_mib)

    def _time(self, request: p.Time) -> object:
        triple = self.triples.get(request.case)
        fixture = benchmark_fixture(request)
        triple.time(request.record, fixture, _MarkedItem(request.benchmark))
        if fault := cuda_fault(triple.case.device):
            return p.Faulted(fault)
        if fixture.stats is None:
            return p.Timed(request.record)
        return p.Timed(request.record, fixture.stats.iterations, list(fixture.stats.stats.data))


def _import_conftests(conftests: list[tuple[str, str]]) -> list[str]:
    """Import the session's conftest.py files (backends and settings they register at import exist here
    too); returns a warning for each that failed."""
    warnings = []
    for name, path in conftests:
        if name in sys.modules:
            continue
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except Exception as error:
            sys.modules.pop(name, None)
            warnings.append(f"{path}: {first_line(error)}")
    return warnings


def _watch_parent(parent: int) -> None:
    """Exit when the pytest process is gone (killed without stopping this worker)."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def main() -> int:
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the samples print goes to stderr, not into the reply pipe
    requests = sys.stdin.buffer
    faulthandler.enable(all_threads=False)  # a crash prints the Python stack to stderr
    faulthandler.register(signal.SIGUSR1, all_threads=False)  # a timed-out request: where it hung
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the pytest process decides when this worker stops
    _watch_parent(os.getppid())
    hello = p.read_message(requests)
    assert isinstance(hello, p.Hello)
    sys.path[:] = hello.sys_path
    warnings = _import_conftests(hello.conftests)
    import torch  # ready before the first request, whose timeout should not pay for it
    import torch._dynamo

    if hello.threads is not None and torch.get_num_threads() != hello.threads:  # as the pytest process runs its
        torch.set_num_threads(hello.threads)  # items (Inductor bakes the count into the CPU kernels it generates)
    host_lock.use(hello.host_lock)

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
