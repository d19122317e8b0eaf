"""The pytest process's side of the sample worker: start it, send requests with a deadline, notice its death.

A request ends in its reply, or in ``WorkerLost``: the worker died (a signal, an exit, a CUDA fault it
reported) or ran past the deadline and was stopped. Either way the reason names the phase it was in and
the last lines of its stderr, and the next request starts a fresh worker. Neither torch nor pytest is
imported here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import phases
from ..limits import Limit
from ..memory import rss_bytes
from ..outcomes import Outcome
from ..parent_watch import PARENT_ENV
from . import protocol as p

START_SECONDS = 600.0  # importing torch and the conftest files, on a loaded machine
STOP_SECONDS = 10.0
DUMP_SECONDS = 1.0  # after SIGUSR1, for faulthandler to print where a timed-out worker hung
TAIL_LINES = 20


class WorkerLost(Exception):
    """The worker did not reply: ``outcome`` (crashed or timeout), a one-line ``reason``, the ``details``."""

    def __init__(self, outcome: Outcome, reason: str, details: str) -> None:
        super().__init__(reason)
        self.outcome, self.reason, self.details = outcome, reason, details


def describe_exit(returncode: int) -> str:
    """``killed by SIGSEGV``, ``exited with code 0``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        oom = " (what the out-of-memory killer sends)" if -returncode == signal.SIGKILL else ""
        return f"was killed by {name}{oom}"
    return f"exited with code {returncode}"


def telling_line(lines: list[str]) -> str | None:
    """The stderr line that best says why the worker died: faulthandler's ``Fatal Python error`` with the
    innermost frame of the thread that died, else the last line (never its list of extension modules)."""
    fatal = next((i for i, line in enumerate(lines) if line.startswith("Fatal Python error")), None)
    if fatal is not None:
        after = lines[fatal:]
        current = next((i for i, line in enumerate(after) if line.startswith("Current thread")), 0)
        frame = next((line.strip() for line in after[current:] if line.lstrip().startswith("File ")), None)
        return f"{lines[fatal]} ({frame})" if frame else lines[fatal]
    useful = [line for line in lines if line.strip() and not line.startswith("Extension modules:")]
    return useful[-1].strip() if useful else None


