"""From the child's step log to a Diagnosis, whether the child finished, was stopped at the budget, or crashed."""

from __future__ import annotations

from typing import Any

from ..compile.cache import MIXED, WARM
from .request import Diagnosis
from .stage import stage_from_checks

STEPS = ("stage", "setting", "operator", "kind", "repro")


def _last(records: list[dict[str, Any]], step: str) -> dict[str, Any] | None:
    return next((r for r in reversed(records) if r.get("step") == step), None)


def assemble(
    records: list[dict[str, Any]], seconds: float, stopped: str | None = None, crashed: str | None = None
) -> Diagnosis:
    """The diagnosis the records support. ``stopped``: why the child was stopped (the budget); ``crashed``: how
    it ended when it died on its own."""
    diagnosis = Diagnosis(summary="", seconds=round(seconds, 1), steps=records)
    first = _last(records, "reproduce")
    errors = [r for r in records if r.get("step") in ("error", "crash")]
    if (counted := _last(records, "counts")) is not None:
        diagnosis.counts = {k: v for k, v in counted.items() if k not in ("step", "at")}
    if (conftest := _last(records, "conftest")) is not None:
        diagnosis.notes.append("conftest.py could not be imported: " + "; ".join(conftest["failed"]))
    if (cannot := _last(records, "cannot")) is not None:
        diagnosis.failed = diagnosis.summary = f"diagnosis failed: {cannot['why']}"
        return diagnosis
    if first is not None and not first.get("failing"):
        why = first["reason"].splitlines()[0][:300] if first.get("reason") else ""
        diagnosis.notes.append(
            f"does not fail with a fresh cache: it ends {first['outcome']}"
            + (f" ({first['reason']})" if first.get("reason") else "")
        )
        diagnosis.summary = f"not reproduced with a fresh Inductor cache: {first['outcome']}" + (
            f" ({why})" if why else ""
        )
        if first.get("item_cache") in (WARM, MIXED):
            diagnosis.summary += (
                f"; the item's compiled code came from Inductor's cache ({first['item_cache']}): a stale or wrong "
                "cache entry (clear the cache, or run with --inductor-fresh-cache)"
            )
        if conftest is not None:
            diagnosis.summary += "; " + diagnosis.notes[-2]
        return _finish(diagnosis, errors, stopped, crashed, records)
    if (found := _last(records, "stage")) is not None:
        diagnosis.stage = found["describe"]
        if found.get("error"):
            diagnosis.notes.append(f"the bisector stopped early: {found['error']}")
        if not found.get("kept_backend"):
            diagnosis.notes.append(
                "this torch cannot keep the plugin's backend while bisecting: the template's "
                "options were applied as a scoped config patch at the inductor stage"
            )
        broken = [r for r in records if r.get("step") == "bisect_check" and r.get("failing") is None]
        if broken:
            where = broken[0].get("subsystem") or broken[0].get("backend")
            diagnosis.notes.append(
                f"{len(broken)} of the bisector's checks could not run (first at {where}) and counted as still failing"
            )
        if not found.get("clean"):
            diagnosis.notes.append("the bisector's state was not clean afterwards")
    else:
        diagnosis.stage = stage_from_checks(records)
    if (found := _last(records, "setting")) is not None:
        diagnosis.setting = found["setting"]
    if (found := _last(records, "operator")) is not None:
        diagnosis.op = found["op"]
    if (found := _last(records, "kind")) is not None:
        diagnosis.kind, diagnosis.figures = found["kind"], found.get("figures")
    if (found := _last(records, "repro")) is not None:
        diagnosis.repro, diagnosis.no_repro = found.get("repro"), found.get("why")
    return _finish(diagnosis, errors, stopped, crashed, records)


def _finish(
    diagnosis: Diagnosis,
    errors: list[dict[str, Any]],
    stopped: str | None,
    crashed: str | None,
    records: list[dict[str, Any]],
) -> Diagnosis:
    done = any(r.get("step") == "done" for r in records)
    if stopped and not done:
        reached = [s for s in STEPS if _last(records, s) is not None]
        diagnosis.partial = (f"{' and '.join(reached)} only" if reached else "nothing found") + f" ({stopped})"
        if diagnosis.stage and "stage" not in reached:
            diagnosis.partial = f"stage only, from the bisection's checks so far ({stopped})"
    if errors or (crashed and not done):
        what = "; ".join(f"{r.get('name', 'diagnosis')}: {r['error']}" for r in errors) or crashed
        diagnosis.failed = f"diagnosis failed: {what}"
    parts = [diagnosis.summary] if diagnosis.summary else []  # a summary set already (not reproduced) leads
    if diagnosis.stage:
        parts.append(diagnosis.stage)
    if diagnosis.setting:
        parts.append(f"setting: {diagnosis.setting}")
    if diagnosis.op:
        parts.append(f"first diverging op: {diagnosis.op}")
    if diagnosis.kind:
        parts.append(diagnosis.kind)
    if diagnosis.partial:
        parts.append(f"partial: {diagnosis.partial}")
    if diagnosis.failed:  # said beside what the other steps found: a step that failed leaves its part out
        parts.append(diagnosis.failed)
    diagnosis.summary = "; ".join(parts) or "nothing found"
    return diagnosis
