"""The diagnosis itself, run in a child process that the parent kills at the budget: each step's findings go
to the step log as soon as they are known."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import repro_step
from .environment import diagnosis_environment, pool_waiter, settle_heap
from .steplog import StepLog

REQUEST = "request.pkl"
SYS_PATH = "sys_path.json"
HELPERS = "helpers.txt"  # how many helper processes: read before anything imports torch (forked after it has)
LOG = "steps.jsonl"
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder this plugin is imported from
NVML_CHECK = "PYTORCH_NVML_BASED_CUDA_CHECK"  # torch.cuda.is_available() without initialising the driver
VOUCHED = "graphs-vouched.txt"  # fingerprints of kept graphs that agreed with a failing check, in any process


def started_environment(extra: dict[str, str]) -> dict[str, str]:
    """The environment a diagnosis's process is started with from this process: this one's and ``extra``, the plugin
    found first on ``PYTHONPATH``, and this process named its parent (it ends with it: ``parent_watch``)."""
    from ..parent_watch import PARENT_ENV

    env = dict(os.environ, **extra, **{PARENT_ENV: str(os.getpid())})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_ROOT, env.get("PYTHONPATH")]))
    return env


def _step(log: StepLog, name: str, counts: Any = None) -> Any:
    """Run one step; a step that raises is logged as that step's error, and the diagnosis goes on. What the
    diagnosis has cost so far is logged after it."""

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
        finally:
            if counts is not None:
                log_counts(log, counts)

    return guarded()


def log_counts(log: StepLog, counts: Any) -> None:
    log.write("counts", **dataclasses.asdict(counts))


def prepare(request: Any, log: StepLog | None) -> dict[str, float]:
    """This process set up as the item's was: its conftest files imported (the backends they register), its TF32
    mode, its intra-op threads (``DiagnosisRequest.process_threads``), the session's host lock. Returns the seconds
    of the first two (on an H100 the whole took 9 s of opus-mt's 117.6 s)."""
    import torch

    from ..compile.precision import set_mode
    from ..conftest_files import import_conftests
    from ..timing import host_lock

    start = time.monotonic()
    failed = import_conftests(request.conftests)
    if failed and log is not None:
        log.write("conftest", failed=failed)
    imported = time.monotonic()
    if request.tf32 is not None:
        set_mode(request.tf32)
    seconds = {"conftests_seconds": round(imported - start, 2), "tf32_seconds": round(time.monotonic() - imported, 2)}
    if (threads := request.process_threads()) is not None:
        torch.set_num_threads(threads)
    host_lock.use(request.host_lock)
    return seconds


def backend_problem(backend: str, conftests: list[tuple[str, str]]) -> str | None:
    """Why this process cannot compile with the item's backend (it is registered where this process does not
    look: a pytest hook, a plugin not imported here), or None."""
    import torch._dynamo

    if backend == "inductor":
        return None
    try:
        torch._dynamo.lookup_backend(backend)
    except Exception as error:
        from ..compile.failures import first_line

        return (
            f"the backend {backend!r} cannot be loaded in the diagnosis's process ({first_line(error)}), which "
            f"imported the item's {len(conftests)} conftest.py files: a backend registered elsewhere (in a pytest "
            "hook, a plugin) is not seen there"
        )
    return None


def options_as_patches(backend: str) -> bool:
    """Whether the template's options go in as a scoped config patch at this bisector stage (where this torch
    cannot keep the plugin's backend while bisecting)."""
    from .stage import keeps_custom_backend

    return not keeps_custom_backend() and backend == "inductor"


@contextlib.contextmanager
def helper_session(work: Path) -> Iterator[tuple[Callable[[Any], bool | None], Any, Callable[[], bool], Any]]:
    """A helper process's side of the diagnosis (``helpers.helper_main``): the request, the one draw and eager's
    half loaded from the work folder; yields its check of a bisector question, its counts, whether it holds a
    kept graph standing for the model, and its check of a written repro."""
    import torch
    from torch._inductor import config

    from .drawn import Counts, Drawn, load_eager, wait_for_eager
    from .predicate import Judge
    from .stage import KEEP_BACKEND, keeps_custom_backend

    sys.path[:0] = [p for p in json.loads((work / SYS_PATH).read_text()) if p not in sys.path]
    request = pickle.loads((work / REQUEST).read_bytes())
    prepare(request, None)
    device = torch.device(request.device.name)
    counts = Counts()
    keep = {f"test_configs.{KEEP_BACKEND}": True} if keeps_custom_backend() else {}
    with diagnosis_environment(work, request.device.type), config.patch(keep):
        wait_for_eager(work)
        drawn, eager = Drawn.load(work, request.build, device), load_eager(work, device)
        settle_heap()
        judge = Judge(request, drawn, eager, counts, before_inductor=pool_waiter(None), vouched=work / VOUCHED)

        def check(question: Any) -> bool | None:
            patches = request.selection.compile_options if options_as_patches(question.backend) else None
            tried = judge.asked(patches)
            return None if tried.outcome == "error" else tried.outcome == request.outcome

        yield check, counts, judge.holds_graph, lambda path: repro_step.check_saved(request, path, device)


def preload() -> None:
    """Import torch, Dynamo, Inductor and the modules a helper runs, before the helpers are forked (nothing here
    starts a thread or reads the request; on a 2-core CPU a helper importing them took 7-9 s). Inductor's import
    asks ``torch.cuda.is_available()``: through the CUDA runtime that initialises the driver, after which no
    helper may be forked (torch 2.11 on an H100); asked through NVML, as here, it does not."""
    from ..environ import variable_set

    with variable_set(NVML_CHECK, "1"):
        import torch._dynamo
        import torch._inductor.compile_fx  # noqa: F401

        from ..check import runner  # noqa: F401
        from ..compile import compiled, isolation  # noqa: F401
        from . import drawn, predicate, repro_step, stage  # noqa: F401


def run(work: Path, ahead: bool = False) -> None:
    from .drawn import Counts
    from .forked import can_fork
    from .helpers import Helpers
    from .request import DiagnosisRequest

    log = StepLog(work / LOG)
    counts = Counts()
    count = int((work / HELPERS).read_text())
    helpers, forked = None, False
    if count > 0:  # what every process of the diagnosis imports, imported once: the helpers are forked from here
        preload()
        forked = can_fork()
        helpers = Helpers(work, count, log, counts, fork=forked)
    try:
        request: DiagnosisRequest = pickle.loads((work / REQUEST).read_bytes())
        selection = request.selection
        settings = dict(selection.effective_settings)
        log.write(
            "start", name=request.name, outcome=request.outcome, selection=selection.label, settings=settings,
            pid=os.getpid(), helpers=count, forked=forked, ahead=ahead,
        )  # fmt: skip
        seconds = prepare(request, log)  # the start's first part
        import torch

        log.write("prepared", threads=torch.get_num_threads(), **seconds)
        if (why := backend_problem(selection.backend, request.conftests)) is not None:
            log.write("cannot", why=why)
        else:
            with diagnosis_environment(work, request.device.type):
                log.write("environment")  # torch and Inductor imported, the cache set, the compile pool started
                diagnose_here(request, work, log, counts, helpers)
    finally:
        if helpers is not None:
            helpers.close()
    log.write("done")


def diagnose_here(request: Any, work: Path, log: StepLog, counts: Any, helpers: Any) -> None:
    """The diagnosis's steps, in its environment; ``helpers`` (or None) answer the bisector's checks."""
    import torch

    from ..check.result import CheckResult
    from ..timing import host_lock
    from . import localise, numerics, setting, stage
    from .bisect import Answers, skips
    from .capture import capture, graph_facts
    from .drawn import Drawn, save_eager
    from .predicate import Judge, eager_side, with_settings
    from .questions import Question, stages_before_inductor

    selection = request.selection
    settings = dict(selection.effective_settings)
    device = torch.device(request.device.name)
    torch.zeros(1, device=device)  # the device's context made here, so that the step log tells it from the draw
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    log.write("device")
    with host_lock.work():  # the one draw, and eager's half of the check computed once
        drawn = Drawn.draw(request.build, device, counts)
        log.write("drawn")
        eager = eager_side(request, drawn, counts)
    log_counts(log, counts)
    if isinstance(eager, CheckResult):
        log.write("reproduce", outcome=eager.outcome.value, reason=eager.reason[:500], failing=False, seconds=0)
        return
    drawn.save(work)
    save_eager(eager, work)
    log.write("saved", frozen=settle_heap())  # for the helpers; the set-up out of the collector's reach
    pool = pool_waiter(log)
    judge = Judge(request, drawn, eager, counts, before_inductor=pool, vouched=work / VOUCHED)

    def logged(tried: Any) -> bool | None:
        """Whether the check's variant still fails as the item did; None when it could not even be built or run."""
        graph = {"graph": True} if tried.graph else {}
        log.write(
            "check",
            outcome=tried.outcome,
            reason=tried.reason[:300],
            seconds=tried.seconds,
            backend_calls=tried.backend_calls,
            **graph,
        )
        log_counts(log, counts)
        return None if tried.outcome == "error" else tried.outcome == request.outcome

    def fails(**variant: Any) -> bool | None:
        return logged(judge.attempt(**variant))

    if request.reason is not None:  # the item's own check: no compile to repeat it
        log.write("reproduce", outcome=request.outcome, reason=request.reason[:500], failing=True, reused=True)
    else:
        first = judge.attempt()
        log.write(
            "reproduce",
            outcome=first.outcome,
            reason=first.reason[:500],
            seconds=first.seconds,
            failing=first.outcome == request.outcome,
            item_cache=request.item_cache,
        )
        if first.outcome != request.outcome:
            return
    # the inductor stage fails: the item's own check said so, or the reproduce step did
    reproduced = request.reason if request.reason is not None else first.reason
    failing_figures = request.item_float64_rmse if request.reason is not None else first.float64_rmse
    graphs: list[Any] = []
    if helpers is not None:  # they check the stages before Inductor's while this process captures the graphs (not
        # beside a reproduce step: a helper's model on the GPU beside it could make it fail otherwise than the item)
        helpers.offer(stages_before_inductor())
    serving = helpers.serving() if helpers is not None else contextlib.nullcontext()
    with _step(log, "capture", counts), host_lock.work(), serving:
        graphs = capture(request, selection, drawn)
        log.write("capture", graphs=len(graphs), aten=sum(g.aten is not None for g in graphs))
    found: stage.StageResult | None = None
    spare = None
    with _step(log, "stage", counts):
        temp = tempfile.mkdtemp(prefix="stage-", dir=work)
        cudagraphs = selection.cudagraphs and request.device.type == "cuda"
        skipped = skips(cudagraphs, request.device.type, graph_facts(graphs))
        answers = Answers(
            lambda: logged(judge.asked(selection.compile_options if options_as_patches(Question.now().backend)
                                       else None)),
            log, skipped, reproduced, helpers, counts, holds_graph=judge.holds_graph,
        )  # fmt: skip
        found = stage.find_stage(answers, log, temp)
        judge.inner = judge.agreed = None  # the kept graphs (their inputs in host memory) serve no later step
        if helpers is not None:  # what they still run is no longer asked; one idle helper checks the repro
            spare = helpers.keep_one_idle()
        if found.backend == "inductor" and not found.subsystem and selection.backend != "inductor":
            log.write(
                "stage",
                **{k: v for k, v in vars(found).items()},
                kept_backend=True,
                describe=f"the backend {selection.backend} (at the inductor stage: none of Inductor's "
                "subsystems fixes it)",
            )
    pool()  # the steps after the stage compile with Inductor (the operator step outside the judge)
    checking = repro_step.hand_over(request, graphs, found, work, spare)  # checked there while this process goes on
    with _step(log, "setting", counts):
        text = setting.smallest_failing(settings, lambda s: bool(fails(selection=with_settings(selection, s))), log)
        log.write("setting", setting=text)
    if found is not None and found.backend == "eager":  # Dynamo or the model's Python: no graph to read
        graphs = []
    patches = {**(selection.compile_options or {}), **selection.config_patches}
    finding = None
    if request.outcome == "accuracy_fail":
        with _step(log, "operator", counts):
            named = found.debug_info if found and found.subsystem == "lowerings" else None
            if found and found.subsystem == "decomposition" and found.debug_info:
                op = found.debug_info.rsplit(".", 1)[0]  # aten.hardswish; its aten graph holds what it became
                log.write("operator", op=f"{op} (decomposed)", node=None, by_bisector=True)
                graphs_to_search: list[Any] | None = None
            elif found and found.backend == "inductor" and selection.backend != "inductor":
                what = f"{localise.NOT_LOCALISED} (the step compiles with Inductor, not {selection.backend})"
                log.write("operator", op=what, node=None, by_bisector=False)
                graphs_to_search = None
            else:
                graphs_to_search = [g for g in graphs if g.aten is not None]
                holding = [g for g in graphs_to_search if named is not None and localise.holds(g.aten, named)]
                if holding:  # the graphs that hold the bisector's node: that node alone is read
                    graphs_to_search = holding
                else:  # a name none of them holds: every intermediate of each
                    named = None
            for entry in graphs_to_search or []:
                with host_lock.work():
                    finding = localise.first_divergence(entry, patches, request.tolerance, named)
                counts.compiles += 1
                counts.eager_runs += 2  # the graph run node by node, as it is and in float64
                if finding is not None:
                    break
            if graphs_to_search is not None:
                log.write(
                    "operator",
                    op=finding.describe() if finding else localise.NOT_LOCALISED,
                    node=finding.name if finding else None,
                    by_bisector=named is not None,
                    compiled_rmse=finding.compiled_rmse if finding else None,
                    eager_rmse=finding.eager_rmse if finding else None,
                )
        with _step(log, "kind", counts):
            dtypes = numerics.floating_dtypes(drawn)
            fixed = None
            if dtypes & set(numerics.LOW_PRECISION):
                still = fails(patches={"emulate_precision_casts": True})
                fixed = None if still is None else not still
            if finding is not None and finding.compiled_rmse is not None and finding.eager_rmse is not None:
                distances = numerics.Distances(finding.compiled_rmse, finding.eager_rmse, f"at {finding.describe()}")
            elif failing_figures:  # the failing check's own figures at its outputs: no compile
                distances = numerics.at_failing_outputs(failing_figures)
            else:
                distances = numerics.output_distances(request, selection, drawn, eager, counts)
            kind = numerics.kind_of(distances, fixed)
            figures = distances.describe() if distances else None
            if fixed is not None:
                figures = "; ".join(
                    filter(None, [figures, "emulate_precision_casts " + ("fixes it" if fixed else "does not fix it")])
                )
            log.write("kind", kind=kind, figures=figures, dtypes=sorted(dtypes))
    with _step(log, "repro", counts):
        first = checking.answer() if checking is not None else None
        repro_step.finish(request, graphs, found, log, work, counts, first)


def main(work: str, ahead: bool = False) -> None:
    """Entry point: ``work`` holds the request and receives the step log; ``ahead``: this process was started before
    the request (``standby``), its imports done. The child is a session of its own (the budget ends it whole), so it
    ends its group itself when the process that started it is killed outright, which would otherwise leave it and its
    helpers diagnosing on the GPU for the rest of its budget."""
    from ..parent_watch import end_group, end_with_parent, started_by

    end_with_parent(started_by(), end_group)
    directory = Path(work)
    sys.path[:0] = [p for p in json.loads((directory / SYS_PATH).read_text()) if p not in sys.path]
    start = time.monotonic()
    try:
        run(directory, ahead)
    except BaseException as error:
        StepLog(directory / LOG).write(
            "crash",
            error=f"{type(error).__name__}: {error}".splitlines()[0],
            traceback=traceback.format_exc()[-2000:],
            seconds=time.monotonic() - start,
        )
        raise
