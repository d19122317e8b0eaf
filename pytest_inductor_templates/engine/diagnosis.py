"""The step after a failed check: diagnose the cell (``diagnose``), where it lives, without changing its verdict;
and the run's diagnoses kept within their cap and budget (``RunLedger``), counted across the run's processes."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compile import cache
from ..diagnose import DIAGNOSED, Diagnosis, DiagnosisRequest, ModelBuilder, SavedDraw, diagnose, item_draw, standby
from ..machine import Device
from ..templates.selection import Selection
from ..timing import host_lock
from ..tolerance import Tolerance
from .cell import CheckPolicy, Verdict

LEDGER = "inductor-diagnoses.json"


@dataclass(frozen=True)
class RunLedger:
    """The run's diagnoses so far, in a file every process of the run shares (pytest-xdist's workers too): at
    most ``most`` diagnoses, and at most ``budget`` seconds of them in all (None: no run budget). A diagnosis
    reserves its budget when it starts, and gives back what it did not use when it ends."""

    path: Path
    most: int
    budget: float | None = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, float]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if host_lock.available():  # no fcntl (Windows): one process's count
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_EX)
            text = os.read(fd, 1 << 16).decode() or "{}"
            state = {"claimed": 0, "reserved": 0.0, "spent": 0.0, **json.loads(text)}
            yield state
            os.lseek(fd, 0, os.SEEK_SET)
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps(state).encode())
        finally:
            os.close(fd)  # releases the lock

    def _refused(self, state: dict[str, float]) -> str | None:
        """Why no further diagnosis may be claimed (the cap reached, the run's budget taken), or None."""
        if state["claimed"] >= self.most:
            return f"--inductor-diagnose-max ({self.most}) reached in this run"
        if self.budget is not None and self.budget - state["spent"] - state["reserved"] < 1.0:
            return f"the run's diagnosis budget (--inductor-diagnose-run-budget {self.budget:g} s) is spent"
        return None

    def claim(self, seconds: float) -> float | str:
        """The seconds the next diagnosis may take (``seconds``, or what is left of the run's budget), reserved;
        or why it is not diagnosed."""
        with self._locked() as state:
            if (why := self._refused(state)) is not None:
                return why
            if self.budget is not None:
                seconds = min(seconds, self.budget - state["spent"] - state["reserved"])
            state["claimed"] += 1
            state["reserved"] += seconds
            return seconds

    def spend(self, reserved: float, seconds: float) -> None:
        """A diagnosis that reserved ``reserved`` seconds took ``seconds``."""
        with self._locked() as state:
            state["reserved"] = max(0.0, state["reserved"] - reserved)
            state["spent"] += seconds

    def spent(self) -> float:
        with self._locked() as state:
            return float(state["spent"])

    def exhausted(self) -> bool:
        """Whether no further diagnosis can be claimed: the cap reached, or the run's budget taken."""
        with self._locked() as state:
            return self._refused(state) is not None


@dataclass(frozen=True)
class DiagnosisPlan:
    """How long one diagnosis may take, the folder its repro goes in, and what its process loads."""

    budget_seconds: float
    repro_dir: Path
    name: str  # the item, for messages
    conftests: list[tuple[str, str]] = field(default_factory=list)  # the item's process's conftest.py files
    processes: int = 2  # at most this many processes for independent bisector checks
    ledger: RunLedger | None = None  # the run's ledger, told what the diagnosis took
    refused: str | None = None  # why the item is not diagnosed (the run's cap or budget), or None


def needs_diagnosis(verdict: Verdict) -> bool:
    """Whether the verdict is one a diagnosis explains: the compiled side failed its check."""
    return verdict.result.outcome.value in DIAGNOSED


def refused_diagnosis(why: str) -> Diagnosis:
    """The diagnosis of an item the run's cap or budget refused: why (``report.records.NOT_RUN``)."""
    return Diagnosis(f"not diagnosed: {why}", notes=[why])


def diagnose_cell(
    build: ModelBuilder,
    selection: Selection,
    device: Device,
    tolerance: Tolerance | None,
    verdict: Verdict,
    plan: DiagnosisPlan,
    no_grad: bool,
    policy: CheckPolicy,
    as_built: Any = None,
    built_inputs: list[Any] | None = None,
) -> Diagnosis:
    """Where and why the cell's check failed, judged as the check judged (``policy``: its second opinion and TF32
    mode; ``tolerance``), from copies of the item's own model as it was built (``as_built``, in host memory) and
    inputs (``built_inputs``) where they are given, saved for the diagnosis (the time that takes is counted in its
    seconds), else of one draw of ``build``; never raises. The item's own failure stands for the
    reproduce step unless its code came from Inductor's cache (``verdict.compile_cache`` warm or mixed: a stale entry
    may be what failed, so the diagnosis compiles afresh first). The host's work lock is taken by the diagnosis per
    check, not for all of it."""
    if plan.refused is not None:
        return refused_diagnosis(plan.refused)
    cache_state = verdict.compile_cache
    cached = cache_state in (cache.WARM, cache.MIXED)
    with item_draw(build, as_built, built_inputs or []) as source:
        request = DiagnosisRequest(
            source, selection, device, verdict.result.outcome.value, plan.repro_dir, tolerance, plan.budget_seconds,
            no_grad, name=plan.name, second_opinion=policy.second_opinion, tf32=policy.tf32, conftests=plan.conftests,
            reason=None if cached else verdict.result.reason,
            item_float64_rmse={} if cached else dict(verdict.result.float64_rmse), item_cache=cache_state,
            host_lock=host_lock.sharing(),
            processes=plan.processes, threads=intra_op_threads(),
        )  # fmt: skip
        diagnosis = diagnose(request)
    if isinstance(source, SavedDraw):
        diagnosis.seconds = round(diagnosis.seconds + source.seconds, 1)
    if plan.ledger is not None:
        plan.ledger.spend(plan.budget_seconds, diagnosis.seconds)
        if plan.ledger.exhausted():  # no diagnosis follows in this run: none kept ready for one
            standby.stop_keeping()
    return diagnosis


def intra_op_threads() -> int:
    """torch's intra-op CPU threads in this process now: the item's, which it ran and was checked with."""
    import torch

    return torch.get_num_threads()


def repro_folder(root: Path, nodeid: str) -> Path:
    """An item's own folder under the repro root: its node id made a file name."""
    return root / re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_")
