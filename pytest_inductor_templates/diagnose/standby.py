"""A diagnosis process started ahead: a fresh Python that imports torch, Dynamo and Inductor (``child.preload``) while
the sample worker builds and checks, then waits for a diagnosis to run (``process.run_in_child`` hands it the work
folder). A diagnosis then starts with its imports done: they took 9-17 s of every diagnosis on an H100 host.

The sample worker keeps one ready where its session diagnoses and each xdist worker's share of the host is at least
``LEAST_CPUS`` CPUs (``worth_keeping``: on fewer the imports would compete with the workers' own checks); another is
started after each use. It imports with the worker's ``sys.path`` and environment as they were when it started, under
the host's work lock (never beside a timing); where a variable torch, Triton or CUDA may read as they load, or the
start of ``sys.path``, has changed since (a test set one), it is ended and the diagnosis starts afresh. It ends,
removing its folder, when its starter closes its stdin or dies."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..parent_watch import PARENT_ENV
from ..timing.threads import COMPILE_THREADS, usable_cpus
from . import child

BOOT = "import sys; from pytest_inductor_templates.diagnose.standby import serve; serve(sys.argv[1])"
LEAST_CPUS = 4
OUTPUT = "output.txt"  # what the process prints, its last lines the reason of a crash
SHARING = "sharing.pkl"  # the host lock it shares (timing.host_lock.Sharing), if any
ENVIRON = "environ.json"  # in the work folder: the environment the diagnosis runs with (``handed_environment``)


def worth_keeping(workers: int) -> bool:
    """Whether a worker keeps one ready: each of ``workers`` (pytest-xdist's) has ``LEAST_CPUS`` usable CPUs."""
    return usable_cpus() // max(1, workers) >= LEAST_CPUS


READ_AT_IMPORT = ("TORCH", "PYTORCH", "TRITON", "CUDA")  # variables torch, Triton and CUDA may read as they load
SET_LATER = frozenset({COMPILE_THREADS, "TORCHINDUCTOR_CACHE_DIR"})  # per diagnosis; Inductor's import sets the cache's


def _read_at_import() -> dict[str, str]:
    """This process's variables that the diagnosis's imports may have read (the rest are handed over with the work)."""
    return {
        name: value for name, value in os.environ.items() if name.startswith(READ_AT_IMPORT) and name not in SET_LATER
    }


def handed_environment(threads: str) -> dict[str, str]:
    """The environment a diagnosis gets from this process, with its compile pool's size: a fresh child's, less the
    paths the process kept ready was started with (its ``PYTHONPATH``, its parent)."""
    return {
        **{name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", PARENT_ENV)},
        COMPILE_THREADS: threads,
    }


@dataclass
class Standby:
    """One process waiting for a diagnosis, its own folder (its output), and its starter's ``sys.path`` and
    environment when it started."""

    process: subprocess.Popen[bytes]
    folder: Path
    sys_path: list[str] = field(default_factory=lambda: list(sys.path))
    environ: dict[str, str] = field(default_factory=_read_at_import)

    @property
    def output(self) -> Path:
        return self.folder / OUTPUT

    def current(self) -> bool:
        """Whether it still runs and imported what a process started now would: the same variables, and a
        ``sys.path`` that begins as it did (paths added at its end, as torch's import adds setuptools' vendored
        packages, find nothing the earlier ones did)."""
        same_path = sys.path[: len(self.sys_path)] == self.sys_path
        return self.process.poll() is None and same_path and self.environ == _read_at_import()

    def hand(self, work: Path, environ: dict[str, str]) -> None:
        """Start the diagnosis of ``work`` with ``environ`` set; OSError where the process has ended."""
        (work / ENVIRON).write_text(json.dumps(environ))
        assert self.process.stdin is not None
        self.process.stdin.write(f"{work}\n".encode())
        self.process.stdin.close()

    def discard(self) -> None:
        """End it and what it started (its session), releasing any lock it holds, and remove its folder."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_ready: Standby | None = None
_wanted = False
_sharing: Any = None


def keep_ready(sharing: Any = None) -> None:
    """Keep a diagnosis process ready in this process from now on; ``sharing``: the host lock
    (``timing.host_lock.Sharing``) it imports under."""
    global _wanted, _sharing
    if not _wanted:
        atexit.register(_discard_ready)
    _wanted, _sharing = True, sharing
    replenish()


def _discard_ready() -> None:
    """At this process's exit: the one kept ready, unused, ended and its folder removed."""
    global _ready
    standby, _ready = _ready, None
    if standby is not None:
        standby.discard()


def stop_keeping() -> None:
    """Keep none ready from now on (the run can diagnose no more), ending the one kept."""
    global _wanted
    _wanted = False
    _discard_ready()


def replenish() -> None:
    """Start one where one is kept ready and none is."""
    global _ready
    if _wanted and _ready is None:
        _ready = _start(_sharing)


def take() -> Standby | None:
    """The process kept ready, where it is current (``Standby.current``; else it is ended); it is no longer kept."""
    global _ready
    standby, _ready = _ready, None
    if standby is not None and not standby.current():
        standby.discard()
        return None
    return standby


def _start(sharing: Any) -> Standby | None:
    folder = Path(tempfile.mkdtemp(prefix="inductor-diagnose-ahead-"))
    try:
        if sharing is not None:
            (folder / SHARING).write_bytes(pickle.dumps(sharing))
        (folder / child.SYS_PATH).write_text(json.dumps(sys.path))  # put first before it imports
        with open(folder / OUTPUT, "wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-c", BOOT, str(folder)], stdin=subprocess.PIPE, stdout=sink,
                stderr=subprocess.STDOUT, env=child.started_environment({}), start_new_session=True,
            )  # fmt: skip
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return Standby(process, folder)


def serve(folder: str) -> None:
    """The process's side: import under the host's work lock, then run the diagnosis whose work folder comes on
    stdin; none (its starter closed it or died): its folder removed, it ends."""
    from ..timing import host_lock

    own = Path(folder)
    sys.path[:0] = [p for p in json.loads((own / child.SYS_PATH).read_text()) if p not in sys.path]
    sharing = own / SHARING
    host_lock.use(pickle.loads(sharing.read_bytes()) if sharing.exists() else None)
    with host_lock.work():
        child.preload()
    line = sys.stdin.readline().strip()
    if not line:
        shutil.rmtree(own, ignore_errors=True)
        return
    work = Path(line)
    environ = json.loads((work / ENVIRON).read_text())
    os.environ.update(environ)
    from torch._inductor import config

    if COMPILE_THREADS in environ:  # read by Inductor as it was imported above: its pool's size, set as it would be
        config.compile_threads = int(environ[COMPILE_THREADS])
    child.main(str(work), ahead=True)