@dataclass
class WorkerProcess:
    """One worker at a time, started on the first request and again after it is lost or stopped."""

    hello: Callable[[], p.Hello]  # made when a worker starts: conftest files load during collection
    environment: dict[str, str] = field(default_factory=dict)  # set in the worker's environment, beside this one's
    process: subprocess.Popen[bytes] | None = None
    phase: str | None = None
    warnings: list[str] = field(default_factory=list)  # conftest files the last worker could not import
    _reader: p.MessageReader | None = None
    _stderr: Path | None = None
    _stderr_offset: int = 0
    _unquoted: str | None = None  # after a loss: the new stderr that its details do not quote
    _ready: bool = False
    _in_flight: bool = False  # a request was sent and its reply has not come (an interrupt can leave it so)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        """Start a worker, without waiting for it to be ready (its torch import overlaps other work)."""
        if self.alive:
            return
        self._close()
        handle, name = tempfile.mkstemp(prefix="inductor-worker-", suffix=".stderr")
        self._stderr, self._stderr_offset = Path(name), 0
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pytest_inductor_templates.worker.main"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=handle,
            start_new_session=True,  # a terminal's Ctrl-C or a CI cancel reaches pytest, which stops the worker
            env={**os.environ, **self.environment, PARENT_ENV: str(os.getpid())},
        )
        os.close(handle)
        assert self.process.stdin is not None and self.process.stdout is not None
        self._reader = p.MessageReader(self.process.stdout.fileno())
        self._ready, self.phase = False, None
        p.write_message(self.process.stdin, self.hello())

    def request(self, message: object, limit: Limit | None = None) -> object:
        """Send ``message``; its reply, or WorkerLost. ``limit.seconds`` counts from the worker being ready;
        ``limit.deadline`` bounds the wait for the worker to start too."""
        return self.receive(self.send(message, limit))

    def send(self, message: object, limit: Limit | None = None) -> tuple[float | None, str]:
        """Send ``message`` once the worker is ready (WorkerLost if it is not); what ``receive`` waits until for
        its reply, so that several workers can work on their requests at once."""
        limit = limit or Limit()
        self.start()
        assert self.process is not None and self.process.stdin is not None
        self._wait_ready(limit)
        self.phase = None
        self._stderr_offset, self._unquoted = self._stderr_size(), None
        try:
            p.write_message(self.process.stdin, message)
        except (BrokenPipeError, OSError):
            self._lost()
        self._in_flight = True
        return limit.for_request(time.monotonic())

    def receive(self, wait: tuple[float | None, str]) -> object:
        """The reply to the request ``send`` sent (``wait``: its deadline and why), or WorkerLost."""
        return self._reply(*wait)

    def _wait_ready(self, limit: Limit) -> None:
        if self._ready:
            return
        deadline, why = time.monotonic() + START_SECONDS, f"{START_SECONDS:g} s"
        if limit.deadline is not None and limit.deadline < deadline:
            deadline, why = limit.for_request(time.monotonic())
        reply = self._reply(deadline, why, starting=True)
        assert isinstance(reply, p.Ready)
        self._ready, self.warnings = True, reply.warnings

    def _reply(self, deadline: float | None, why: str, starting: bool = False) -> object:
        assert self._reader is not None
        while True:
            try:
                arrived, message = self._reader.next(deadline)
            except EOFError:
                self._lost(starting)
            if not arrived:
                self._timed_out(why, starting)
            if isinstance(message, p.Phase):
                self.phase = message.name
                continue
            if isinstance(message, p.Faulted):
                self._lost(fault=message.reason)
            if not starting:
                self._in_flight = False
            return message

    def _where(self, starting: bool = False) -> str:
        return "starting" if starting else phases.describe(self.phase)

    def _lost(self, starting: bool = False, fault: str | None = None) -> None:
        assert self.process is not None
        try:
            returncode = self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self._kill()
            returncode = self.process.returncode
        said = self.new_stderr().splitlines()
        tail = self._quote()
        if fault is not None:
            reason = f"CUDA fault {self._where()}: {fault} (its worker process was replaced)"
        else:
            reason = f"the worker process {describe_exit(returncode)} {self._where(starting)}"
            if telling := telling_line(said):
                reason += f"; stderr: {telling}"
        raise WorkerLost(Outcome.CRASHED, reason, self._details(reason, tail))

    def _timed_out(self, why: str, starting: bool) -> None:
        assert self.process is not None
        where = self._where(starting)
        if self.alive:
            os.kill(self.process.pid, signal.SIGUSR1)  # faulthandler prints the stack it hung in
            try:
                self.process.wait(timeout=DUMP_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        self._kill()
        reason = f"no result within {why} {where}; the worker process was stopped"
        raise WorkerLost(Outcome.TIMEOUT, reason, self._details(reason, self._quote()))

    def _quote(self) -> list[str]:
        """The last lines of the new stderr, for a loss's details; the rest is what ``new_stderr`` gives from now
        on, so that a caller forwarding it prints every line once (faulthandler's stack in the details only)."""
        text = self.new_stderr()
        lines = text.splitlines(keepends=True)
        kept, start = 0, len(lines)
        while start > 0 and kept < TAIL_LINES:
            start -= 1
            kept += bool(lines[start].strip())
        self._unquoted = "".join(lines[:start])
        return [line.rstrip() for line in lines[start:] if line.strip()]

    @staticmethod
    def _details(reason: str, tail: list[str]) -> str:
        if not tail:
            return reason
        return reason + "\nlast lines of the worker's stderr:\n" + "\n".join(f"    {line}" for line in tail)

    def _stderr_size(self) -> int:
        try:
            return self._stderr.stat().st_size if self._stderr else 0
        except OSError:
            return 0

    def new_stderr(self) -> str:
        """What the worker wrote to stderr since the last request began (what the samples printed); after the
        worker was lost, only what the loss's details do not quote."""
        if self._unquoted is not None:
            return self._unquoted
        if self._stderr is None:
            return ""
        try:
            with open(self._stderr, "rb") as stream:
                stream.seek(self._stderr_offset)
                return stream.read().decode(errors="replace")
        except OSError:
            return ""

    def rss(self) -> int | None:
        """The worker's resident memory (None when not running, or not on Linux)."""
        return rss_bytes(self.process.pid) if self.alive and self.process else None

    def stop(self) -> None:
        """Ask the worker to exit (killing it if it does not), and remove its stderr file. A worker still working on a
        request (the run was interrupted: Ctrl-C, SIGTERM) is killed at once: it would read the request to stop only
        once that one ended, which a hang never does."""
        if self.alive and self.process is not None and self.process.stdin is not None and not self._in_flight:
            try:
                p.write_message(self.process.stdin, p.Stop())
                self.process.wait(timeout=STOP_SECONDS)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._kill()
        self._close()

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def _close(self) -> None:
        if self.process is not None:
            for stream in (self.process.stdin, self.process.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        if self._stderr is not None:
            self._stderr.unlink(missing_ok=True)
            self._stderr = None
        self.process, self._reader, self._ready, self._unquoted = None, None, False, None
        self._in_flight = False
