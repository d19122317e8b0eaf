"""Sample triples run in the worker process, seen from the pytest process as ``TripleCache`` triples are.

``RemoteTriples`` hands out ``RemoteTriple``s that the sample items use exactly as they use a
``PreparedTriple``: ``result(plan)``. A worker lost during a request ends that item ``crashed`` or ``timeout``;
the next triple gets a fresh worker. The worker is also recycled after a number of triples, when its resident
memory passes a limit, or when a released model stayed alive, so memory stays flat over a long run. Neither
torch nor pytest is imported here.
"""

from __future__ import annotations

import shutil
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from ..check.result import CheckResult
from ..diagnose import Diagnosis
from ..engine.cell import CellResult, Verdict
from ..engine.diagnosis import DiagnosisPlan
from ..engine.triples import SampleCase, TripleEnded
from ..limits import Limit
from ..memory import format_size
from ..samples.base import Sample
from ..templates.matrix import Case
from ..timing.measure import TimingPlan
from ..timing.processes import Repeat
from . import protocol as p
from .client import WorkerLost, WorkerProcess


class WorkerWarning(UserWarning):
    """Something the sample worker could not set up like the pytest process (a conftest.py that failed), or a
    released model it could not free."""


RETAINED_LIMIT = 64 << 20  # bytes of a released triple's tensors still alive past which its worker is replaced
RELEASE_SECONDS = 120.0  # freeing a triple's memory; longer means the worker is stuck, and it is replaced


def forward_stderr(worker: WorkerProcess) -> None:
    """What the sample printed in ``worker``, into this item's captured stderr."""
    text = worker.new_stderr()
    if text:
        sys.stderr.write(text)


@dataclass
class RemoteTriple:
    """One triple held by the worker."""

    owner: RemoteTriples
    item_case: SampleCase
    verdict: Verdict | None = None
    diagnosis: Diagnosis | None = None
    runs_in = "in the sample worker"

    @property
    def sample(self) -> Sample:
        return self.item_case.sample

    @property
    def case(self) -> Case:
        return self.item_case.case

    def result(self, plan: TimingPlan | None = None, limit: Limit | None = None) -> CellResult:
        """The cell's result from the worker: checked on first request, the same verdict for every item
        afterwards; timed when ``plan`` is given. A lost worker ends the request ``crashed`` or ``timeout``."""
        try:
            reply = self.owner.request(p.Run(self.item_case, plan), limit)
        except TripleEnded as lost:
            cell = CellResult(Verdict(lost.result), ended=True)
        else:
            assert isinstance(reply, p.Ran)
            cell = reply.cell
        self.verdict = self.verdict or cell.verdict
        return cell

    @property
    def repeat_processes(self) -> int:
        """The other worker processes its paired timing can be repeated in."""
        return len(self.owner.repeaters)

    def repeat(self, plan: TimingPlan, count: int, limit: Limit | None = None, after: int = 0) -> tuple[Repeat, ...]:
        """The cell's paired timing repeated in up to ``count`` other worker processes (``timing.processes``), those
        after the first ``after`` of them, each building the triple afresh and compiling from the compile cache
        (checking it only under a fresh cache); a repeat whose worker is lost or whose compile or timing gives
        nothing is left out (its reason on stderr)."""
        return self.owner.repeat_in(self.owner.repeaters[after : after + count], self.item_case, plan, limit)

    def diagnose(self, plan: DiagnosisPlan, limit: Limit | None = None) -> Diagnosis:
        """Where and why the triple's check failed, diagnosed in the worker (asked once); a lost worker is a failed
        diagnosis, the verdict stays."""
        if self.diagnosis is None:
            try:
                reply = self.owner.request(p.Diagnose(self.item_case, plan, self.verdict), limit)
            except TripleEnded as lost:
                self.diagnosis = Diagnosis(f"diagnosis failed: {lost.result.reason}", failed=lost.result.reason)
            else:
                assert isinstance(reply, p.Diagnosed)
                self.diagnosis = reply.diagnosis
        return self.diagnosis


