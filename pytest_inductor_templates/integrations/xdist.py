"""pytest-xdist: a crashed xdist worker's item gets a ``crashed`` record; with ``-n`` at least the number of GPUs,
the workers share the GPUs (worker i on GPU i mod G) and time their CUDA sample items, and with the CPU alone in
the matrix they time their CPU sample items, one timing at a time per device and beside nobody's work
(``timing.host_lock``); a sample's items kept on one worker (``--dist loadgroup``, grouped by sample) unless the user
chose a mode; ``-n auto`` sized to the host (``integrations.auto_workers``).

Registered only when pytest-xdist is installed (its hookspecs exist only then).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ..report.records import ROOT_NODEID, SAMPLE_NODEID, crashed_record
from ..tables import plural
from ..timing import cores, host_lock
from ..timing.threads import COMPILE_THREADS, compile_threads_share
from .auto_workers import AutoWorkers

PINNED_GPU = "inductor_pinned_gpu"  # pytest-xdist workerinput key: the GPU this xdist worker uses
HOST_LOCK = "inductor_host_lock"  # ... the folder of the work/timing lock the session's workers share
TIMED_DEVICE = "inductor_timed_device"  # ... the device type whose sample items it times: cuda or cpu
LOCK_LOG = "inductor_lock_log"  # ... the lock log (--inductor-lock-log), if any
CPU_SPLIT = "inductor_cpu_split"  # ... the CPUs of timings and of work (--inductor-compile-beside-timing), if split


def pinned_gpu(config: pytest.Config) -> str | None:
    """The GPU the controller pinned to this pytest-xdist worker, or None (no pinning, or not a worker)."""
    return getattr(config, "workerinput", {}).get(PINNED_GPU)


def shared_host(config: pytest.Config) -> host_lock.Sharing | None:
    """How this pytest-xdist worker's sample worker shares the host with the session's others (the lock folder,
    its GPU's timing slot, the lock log, the CPUs split between timings and work), or None when the workers time
    nothing."""
    given = getattr(config, "workerinput", {})
    if given.get(HOST_LOCK) is None:
        return None
    gpu = given.get(PINNED_GPU)
    split = cores.Split(*map(tuple, given[CPU_SPLIT])) if given.get(CPU_SPLIT) else None
    return host_lock.Sharing(given[HOST_LOCK], f"gpu{gpu}" if gpu is not None else "gpu", given.get(LOCK_LOG), split)


def timed_device(config: pytest.Config) -> str | None:
    """The device type (``cuda``, ``cpu``) whose sample items this pytest-xdist worker times, or None."""
    given = getattr(config, "workerinput", {})
    return given.get(TIMED_DEVICE) if given.get(HOST_LOCK) is not None else None


def worker_count(config: pytest.Config) -> int:
    """The pytest-xdist workers this session starts: its ``--tx`` specs, as ``-n`` (capped by ``--maxprocesses``) or
    the user (``2*popen``) gave them; 0 where it does not distribute (in a worker: its ``workercount``). Known once
    pytest-xdist has read ``-n``; compile times compare only between runs with as many workers."""
    if hasattr(config, "workerinput"):
        return int(config.workerinput.get("workercount", 0))
    if config.getoption("dist", "no") == "no":
        return 0
    counts = [spec.split("*", 1)[0] for spec in config.getoption("tx", None) or []]
    return sum(int(count) if count.isdigit() else 1 for count in counts)


def dist_chosen(config: pytest.Config) -> bool:
    """Whether the user chose a --dist mode (on the command line, in addopts or PYTEST_ADDOPTS), as pytest first
    parsed the arguments: pytest-xdist's own ``pytest_cmdline_main`` may already have turned its default, ``no``,
    into ``load`` under ``-n`` (whose hook runs first depends on the order the plugins were loaded in)."""
    given = getattr(config, "known_args_namespace", config.option)
    return getattr(given, "dist", "no") != "no" or bool(getattr(given, "distload", False))


def group_triples(config: pytest.Config, samples_requested: bool, isolated: bool) -> None:
    """With ``-n`` and samples in the worker process, default to ``--dist loadgroup``: a sample's items stay on
    one xdist worker, which builds and compiles each of its triples once (under ``load`` the bench item may compile
    it again elsewhere) and, for a sample that cannot be built, fails it once. Not without isolation: pytest-xdist
    3.8 hangs under ``loadgroup`` once it has replaced a crashed worker (its issues 1323, 1327, 1378), and there a
    sample's crash takes the xdist worker down."""
    if samples_requested and isolated and config.getoption("numprocesses", None) and not dist_chosen(config):
        config.option.dist = "loadgroup"


def pin_this_worker(config: pytest.Config) -> None:
    """In an xdist worker given a GPU: see only that GPU (before torch initialises CUDA here)."""
    gpu = pinned_gpu(config)
    if gpu is None:
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise pytest.UsageError(
            f"pytest-xdist worker {config.workerinput.get('workerid')}: CUDA was initialised before the plugin "
            f"could pin GPU {gpu} (by a conftest.py?); run with a -n below the number of GPUs"
        )
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)


