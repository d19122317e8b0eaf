"""A diagnosis process started ahead: a fresh Python that imports torch, Dynamo and Inductor (``child.preload``) while
the sample worker builds and checks, then waits for a diagnosis to run (``process.run_in_child`` hands it the work
folder). A diagnosis then starts with its imports done: they took 9-17 s of every diagnosis on an H100 host.

The sample worker keeps one ready where its session diagnoses (``keep_ready``, then another after each use), on a host
of at least ``LEAST_CPUS`` usable CPUs: on fewer the imports would compete with the worker's own checks. The process
holds the host's work lock while it imports (never beside a timing) and ends when its starter closes its stdin or
dies (its read of the work folder ends)."""

from __future__ import annotations

import atexit
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..parent_watch import PARENT_ENV
from ..timing.threads import usable_cpus

BOOT = "import sys; from pytest_inductor_templates.diagnose.standby import serve; serve(sys.argv[1])"
LEAST_CPUS = 4
OUTPUT = "output.txt"  # what the process prints, its last lines the reason of a crash
SHARING = "sharing.pkl"  # the host lock it shares (timing.host_lock.Sharing), if any
ENVIRON = "environ.json"  # in the work folder: variables the diagnosis sets before it starts (its compile pool's size)


@dataclass
class Standby:
    """One process waiting for a diagnosis, and its own folder (its output)."""

    process: subprocess.Popen[bytes]
    folder: Path

    @property
    def output(self) -> Path:
        return self.folder / OUTPUT

    def hand(self, work: Path, environ: dict[str, str]) -> None:
        """Start the diagnosis of ``work`` with ``environ`` set."""
        (work / ENVIRON).write_text(json.dumps(environ))
        assert self.process.stdin is not None
        self.process.stdin.write(f"{work}\n".encode())
        self.process.stdin.close()

    def discard(self) -> None:
        """End it (unused) and remove its folder."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()  # it exits once its imports are done
        shutil.rmtree(self.folder, ignore_errors=True)


_ready: Standby | None = None
_wanted = False
_sharing: Any = None


def keep_ready(sharing: Any = None) -> None:
    """Keep a diagnosis process ready in this process from now on (where the host has the CPUs for it);
    ``sharing``: the host lock (``timing.host_lock.Sharing``) it imports under."""
    global _wanted, _sharing
    _wanted, _sharing = usable_cpus() >= LEAST_CPUS, sharing
    if _wanted:
        atexit.register(_discard_ready)
    replenish()


def _discard_ready() -> None:
    """At this process's exit: the one kept ready, unused, ended and its folder removed."""
    if (standby := take()) is not None:
        standby.discard()


def replenish() -> None:
    """Start one where one is kept ready and none is."""
    global _ready
    if _wanted and _ready is None:
        _ready = _start(_sharing)


def take() -> Standby | None:
    """The process kept ready, if one is and it still runs (it is no longer kept)."""
    global _ready
    standby, _ready = _ready, None
    if standby is not None and standby.process.poll() is not None:
        standby.discard()
        return None
    return standby


def _start(sharing: Any) -> Standby | None:
    folder = Path(tempfile.mkdtemp(prefix="inductor-diagnose-ahead-"))
    try:
        if sharing is not None:
            (folder / SHARING).write_bytes(pickle.dumps(sharing))
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, **{PARENT_ENV: str(os.getpid())})
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        with open(folder / OUTPUT, "wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-c", BOOT, str(folder)], stdin=subprocess.PIPE, stdout=sink,
                stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return None
    return Standby(process, folder)


def serve(folder: str) -> None:
    """The process's side: import under the host's work lock, then run the diagnosis whose work folder comes on
    stdin (none: it ends)."""
    from ..timing import host_lock
    from . import child

    sharing = Path(folder) / SHARING
    host_lock.use(pickle.loads(sharing.read_bytes()) if sharing.exists() else None)
    with host_lock.work():
        child.preload()
    line = sys.stdin.readline().strip()
    if not line:
        return
    work = Path(line)
    environ = json.loads((work / ENVIRON).read_text())
    os.environ.update(environ)
    from torch._inductor import config

    from ..timing.threads import COMPILE_THREADS

    if COMPILE_THREADS in environ:  # read by Inductor as it was imported above: its pool's size, set as it would be
        config.compile_threads = int(environ[COMPILE_THREADS])
    child.main(str(work), ahead=True)
