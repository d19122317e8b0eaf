"""Sample triples run in the worker process, seen from the pytest process as ``TripleCache`` triples are.

``RemoteTriples`` hands out ``RemoteTriple``s that the sample items use exactly as they use a
``PreparedTriple``: ``judged()``, ``stats``, ``time(...)``. A worker lost during a request ends that item
``crashed`` or ``timeout``; the next triple gets a fresh worker. The worker is also recycled after a number
of triples, when its resident memory passes a limit, or when a released model stayed alive, so memory stays
flat over a long run.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ..check.result import CheckResult
from ..check.verdict import Verdict
from ..limits import Limit
from ..memory import format_size
from ..record import ItemRecord
from ..samples.base import Sample
from ..samples.triples import SampleCase, TripleEnded
from ..settings import Settings
from ..templates.matrix import Case
from ..timing.policy import TimingSettings, timing_switched_off_by
from ..tolerance import Tolerance
from . import protocol as p
from .client import WorkerLost, WorkerProcess


class WorkerWarning(UserWarning):
    """Something the sample worker could not set up like the pytest process (a conftest.py that failed), or a
    released model it could not free."""


RETAINED_LIMIT = 64 << 20  # bytes of a released triple's tensors still alive past which its worker is replaced
RELEASE_SECONDS = 120.0  # freeing a triple's memory; longer means the worker is stuck, and it is replaced


def benchmark_settings(item: pytest.Item, benchmark: Any, timed: bool) -> dict[str, Any]:
    """The settings pytest-benchmark built the item's ``benchmark`` fixture with (its session's options, then
    the item's marker), for the worker's own fixture; ``timed`` False: call once, time nothing."""
    from pytest_benchmark.utils import NameWrapper

    session = getattr(item.config, "_benchmarksession", None)
    marker = item.get_closest_marker("benchmark")
    chosen = dict(marker.kwargs) if marker else {}
    if "timer" in chosen:
        chosen["timer"] = NameWrapper(chosen["timer"])
    settings = dict(session.options if session is not None else {}, **chosen)
    settings["disabled"] = not timed or session is None
    return settings


def feed(benchmark: Any, iterations: int, per_call: list[float]) -> None:
    """Give pytest-benchmark's fixture the rounds the worker measured, as if it had timed them itself (its
    JSON, comparison and histogram options then apply unchanged)."""
    metadata = benchmark._make_stats(iterations)
    for seconds in per_call:
        metadata.stats.update(seconds)
    benchmark._mode = "benchmark(...) in the sample worker"


@dataclass
class RemoteTriple:
    """One triple held by the worker (a ``samples.triples.Triple``)."""

    owner: RemoteTriples
    item_case: SampleCase
    limit: Limit | None = None  # how long the current item's requests may take
    verdict: Verdict | None = None
    stats: Any = None
    pid: int | None = None
    rss_mib: float | None = None
    cuda_mib: float | None = None

    @property
    def sample(self) -> Sample:
        return self.item_case.sample

    @property
    def case(self) -> Case:
        return self.item_case.case

    def judged(self) -> Verdict:
        """The triple's verdict: checked in the worker on first request, the same for every item afterwards."""
        if self.verdict is None:
            try:
                reply = self.owner.request(p.Check(self.item_case), self.limit)
            except TripleEnded as ended:
                self.verdict = Verdict(ended.result)
            else:
                assert isinstance(reply, p.Checked)
                self.verdict, self.stats = reply.verdict, reply.stats
                self.pid, self.rss_mib, self.cuda_mib = reply.pid, reply.rss_mib, reply.cuda_mib
        return self.verdict

    def time(self, record: ItemRecord, benchmark: Any, item: pytest.Item) -> None:
        """Time the model under test in the worker into ``record``; pytest-benchmark's fixture gets the rounds."""
        timed = not benchmark.disabled or self.owner.time_without_benchmark(self.case)
        settings = benchmark_settings(item, benchmark, timed)
        reply = self.owner.request(p.Time(self.item_case, record, settings, item.name, item.nodeid), self.limit)
        assert isinstance(reply, p.Timed)
        for f in dataclasses.fields(record):
            setattr(record, f.name, getattr(reply.record, f.name))
        if reply.iterations is not None and not benchmark.disabled:
            feed(benchmark, reply.iterations, reply.data)
        elif benchmark.disabled:
            benchmark._mode = "called once in the sample worker"