def _compile_threads(workers: int, split: cores.Split | None) -> str | None:
    """How many compile threads Inductor has in each worker's sample worker (a share of the work CPUs, where the
    host's CPUs are split), for the header."""
    if COMPILE_THREADS in os.environ:
        return f"{COMPILE_THREADS}={os.environ[COMPILE_THREADS]}, as set"
    share = compile_threads_share(workers, len(split.work) if split is not None else None)
    return f"Inductor's compile threads: {share} a worker ({COMPILE_THREADS})" if share is not None else None


class XdistHooks:
    """The controller's pytest-xdist hooks."""

    def __init__(
        self,
        gpus: list[str] | None = None,
        cases: list[tuple[str, str]] | None = None,
        timed: str | None = None,
        untimed: str | None = None,
        workers: int = 0,
        lock_log: Path | None = None,
        auto: AutoWorkers | None = None,
        samples: bool = False,
        split: cores.Split | None = None,
    ) -> None:
        self.gpus = gpus or []  # the GPUs the workers share, worker i on GPU i mod G (empty: no pinning)
        self.cases = cases or []  # (template, device) of the matrix, to recognise a crashed user test
        self.users: dict[str, str] = {}  # worker -> the GPU it uses
        self.timed = timed  # the device type whose sample items the workers would time (None: they time none)
        if timed is not None and untimed is None and not host_lock.available():
            untimed = "no flock on this platform: nothing would keep their timings apart"
        self.untimed = untimed  # why the workers time nothing although they could (an option, the platform)
        self.workers = workers
        self.auto = auto  # how -n auto was sized, when it was
        self.samples = samples  # sample items run (in the sample worker): under loadgroup, a sample is one group
        self.split = split  # the CPUs of timings and of work, where compiles go on beside timings
        # the lock files the workers share: one timing at a time per device, and no work beside a timing
        shared = timed is not None and untimed is None
        self.lock_folder = tempfile.mkdtemp(prefix="inductor-templates-lock-") if shared else None
        self.lock_log = host_lock.new_log(lock_log) if shared else None

    def header_lines(self) -> list[str]:
        """The session header's lines on ``-n auto``, and on how the workers share the devices and time."""
        lines = [f"inductor-templates: {self.auto.line()}"] if self.auto is not None else []
        if self.timed is None:
            return lines
        one = self.workers == 1 or 0 < self.workers == len(self.gpus)  # "1 worker", "each of the 2 workers": times
        if not self.gpus:
            shared = "1 worker has the CPU" if one else f"{self.workers} workers share the CPU"
        elif self.workers > len(self.gpus):
            count = len(self.gpus)
            where = f"worker i on GPU i mod {count}, which it sees as cuda:0" if count > 1 else "each sees it as cuda:0"
            shared = f"{self.workers} workers share {plural(count, 'GPU')} ({where})"
        else:
            shared = f"each of the {plural(self.workers, 'worker')} owns one GPU (it sees it as cuda:0)"
        verb, its = ("times", "its") if one else ("time", "their")
        if self.lock_folder is None:
            return [*lines, f"inductor-templates: pytest-xdist: {shared} and {verb} nothing ({self.untimed})"]
        kind, per = ("CUDA", "one timing at a time per GPU") if self.gpus else ("CPU", "one timing at a time")
        threads = _compile_threads(self.workers, self.split)
        return [
            *lines,
            f"inductor-templates: pytest-xdist: {shared} and {verb} {its} {kind} sample items, {per}, while no "
            "worker builds, compiles, checks or releases a sample" + (f"; {threads}" if threads else ""),
        ]

    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Under ``--dist loadgroup`` with samples: pytest-xdist's loadgroup scheduler, each sample's items one group
        (else None: pytest-xdist's own)."""
        if not self.samples or config.getoption("dist", "no") != "loadgroup":
            return None
        return sample_groups(config, log)

    def pytest_configure_node(self, node: Any) -> None:
        if self.gpus:
            users = Counter(self.users.values())
            gpu = min(self.gpus, key=lambda g: (users[g], self.gpus.index(g)))  # i mod G, a replacement in the gap
            self.users[node.gateway.id] = gpu
            node.workerinput[PINNED_GPU] = gpu
        if self.lock_folder is not None:
            node.workerinput[HOST_LOCK] = self.lock_folder
            node.workerinput[TIMED_DEVICE] = self.timed
            node.workerinput[LOCK_LOG] = self.lock_log
            node.workerinput[CPU_SPLIT] = [list(self.split.timing), list(self.split.work)] if self.split else None

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        self.users.pop(node.gateway.id, None)  # a replacement worker takes its GPU

    def pytest_unconfigure(self) -> None:
        if self.lock_folder is not None:
            shutil.rmtree(self.lock_folder, ignore_errors=True)

    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "?")
        record = crashed_record(crashitem, worker, self.cases)
        if record is not None:
            report.when = "call"  # xdist's "???": the item died while it ran; counted as its call report
            report.user_properties.extend(record.properties())


