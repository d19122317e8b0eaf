"""The diagnosis's last step: the first captured graph that fails the standalone check on its own, kept as
``repro.py`` (with ``inputs.pt`` and ``weights.pt``). The first graph's repro is written as soon as the stage is
known and, where a helper process is left idle, checked there while the asking process localises the operator (on
opus-mt, on an H100, the repro's check took 8 s after the operator step's 5 s)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .steplog import StepLog


@dataclass
class Checked:
    """A candidate repro's standalone check: its exit code (1: it fails on its own), its message, the process."""

    code: int
    message: str
    pid: int | None = None  # the helper's, where one checked it
    seconds: float = 0.0


def why_none(found: Any, graphs: list[Any]) -> str | None:
    """Why the diagnosis can write no torch-only repro, or None."""
    if found is not None and found.backend == "eager":
        return (
            "no torch-only repro: it fails under Dynamo's eager backend, in Dynamo or in the model's own Python code, "
            "before any graph is compiled"
        )
    if not graphs:
        return "no torch-only repro: Dynamo captured no graph"
    return None


def candidate(request: Any, entry: Any, found: Any, work: Path, index: int) -> Path | None:
    """Graph ``index``'s repro written in the work folder (``candidate<index>/repro.py`` and its inputs); None where
    the graph cannot be written as torch code."""
    from . import repro

    selection = request.selection
    return repro.write_repro(
        work / f"candidate{index}",
        entry,
        name=request.name,
        what=f"{request.outcome} under {selection.description}"
        + (f"; stage: {found.describe()}." if found is not None else "."),
        options=selection.compile_options,
        patches=selection.config_patches,
        no_grad=request.no_grad or selection.inference_only,
        tolerance=request.repro_tolerance(),
        second_opinion=request.second_opinion,
        backend=selection.backend,
        conftests=[file for _, file in request.conftests] if selection.backend != "inductor" else [],
    )


def hand_over(request: Any, graphs: list[Any], found: Any, work: Path, spare: Any) -> Any:
    """Write the first graph's repro and hand its check to ``spare`` (``helpers.SpareHelper``, or None): the spare
    now checking it, or None where it was not handed over (``finish`` then writes and checks it here, and says why
    where it cannot)."""
    if spare is None or why_none(found, graphs) is not None:
        return None
    try:
        written = candidate(request, graphs[0], found, work, 0)
    except Exception:
        return None
    return spare if written is not None and spare.ask(written) else None


def check(request: Any, path: Path, inputs: list[Any]) -> Checked:
    """The written repro's standalone check on ``inputs``, in this process, under the host's work lock, with the
    kernels the diagnosis compiled (its own fresh cache)."""
    from ..timing import host_lock
    from . import repro, standalone

    selection = request.selection
    start = time.monotonic()
    namespace = repro.load_module(path)
    with host_lock.work():
        code, message = standalone.check(
            namespace["built"](str(path.parent)), inputs, selection.compile_options, selection.config_patches,
            request.no_grad or selection.inference_only, request.repro_tolerance(), request.second_opinion,
            selection.backend, fresh=False,
        )  # fmt: skip
    return Checked(code, message, seconds=round(time.monotonic() - start, 2))


def check_saved(request: Any, path: Path, device: Any) -> Checked:
    """``check`` of a repro written by another process, on the inputs saved beside it (a helper's side)."""
    import torch

    from .repro import INPUTS

    return check(request, path, torch.load(path.parent / INPUTS, map_location=device, weights_only=True))


def finish(
    request: Any, graphs: list[Any], found: Any, log: StepLog, work: Path, counts: Any, first: Checked | None
) -> None:
    """Check each captured graph's repro in turn (the first one's check ``first`` where a helper made it) and keep
    the first that fails on its own in the item's repro folder; log why there is none otherwise."""
    from . import repro

    if (why := why_none(found, graphs)) is not None:
        log.write("repro", repro=None, why=why)
        return
    for index, entry in enumerate(graphs):
        checked = first if index == 0 else None  # the helper's check of the repro it was handed, written already
        path = work / f"candidate{index}" / repro.SCRIPT
        if checked is None:
            if candidate(request, entry, found, work, index) is None:
                continue
            checked = check(request, path, list(entry.inputs))
        counts.compiles += 1
        counts.eager_runs += 2  # the graph as it is and in float64
        where = {"pid": checked.pid, "seconds": checked.seconds} if checked.pid is not None else {}
        log.write("repro_check", graph=index, code=checked.code, message=checked.message[:500], **where)
        if checked.code == 1:
            directory = Path(request.repro_dir) if index == 0 else Path(request.repro_dir) / f"graph{index}"
            directory.mkdir(parents=True, exist_ok=True)
            for name in (repro.SCRIPT, repro.INPUTS, repro.WEIGHTS):
                (directory / name).write_bytes((path.parent / name).read_bytes())
            log.write("repro", repro=str(directory / repro.SCRIPT), message=checked.message[:500])
            return
    log.write("repro", repro=None, why="no captured graph fails on its own under the repro's check")