class RemoteTriples:
    """The triples of the session's sample items, run one at a time in a worker process."""

    def __init__(
        self,
        worker: WorkerProcess,
        recycle_after: int | None = None,
        recycle_rss: int | None = None,
        pinned_timing: bool = False,
    ) -> None:
        self.worker = worker
        self.recycle_after = recycle_after  # triples per worker (--inductor-recycle-triples)
        self.recycle_rss = recycle_rss  # bytes of resident memory (--inductor-recycle-rss)
        self.pinned_timing = pinned_timing  # under pytest-xdist, this worker owns its GPU: time CUDA items
        self.current: RemoteTriple | None = None
        self.triples_in_worker = 0
        self._sent = False  # whether the current triple reached the worker

    @property
    def description(self) -> str:
        """Where the triples run, for the header."""
        plural = "s" if self.recycle_after != 1 else ""
        recycle = [f"after {self.recycle_after} triple{plural}"] if self.recycle_after else []
        recycle += [f"above {format_size(self.recycle_rss)} resident"] if self.recycle_rss else []
        recycle.append("when a released triple's tensors stay alive")
        text = "samples run in a worker process (a crash or hang ends one item)"
        text += f", replaced {' or '.join(recycle)}"
        if self.pinned_timing:
            text += "; this pytest-xdist worker owns one GPU, and its CUDA items are timed"
        return text

    def get(self, item_case: SampleCase, limit: Limit | None = None) -> RemoteTriple:
        if self.current is None or self.current.item_case.key != item_case.key:
            self.release()
            self.current = RemoteTriple(self, item_case)
        self.current.limit = limit
        return self.current

    def time_without_benchmark(self, case: Case) -> bool:
        """Whether to time although pytest-benchmark switched itself off: under pytest-xdist, when each
        xdist worker owns one GPU, its CUDA items are timed (into the records)."""
        return self.pinned_timing and case.device.type == "cuda"

    def request(self, message: object, limit: Limit | None) -> object:
        """Send ``message`` for the current triple; the reply, or TripleEnded when the worker was lost."""
        self._sent = True
        try:
            reply = self.worker.request(message, limit)
        except WorkerLost as lost:
            self._forward_stderr()
            self.triples_in_worker = 0
            raise TripleEnded(CheckResult(lost.outcome, lost.reason, lost.details)) from None
        self._forward_stderr()
        for failed in self.worker.warnings:
            warnings.warn(WorkerWarning(f"the sample worker could not import {failed}"), stacklevel=1)
        self.worker.warnings = []
        if isinstance(reply, p.Raised):
            raise reply.error or p.RemoteError("the worker raised")
        return reply

    def _forward_stderr(self) -> None:
        """What the sample printed in the worker, into this item's captured stderr."""
        text = self.worker.new_stderr()
        if text:
            sys.stderr.write(text)

    def release(self) -> None:
        """Release the current triple in the worker, then recycle the worker if it is due."""
        if self.current is None:
            return
        released, self.current = self.current.item_case, None
        if not (self._sent and self.worker.alive):
            return
        self._sent = False
        self.triples_in_worker += 1
        try:
            reply = self.worker.request(p.Release(), Limit(RELEASE_SECONDS))
        except WorkerLost as lost:  # the triple is over; the next one starts a fresh worker
            sys.stderr.write(f"inductor-templates: releasing a triple: {lost.details}\n")
            self.triples_in_worker = 0
            return
        retained = reply.retained if isinstance(reply, p.Released) else 0
        rss = self.worker.rss()
        due = self.recycle_after is not None and self.triples_in_worker >= self.recycle_after
        over = self.recycle_rss is not None and rss is not None and rss > self.recycle_rss
        if due or over or retained > RETAINED_LIMIT:
            self.worker.stop()
            self.triples_in_worker = 0
        if retained > RETAINED_LIMIT:  # after the worker is replaced: under -W error this warning raises
            warnings.warn(WorkerWarning(
                f"{released.sample.id} [{released.case.id}]: {format_size(retained)} of the tensors it built stayed "
                "alive after its release (something outside the triple keeps them; Inductor's freezing, for one, "
                "keeps a frozen model's parameters), so its worker process was replaced"
            ), stacklevel=1)  # fmt: skip

    def close(self) -> None:
        """Stop the worker (at the end of the session, or after an interrupt: it may still be busy)."""
        self.current = None
        self.worker.stop()


PINNED_GPU = "inductor_pinned_gpu"  # pytest-xdist workerinput key: the GPU this xdist worker owns
HOST_LOCK = "inductor_host_lock"  # ... the folder of the compile/timing lock its GPU-owning peers share


def conftest_modules(config: pytest.Config) -> list[tuple[str, str]]:
    """(module name, file) of every conftest.py the session has loaded, outermost first."""
    found = []
    for plugin in config.pluginmanager.get_plugins():
        file = getattr(plugin, "__file__", None)
        if isinstance(plugin, types.ModuleType) and file and Path(file).name == "conftest.py":
            found.append((plugin.__name__, file))
    return sorted(found, key=lambda module: (len(Path(module[1]).parts), module[1]))


def remote_triples(
    config: pytest.Config, settings: Settings, tolerance: Tolerance | None, timing: TimingSettings
) -> RemoteTriples:
    """The session's triples in a worker process set up like this one (its ``sys.path``, its conftest files,
    its intra-op threads)."""

    def hello() -> p.Hello:
        return p.Hello(list(sys.path), conftest_modules(config), tolerance, settings.require_effect,
                       settings.memory_budget, timing.threads, timing.precision,
                       getattr(config, "workerinput", {}).get(HOST_LOCK))  # fmt: skip

    # a worker owning a GPU times its CUDA items, unless the user switched timing off
    timed = pinned_gpu(config) is not None and timing_switched_off_by(config) is None
    return RemoteTriples(WorkerProcess(hello), settings.recycle_triples, settings.recycle_rss, timed)


def pinned_gpu(config: pytest.Config) -> str | None:
    """The GPU the controller pinned to this pytest-xdist worker, or None (no pinning, or not a worker)."""
    return getattr(config, "workerinput", {}).get(PINNED_GPU)