class RemoteTriples:
    """The triples of the session's sample items, run one at a time in a worker process."""

    def __init__(
        self,
        worker: WorkerProcess,
        recycle_after: int | None = None,
        recycle_rss: int | None = None,
        timed_device: str | None = None,
        repeaters: Sequence[WorkerProcess] = (),
        lock_folder: str | None = None,
    ) -> None:
        self.worker = worker
        self.repeaters = list(repeaters)  # further workers, each repeating compiled items' paired timings
        self.lock_folder = lock_folder  # the host lock this session made for its workers (removed at close)
        self.recycle_after = recycle_after  # triples per worker (--inductor-recycle-triples)
        self.recycle_rss = recycle_rss  # bytes of resident memory (--inductor-recycle-rss)
        self.timed_device = timed_device  # under pytest-xdist, the device type whose items this worker times
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
        if self.timed_device is not None:
            text += f"; this pytest-xdist worker times its {self.timed_device.upper()} items"
        return text

    def diagnose(
        self, item_case: SampleCase, plan: DiagnosisPlan, verdict: Verdict | None, limit: Limit | None = None
    ) -> Diagnosis:
        """The diagnosis of the item's triple, in the worker: the current one's, or, for a triple released since
        (a diagnosis after the run's items), that of one whose check gave ``verdict``."""
        triple = self.get(item_case)
        triple.verdict = triple.verdict or verdict
        return triple.diagnose(plan, limit)

    def get(self, item_case: SampleCase) -> RemoteTriple:
        if self.current is None or self.current.item_case.key != item_case.key:
            self.release()
            self.current = RemoteTriple(self, item_case)
        return self.current

    def request(self, message: object, limit: Limit | None) -> object:
        """Send ``message`` for the current triple; the reply, or TripleEnded when the worker was lost."""
        self._sent = True
        try:
            reply = self.worker.request(message, limit)
        except WorkerLost as lost:
            forward_stderr(self.worker)
            self.triples_in_worker = 0
            raise TripleEnded(CheckResult(lost.outcome, lost.reason, lost.details)) from None
        forward_stderr(self.worker)
        for failed in self.worker.warnings:
            warnings.warn(WorkerWarning(f"the sample worker could not import {failed}"), stacklevel=1)
        self.worker.warnings = []
        if isinstance(reply, p.Raised):
            raise reply.error or p.RemoteError("the worker raised")
        return reply

    def repeat_in(
        self, workers: Sequence[WorkerProcess], item_case: SampleCase, plan: TimingPlan, limit: Limit | None
    ) -> tuple[Repeat, ...]:
        """``item_case``'s paired timing in each of ``workers`` at once (their builds and compiles side by side, with
        no check: this process checked the same code; their timings one at a time through the host lock), each
        released after its reply; a worker that was lost, or whose repeat was not timed, is left out (its reason on
        stderr)."""
        where = f"inductor-templates: repeating {item_case.sample.id} [{item_case.case.id}]'s timing"
        for worker in workers:
            worker.start()  # their interpreters start side by side too
        asked: list[tuple[WorkerProcess, tuple[float | None, str]]] = []
        for worker in workers:
            try:
                asked.append((worker, worker.send(p.Run(item_case, plan, repeat=True), limit)))
            except WorkerLost as lost:
                sys.stderr.write(f"{where}: {lost.reason}\n")
                forward_stderr(worker)
        return tuple(repeat for worker, wait in asked for repeat in self._repeat_reply(worker, wait, where))

    def _repeat_reply(self, worker: WorkerProcess, wait: tuple[float | None, str], where: str) -> tuple[Repeat, ...]:
        """The repeat ``worker`` was asked for (its loads), once it replied, and the worker released (replaced if
        worn); none where it was not timed."""
        try:
            reply = worker.receive(wait)
            released = worker.request(p.Release(), Limit(RELEASE_SECONDS))
        except WorkerLost as lost:
            sys.stderr.write(f"{where}: {lost.reason}\n")
            return ()
        finally:
            forward_stderr(worker)
        if self._worn(worker, released.retained if isinstance(released, p.Released) else 0, None):
            worker.stop()
        timing = reply.cell.timing if isinstance(reply, p.Ran) else None
        if timing is None or timing.paired is None:
            reason = reply.cell.verdict.result.reason if isinstance(reply, p.Ran) else "the worker raised"
            sys.stderr.write(f"{where}: not timed ({reason})\n")
            return ()
        assert reply.cell.footprint is not None  # a built triple has its footprint
        return (Repeat(timing.paired, reply.cell.footprint.pid), *timing.repeats)

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
        if self._worn(self.worker, retained, self.triples_in_worker):
            self.worker.stop()
            self.triples_in_worker = 0
        if retained > RETAINED_LIMIT:  # after the worker is replaced: under -W error this warning raises
            warnings.warn(WorkerWarning(
                f"{released.sample.id} [{released.case.id}]: {format_size(retained)} of the tensors it built stayed "
                "alive after its release (something outside the triple keeps them; Inductor's freezing, for one, "
                "keeps a frozen model's parameters), so its worker process was replaced"
            ), stacklevel=1)  # fmt: skip

    def _worn(self, worker: WorkerProcess, retained: int, triples: int | None) -> bool:
        """Whether ``worker`` is due for replacement after a release: ``triples`` (None: not counted) reached
        ``recycle_after``, its resident memory passed ``recycle_rss``, or a released triple's tensors stayed alive."""
        due = self.recycle_after is not None and triples is not None and triples >= self.recycle_after
        rss = worker.rss()
        over = self.recycle_rss is not None and rss is not None and rss > self.recycle_rss
        return due or over or retained > RETAINED_LIMIT

    def close(self) -> None:
        """Stop the worker (at the end of the session, or after an interrupt: it may still be busy)."""
        self.current = None
        self.worker.stop()
        for worker in self.repeaters:
            worker.stop()
        if self.lock_folder is not None:
            shutil.rmtree(self.lock_folder, ignore_errors=True)
