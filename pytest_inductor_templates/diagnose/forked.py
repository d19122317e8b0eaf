"""A helper process forked from the diagnosis's child once it has imported torch and Inductor (never after CUDA is
initialised: the child forks before it touches the device), with the part of ``subprocess.Popen``'s interface the
helpers' pool uses: a fresh Python would import them again (7-9 s of CPU each on a 2-core CPU)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import IO

CUDA_ERROR_NOT_INITIALIZED = 3  # the driver's answer to any call but a few before cuInit


def can_fork() -> bool:
    """Whether helpers may be forked from this process: it can fork and has not initialised the CUDA driver (a
    process forked after cuInit cannot use CUDA). Importing torch may load the driver's library (torch 2.11 with CUDA
    13 does) without initialising it. Unknown: no."""
    if not hasattr(os, "fork"):
        return False
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    loaded = {line.split(maxsplit=5)[-1] for line in maps.splitlines() if "libcuda.so" in line}
    return all(not _initialised(path) for path in loaded)


def _initialised(driver: str) -> bool:
    """Whether the loaded CUDA driver library at ``driver`` has been initialised: before cuInit, cuDeviceGetCount
    answers CUDA_ERROR_NOT_INITIALIZED. Unknown: yes."""
    try:
        library = ctypes.CDLL(driver, mode=os.RTLD_NOLOAD)
        count = ctypes.c_int()
        return library.cuDeviceGetCount(ctypes.byref(count)) != CUDA_ERROR_NOT_INITIALIZED
    except (OSError, AttributeError):
        return True


class ForkedProcess:
    """``target()`` run in a forked process whose stdin and stdout are pipes to this one and whose stderr goes to
    ``errors``; it exits 0 when ``target`` returns, 1 (the traceback on stderr) when it raises. ``inherited``: this
    process's descriptors the fork must not keep (the other helpers' pipes, so each sees its own end)."""

    def __init__(self, target: Callable[[], None], errors: Path, inherited: list[int]) -> None:
        questions_in, questions_out = os.pipe()
        answers_in, answers_out = os.pipe()
        sink = os.open(errors, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():  # a watcher thread is all that runs beside: it holds no lock the fork needs
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            _become_helper(target, questions_in, answers_out, sink, [questions_out, answers_in, *inherited])
        os.close(questions_in)
        os.close(answers_out)
        os.close(sink)
        self.pid = pid
        self.stdin: IO[bytes] = os.fdopen(questions_out, "wb")
        self.stdout: IO[bytes] = os.fdopen(answers_in, "rb")
        self.returncode: int | None = None

    def descriptors(self) -> list[int]:
        """This side's ends of the pipes."""
        return [self.stdin.fileno(), self.stdout.fileno()]

    def poll(self) -> int | None:
        """Its exit code (negative: the signal that ended it), or None while it runs."""
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self) -> int:
        """Its exit code, once it has ended."""
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:  # reaped elsewhere: its status is gone (0, as subprocess.Popen says then)
                self.returncode = 0
        return self.returncode

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


def _become_helper(target: Callable[[], None], stdin: int, stdout: int, stderr: int, others: list[int]) -> None:
    """The forked side: the pipes as its standard streams, ``target`` run, then exit (never back into the code that
    forked it)."""
    code = 1
    try:
        os.dup2(stdin, 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        for fd in {stdin, stdout, stderr, *others}:
            with contextlib.suppress(OSError):
                os.close(fd)
        sys.stdin = open(0, closefd=False)  # the forking process's streams: elsewhere
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        target()
        code = 0
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
