"""The step after a failed check: diagnose the cell (``diagnose``), where it lives, without changing its verdict."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..diagnose import DIAGNOSED, Diagnosis, DiagnosisRequest, ModelBuilder, diagnose
from ..machine import Device
from ..templates.selection import Selection
from ..tolerance import Tolerance
from .cell import Verdict


@dataclass(frozen=True)
class DiagnosisPlan:
    """How long one diagnosis may take, and the folder its repro goes in."""

    budget_seconds: float
    repro_dir: Path
    name: str  # the item, for messages


def needs_diagnosis(verdict: Verdict) -> bool:
    """Whether the verdict is one a diagnosis explains: the compiled side failed its check."""
    return verdict.result.outcome.value in DIAGNOSED


def diagnose_cell(
    build: ModelBuilder,
    selection: Selection,
    device: Device,
    tolerance: Tolerance | None,
    verdict: Verdict,
    plan: DiagnosisPlan,
    no_grad: bool,
) -> Diagnosis:
    """Where and why the cell's check failed, from fresh models made by ``build``; never raises."""
    request = DiagnosisRequest(
        build, selection, device, verdict.result.outcome.value, plan.repro_dir, tolerance, plan.budget_seconds,
        no_grad, name=plan.name,
    )  # fmt: skip
    return diagnose(request)


def repro_folder(root: Path, nodeid: str) -> Path:
    """An item's own folder under the repro root: its node id made a file name."""
    return root / re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid).strip("_")
