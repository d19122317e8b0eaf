"""The diagnosis itself, run in a child process that the parent kills at the budget: each step's findings go
to the step log as soon as they are known."""

from __future__ import annotations

import contextlib
import json
import pickle
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .steplog import StepLog

REQUEST = "request.pkl"
SYS_PATH = "sys_path.json"
LOG = "steps.jsonl"


def warm_up() -> None:
    """Detect the CPU's vector ISAs now, from the usual cache: in an empty cache that compiles a test program
    per ISA (minutes on a loaded machine); it decides compiler flags, never what a graph computes."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    pick_vec_isa()


@contextlib.contextmanager
def diagnosis_environment(work: Path) -> Iterator[None]:
    """A fresh Inductor cache for the whole diagnosis, and no FX graph or AOT autograd cache within it (their
    keys do not see a changed lowering, nor the bisector's switches), so every check compiles again."""
    from torch._inductor import config
    from torch._inductor.utils import fresh_cache

    warm_up()
    patches = {
        key: False for key in ("fx_graph_cache", "autograd_cache", "bundled_autograd_cache") if hasattr(config, key)
    }
    with fresh_cache(dir=str(work)), config.patch(patches):  # in the work folder: removed even after a kill
        yield


def _step(log: StepLog, name: str) -> Any:
    """Run one step; a step that raises is logged as that step's error, and the diagnosis goes on."""

    @contextlib.contextmanager
    def guarded() -> Iterator[None]:
        log.write("begin", name=name)
        try:
            yield
        except Exception as error:
            log.write(
                "error",
                name=name,
                error=f"{type(error).__name__}: {error}".splitlines()[0],
                traceback=traceback.format_exc()[-2000:],
            )

    return guarded()


def run(work: Path) -> None:
    from . import localise, numerics, setting, stage
    from .capture import capture
    from .predicate import attempt, with_settings
    from .request import DiagnosisRequest

    log = StepLog(work / LOG)
    request: DiagnosisRequest = pickle.loads((work / REQUEST).read_bytes())
    selection = request.selection
    settings = dict(selection.effective_settings)
    log.write("start", name=request.name, outcome=request.outcome, selection=selection.label, settings=settings)

    def fails(**variant: Any) -> bool | None:
        """Whether the variant still fails as the item did; None when it could not even be built or run."""
        tried = attempt(request, **variant)
        log.write(
            "check",
            outcome=tried.outcome,
            reason=tried.reason[:300],
            seconds=tried.seconds,
            backend_calls=tried.backend_calls,
        )
        return None if tried.outcome == "error" else tried.outcome == request.outcome

    with diagnosis_environment(work):
        first = attempt(request)
        log.write(
            "reproduce",
            outcome=first.outcome,
            reason=first.reason[:500],
            seconds=first.seconds,
            failing=first.outcome == request.outcome,
        )
        if first.outcome != request.outcome:
            log.write("done")
            return
        found: stage.StageResult | None = None
        with _step(log, "stage"):
            temp = tempfile.mkdtemp(prefix="stage-", dir=work)
            found = stage.find_stage(
                lambda options_as_patches: fails(patches=selection.compile_options if options_as_patches else None),
                log,
                temp,
            )
        with _step(log, "setting"):
            text = setting.smallest_failing(settings, lambda s: bool(fails(selection=with_settings(selection, s))), log)
            log.write("setting", setting=text)
        graphs: list[Any] = []
        in_dynamo = found is not None and found.backend == "eager"  # Dynamo or the model's Python: no graph to read
        if not in_dynamo:
            with _step(log, "capture"):
                graphs = capture(request, selection)
                log.write("capture", graphs=len(graphs), aten=sum(g.aten is not None for g in graphs))
        patches = {**(selection.compile_options or {}), **selection.config_patches}
        finding = None
        if request.outcome == "accuracy_fail":
            with _step(log, "operator"):
                named = found.debug_info if found and found.subsystem == "lowerings" else None
                if found and found.subsystem == "decomposition" and found.debug_info:
                    op = found.debug_info.rsplit(".", 1)[0]  # aten.hardswish; its aten graph holds what it became
                    log.write("operator", op=f"{op} (decomposed)", node=None, by_bisector=True)
                    graphs_to_search: list[Any] = []
                else:
                    graphs_to_search = graphs
                for entry in graphs_to_search:
                    if entry.aten is None:
                        continue
                    finding = localise.first_divergence(entry, patches, request.tolerance, named)
                    if finding is not None:
                        break
                if not (found and found.subsystem == "decomposition" and found.debug_info):
                    log.write(
                        "operator",
                        op=finding.describe() if finding else localise.NOT_LOCALISED,
                        node=finding.name if finding else None,
                        by_bisector=named is not None,
                        compiled_rmse=finding.compiled_rmse if finding else None,
                        eager_rmse=finding.eager_rmse if finding else None,
                    )
            with _step(log, "kind"):
                dtypes = numerics.floating_dtypes(request)
                fixed = None
                if dtypes & set(numerics.LOW_PRECISION):
                    still = fails(patches={"emulate_precision_casts": True})
                    fixed = None if still is None else not still
                if finding is not None and finding.compiled_rmse is not None and finding.eager_rmse is not None:
                    distances = numerics.Distances(
                        finding.compiled_rmse, finding.eager_rmse, f"at {finding.describe()}"
                    )
                else:
                    distances = numerics.output_distances(request, selection)
                kind = numerics.kind_of(distances, fixed)
                figures = distances.describe() if distances else None
                if fixed is not None:
                    figures = "; ".join(
                        filter(
                            None, [figures, "emulate_precision_casts " + ("fixes it" if fixed else "does not fix it")]
                        )
                    )
                log.write("kind", kind=kind, figures=figures, dtypes=sorted(dtypes))
        with _step(log, "repro"):
            write_repro(request, graphs, found, log, work)
    log.write("done")


def write_repro(request: Any, graphs: list[Any], found: Any, log: StepLog, work: Path) -> None:
    """The first captured graph that fails the standalone check on its own, written as repro.py."""
    from . import repro, standalone

    selection = request.selection
    if found is not None and found.backend == "eager":
        log.write(
            "repro",
            repro=None,
            why="no torch-only repro: it fails under Dynamo's eager backend, in Dynamo "
            "or in the model's own Python code, before any graph is compiled",
        )
        return
    if not graphs:
        log.write("repro", repro=None, why="no torch-only repro: Dynamo captured no graph")
        return
    tolerance = (
        (request.tolerance.rtol, request.tolerance.atol) if request.tolerance and not request.tolerance.scaled else None
    )
    no_grad = request.no_grad or selection.inference_only
    for index, entry in enumerate(graphs):
        directory = Path(request.repro_dir) if index == 0 else Path(request.repro_dir) / f"graph{index}"
        scratch = work / f"candidate{index}"
        path = repro.write_repro(
            scratch,
            entry,
            name=request.name,
            what=f"{request.outcome} under {selection.description}"
            + (f"; stage: {found.describe()}." if found is not None else "."),
            options=selection.compile_options,
            patches=selection.config_patches,
            no_grad=no_grad,
            tolerance=tolerance,
        )
        if path is None:
            continue
        namespace = repro.load_module(path)
        inputs = [t for t in entry.inputs]
        code, message = standalone.check(
            namespace["Repro"](), inputs, selection.compile_options, selection.config_patches, no_grad, tolerance
        )
        log.write("repro_check", graph=index, code=code, message=message[:500])
        if code == 1:
            directory.mkdir(parents=True, exist_ok=True)
            for name in ("repro.py", "inputs.pt"):
                (directory / name).write_bytes((scratch / name).read_bytes())
            log.write("repro", repro=str(directory / "repro.py"), message=message[:500])
            return
    log.write("repro", repro=None, why="no captured graph fails on its own under the repro's check")


def main(work: str) -> None:
    """Entry point: ``work`` holds the request and receives the step log."""
    directory = Path(work)
    sys.path[:0] = [p for p in json.loads((directory / SYS_PATH).read_text()) if p not in sys.path]
    start = time.monotonic()
    try:
        run(directory)
    except BaseException as error:
        StepLog(directory / LOG).write(
            "crash",
            error=f"{type(error).__name__}: {error}".splitlines()[0],
            traceback=traceback.format_exc()[-2000:],
            seconds=time.monotonic() - start,
        )
        raise