def sample_scope(nodeid: str) -> str | None:
    """The group of a sample item's node id (its sample's node), None for another item."""
    match = SAMPLE_NODEID.match(nodeid)  # (a match: a worker may add ``@group``)
    return f"{ROOT_NODEID}::{match['sample']}" if match else None


def sample_groups(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's loadgroup scheduler, with each sample's items one group, read from their node ids: xdist's
    workers name an item's group by adding ``@group`` to its node id, which pytest 9.2 no longer lets them do (xdist
    issue 1386); the node id itself names the sample. Other items are grouped as xdist groups them."""
    from xdist.scheduler import LoadGroupScheduling

    class SampleGroups(LoadGroupScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return sample_scope(nodeid) or super()._split_scope(nodeid)

    return SampleGroups(config, log)


def pinned_gpus(config: pytest.Config, cuda_devices: int, devices_option: str | None) -> list[str]:
    """The GPUs the xdist workers share, worker i on GPU i mod G: when ``-n`` is at least the number of CUDA
    devices and the matrix takes every CUDA device (the default, ``cuda``, or ``cuda:0`` where it is the only one);
    each worker then sees its GPU as ``cuda:0``."""
    workers = worker_count(config)
    every = (None, "cuda", "cuda:0") if cuda_devices == 1 else (None, "cuda")
    if not cuda_devices or workers < cuda_devices or devices_option not in every:
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [g.strip() for g in visible.split(",") if g.strip()] if visible else [str(i) for i in range(cuda_devices)]
    return ids[:cuda_devices]
