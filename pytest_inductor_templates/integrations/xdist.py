"""pytest-xdist: a crashed xdist worker's item gets a ``crashed`` record; one GPU per xdist worker when ``-n``
equals the number of GPUs, with no compile in one while another times (``timing.host_lock``); triples kept on one
worker (``--dist loadgroup``) unless the user chose a mode.

Registered only when pytest-xdist is installed (its hookspecs exist only then).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Any

import pytest

from ..report.records import crashed_record
from ..timing import host_lock

PINNED_GPU = "inductor_pinned_gpu"  # pytest-xdist workerinput key: the GPU this xdist worker owns
HOST_LOCK = "inductor_host_lock"  # ... the folder of the compile/timing lock its GPU-owning peers share


def pinned_gpu(config: pytest.Config) -> str | None:
    """The GPU the controller pinned to this pytest-xdist worker, or None (no pinning, or not a worker)."""
    return getattr(config, "workerinput", {}).get(PINNED_GPU)


def host_lock_folder(config: pytest.Config) -> str | None:
    """The folder of the compile/timing lock this pytest-xdist worker shares with its GPU-owning peers, or None."""
    return getattr(config, "workerinput", {}).get(HOST_LOCK)


def worker_count(config: pytest.Config) -> int:
    """The number of pytest-xdist workers of this run, 0 without pytest-xdist (in a worker too: its ``workercount``);
    compile times compare only between runs with as many workers sharing the CPUs."""
    if hasattr(config, "workerinput"):
        return int(config.workerinput.get("workercount", 0))
    if config.getoption("dist", "no") == "no":
        return 0
    return len(config.getoption("tx", None) or [])


def dist_chosen(config: pytest.Config) -> bool:
    """Whether the user chose a --dist mode (on the command line, in addopts or PYTEST_ADDOPTS): read before
    pytest-xdist turns its default, ``no``, into ``load`` under ``-n``."""
    return config.getoption("dist", "no") != "no" or bool(config.getoption("distload", False))


def group_triples(config: pytest.Config, samples_requested: bool, isolated: bool) -> None:
    """With ``-n`` and samples in the worker process, default to ``--dist loadgroup``: a sample's items stay on
    one xdist worker, which builds and compiles each of its triples once (under ``load`` the bench item may compile
    it again elsewhere) and, for a sample that cannot be built, fails it once. Not without isolation: pytest-xdist
    3.8 hangs under ``loadgroup`` once it has replaced a crashed worker (its issues 1323, 1327, 1378), and there a
    sample's crash takes the xdist worker down."""
    if samples_requested and isolated and config.getoption("numprocesses", None) and not dist_chosen(config):
        config.option.dist = "loadgroup"


def pin_this_worker(config: pytest.Config) -> None:
    """In an xdist worker that owns a GPU: see only that GPU (before torch initialises CUDA here)."""
    gpu = pinned_gpu(config)
    if gpu is None:
        return
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise pytest.UsageError(
            f"pytest-xdist worker {config.workerinput.get('workerid')}: CUDA was initialised before the plugin "
            f"could pin GPU {gpu} (by a conftest.py?); run with a -n other than the number of GPUs"
        )
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)


class XdistHooks:
    """The controller's pytest-xdist hooks."""

    def __init__(
        self, gpus: list[str] | None = None, cases: list[tuple[str, str]] | None = None, untimed: str | None = None
    ) -> None:
        self.gpus = gpus or []  # the GPUs to pin one to each xdist worker (empty: no pinning)
        self.cases = cases or []  # (template, device) of the matrix, to recognise a crashed user test
        self.owners: dict[str, str] = {}  # GPU -> the worker that owns it
        self.untimed = untimed  # the option under which the workers time nothing (None: they time their samples)
        # the lock files the GPU-owning workers share, so that none compiles while another times
        shared = bool(self.gpus) and untimed is None and host_lock.available()
        self.lock_folder = tempfile.mkdtemp(prefix="inductor-templates-lock-") if shared else None

    def header_lines(self) -> list[str]:
        """The session header's line on GPU pinning, when there is pinning."""
        if not self.gpus:
            return []
        timed = f"times nothing ({self.untimed})" if self.untimed else "times its CUDA sample items"
        return [
            f"inductor-templates: pytest-xdist: each of the {len(self.gpus)} workers owns one GPU (it sees it as "
            f"cuda:0) and {timed}"
            + ("; no worker compiles a sample while another times one" if self.lock_folder else "")
        ]

    def pytest_configure_node(self, node: Any) -> None:
        if not self.gpus:
            return
        taken = set(self.owners)
        gpu = next((g for g in self.gpus if g not in taken), None)
        if gpu is not None:
            self.owners[gpu] = node.gateway.id
            node.workerinput[PINNED_GPU] = gpu
            node.workerinput[HOST_LOCK] = self.lock_folder

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        for gpu, owner in list(self.owners.items()):
            if owner == node.gateway.id:
                del self.owners[gpu]  # a replacement worker takes this GPU

    def pytest_unconfigure(self) -> None:
        if self.lock_folder is not None:
            shutil.rmtree(self.lock_folder, ignore_errors=True)

    def pytest_handlecrashitem(self, crashitem: str, report: pytest.TestReport, sched: Any) -> None:
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "?")
        record = crashed_record(crashitem, worker, self.cases)
        if record is not None:
            report.when = "call"  # xdist's "???": the item died while it ran; counted as its call report
            report.user_properties.extend(record.properties())


def pinned_gpus(config: pytest.Config, cuda_devices: int, devices_option: str | None) -> list[str]:
    """The GPUs to pin one to each xdist worker: when ``-n`` equals the number of CUDA devices and the matrix
    takes every CUDA device (the default, or ``cuda``); each worker then sees its own GPU as ``cuda:0``."""
    workers = config.getoption("numprocesses", None)
    if not cuda_devices or workers != cuda_devices or devices_option not in (None, "cuda"):
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [g.strip() for g in visible.split(",") if g.strip()] if visible else [str(i) for i in range(cuda_devices)]
    return ids[:cuda_devices]
