""" "Does it still fail": build a fresh eager model, compile it as the plugin does, and run the plugin's check."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..check.inputs import Inputs
from ..compile.failures import first_line
from ..compile.phase_times import own_part
from ..templates.registry import Template
from ..templates.selection import Selection
from .cancel import cancellable
from .request import DiagnosisRequest


@dataclass
class Attempt:
    """One check's outcome under some variant of the item's compile settings."""

    outcome: str  # an Outcome value, or "error" when building or checking raised outside the check
    reason: str
    seconds: float
    backend_calls: int = 0  # graphs the plugin's own backend compiled (0: torch.compile used another backend)
    notes: list[str] = field(default_factory=list)
    graph: bool = False  # compiled from Inductor's kept graph alone (``inner_graph``), not the whole model
    float64_rmse: dict[str, tuple[float, float]] = field(default_factory=dict)  # ``CheckResult.float64_rmse``


def call_of(request: DiagnosisRequest) -> Any:
    """How the item calls its models: under ``no_grad`` for samples, as they are for ``inductor_check``."""

    def call(model: Any, inputs: Inputs) -> Any:
        import torch

        with torch.no_grad() if request.no_grad else contextlib.nullcontext():
            return model(*inputs.args, **inputs.kwargs)

    return call


def with_settings(selection: Selection, settings: dict[str, Any]) -> Selection:
    """``selection`` with its Inductor settings replaced by ``settings`` (how each is applied kept)."""
    if selection.template is not None and selection.options is None and selection.mode is None:
        template = selection.template
        reduced = Template(
            template.name,
            template.description,
            settings,
            template.scoped & set(settings),
            template.requires,
            template.origin,
            template.compiles,
        )
        return replace(selection, template=reduced)
    return replace(selection, template=None, mode=None, mode_options={}, options=dict(settings))


@contextlib.contextmanager
def scoped_config(patches: dict[str, Any] | None) -> Iterator[None]:
    """``torch._inductor.config.patch(patches)`` for the block (nothing for no patches)."""
    if not patches:
        yield
        return
    from torch._inductor import config

    with config.patch(patches):
        yield


class Judge:
    """The item's check, as the item was judged (its tolerance, second opinion and calls), of fresh copies of the
    drawn model against eager's half computed once (``drawn``); each check holds the host's work lock."""

    def __init__(
        self,
        request: DiagnosisRequest,
        build: Any,
        eager: Any,
        counts: Any,
        before_inductor: Callable[[], None] = lambda: None,
        vouched: Path | None = None,
    ) -> None:
        self.request = request
        self.before_inductor = before_inductor  # called before each check that may lower with Inductor
        self.vouched = vouched  # the diagnosis's file of kept graphs that agreed with a failing check (any process's)
        self.build = build  # drawn.Drawn: copies of the one draw
        self.eager = eager  # check.runner.EagerSide, computed once
        self.counts = counts  # drawn.Counts of this process
        selection = request.selection
        self.graph_level = (  # whether Inductor's kept graph may still stand for the model in the lowering steps
            request.outcome == "accuracy_fail"
            and selection.backend == "inductor"
            and (request.no_grad or selection.inference_only)
            and not (selection.cudagraphs and request.device.type == "cuda")
        )
        self.inner: Any = None  # inner_graph.InnerGraph, kept by this process's first lowering check
        self.agreed: Any = None  # a kept graph that agreed with a passing check here, not yet with a failing one

    def asked(self, patches: dict[str, Any] | None) -> Attempt:
        """The check of the question the bisector asks in this process (its state set here): a step counting or
        bisecting the lowerings is compiled from the graph Inductor compiled in a model-level check in this process
        that keeps it (``inner_graph.keeps_the_graph``: of the lowerings, or the post-grad passes' switch, which
        give Inductor's ``compile_fx_inner`` the same graph) once that graph can stand for the model: its verdict
        on a failing check's outputs was that check's, and on a passing one's (where this process checked one) too;
        else the model. A graph that agreed with a passing check here stands for the model once the same graph
        (``inner_graph.fingerprint``) agreed with a failing check in another process of the diagnosis
        (``vouched``)."""
        from ..machine import device_scope
        from ..timing import host_lock
        from . import inner_graph
        from .questions import Question, reset_counters

        question = Question.now()
        if not inner_graph.keeps_the_graph(question):
            return self.attempt(patches=patches)
        self._take_up_vouched_graphs()
        if self.inner is not None and inner_graph.from_the_graph(question):
            tried = self._graph_attempt()
            if tried.outcome != "error":
                return tried
            self._model_from_now_on()  # the kept graph cannot compile here
            reset_counters()  # the failed compile counted applications
            return self.attempt(patches=patches)
        if not self.graph_level:
            return self.attempt(patches=patches)
        kept: list[Any] = []
        with inner_graph.keeping(kept):
            tried = self.attempt(patches=patches)
        if tried.outcome == "error":
            return tried
        failing = tried.outcome == self.request.outcome
        try:
            with host_lock.work(), device_scope(self.request.device), own_part("graph_eager"):  # as a check's runs
                graph = inner_graph.usable(kept, failing, self.request.repro_tolerance(), self.request.second_opinion)
        except Exception:  # the kept graph cannot run eagerly
            graph = None
        if graph is None:  # it cannot stand for the model: the model at every step, in every process
            self._model_from_now_on()
            if len(kept) == 1 and kept[0] is not None and kept[0].eager is not None:  # it ran, and disagreed
                inner_graph.vouch(kept[0], self.vouched, agreed=False)
        elif failing or inner_graph.vouched_for(graph, self.vouched):
            self.inner, self.agreed = graph, None
            if failing:
                inner_graph.vouch(graph, self.vouched, agreed=True)
        else:
            self.agreed = graph
        return tried

    def holds_graph(self) -> bool:
        """Whether this process holds a kept graph standing for the model (its lowering steps compile that graph,
        not the whole model), vouched-for graphs taken up first."""
        self._take_up_vouched_graphs()
        return self.inner is not None

    def _take_up_vouched_graphs(self) -> None:
        """What the diagnosis's other processes found about this process's kept graphs: a graph that agreed with a
        passing check here stands for the model once the same graph agreed with a failing check elsewhere; one
        that disagreed with a check elsewhere stands for it nowhere."""
        from . import inner_graph

        if self.inner is not None and inner_graph.withdrawn(self.inner, self.vouched):
            self._model_from_now_on()
        elif self.graph_level and self.inner is None and self.agreed is not None:
            if inner_graph.vouched_for(self.agreed, self.vouched):
                self.inner, self.agreed = self.agreed, None

    def _model_from_now_on(self) -> None:
        """No kept graph stands for the model in this process any more: every later step checks the model."""
        self.graph_level, self.inner, self.agreed = False, None, None

    def _graph_attempt(self) -> Attempt:
        """The kept graph compiled again alone under the bisector's state here, judged by the repro's rule."""
        from ..machine import device_scope
        from ..timing import host_lock
        from . import inner_graph

        start = time.perf_counter()
        try:
            self.before_inductor()
            with host_lock.work(), device_scope(self.request.device), cancellable():
                failing = inner_graph.fails(self.inner, self.request.repro_tolerance())
        except Exception as error:
            return Attempt("error", f"the kept graph's compile raised {first_line(error)}", 0.0, graph=True)
        self.counts.checks += 1
        self.counts.compiles += 1
        self.counts.graph_checks += 1
        outcome = self.request.outcome if failing else "pass"
        reason = "the kept graph compiled alone " + ("still fails" if failing else "passes")
        return Attempt(outcome, reason, round(time.perf_counter() - start, 2), graph=True)

    def attempt(self, selection: Selection | None = None, patches: dict[str, Any] | None = None) -> Attempt:
        """The check of a fresh copy compiled with ``selection`` (the item's by default) under extra config
        ``patches``. Never raises an Exception: a build or a check that raises is outcome ``error``."""
        import torch

        from ..check.result import CheckResult
        from ..check.runner import CheckSubject, judge, observe_model
        from ..compile.compiled import CompiledModel
        from ..compile.isolation import isolated_compile_state
        from ..machine import device_scope
        from ..timing import host_lock
        from .drawn import for_one_check

        request = self.request
        selection = selection or request.selection
        device = torch.device(request.device.name)
        start = time.perf_counter()
        compiled = None
        self.counts.checks += 1
        try:
            if lowers_with_inductor():
                self.before_inductor()
            with (
                host_lock.work(),
                device_scope(request.device),
                scoped_config(patches),
                isolated_compile_state() as watcher,
                cancellable(),  # a helper stopped inside: the states above are restored as it leaves
            ):
                with own_part("build"):
                    compiled = CompiledModel(self.build.make_model(device), selection, watcher)
                subject = CheckSubject(
                    make_eager=lambda: self.build.make_model(device),
                    model=compiled,
                    inputs=[],
                    tolerance=request.tolerance,
                    backend=selection.backend,
                    second_opinion=request.second_opinion,
                    call=call_of(request),
                )
                with own_part("calls"):
                    observed = observe_model(subject, for_one_check(self.eager))
                    if device.type == "cuda" and not isinstance(observed, CheckResult):
                        torch.cuda.synchronize(device)  # the calls' GPU work is theirs, not the comparison's
                self.counts.compiles += 1
                with own_part("compare"):
                    result = (
                        observed
                        if isinstance(observed, CheckResult)
                        else judge(observed, request.tolerance, request.second_opinion)
                    )
            outcome, reason, figures = result.outcome.value, result.reason, result.float64_rmse
        except Exception as error:
            outcome, reason, figures = "error", f"building or checking raised {first_line(error)}", {}
        calls = compiled.stats.graphs if compiled is not None else 0
        return Attempt(outcome, reason, round(time.perf_counter() - start, 2), calls, float64_rmse=figures)


def lowers_with_inductor() -> bool:
    """Whether a compile now may lower with Inductor: every compile but one at a bisector stage before Inductor's
    (``eager``, ``aot_eager``, ...: torch compiles with that backend there, whatever the item's)."""
    from torch._inductor.compiler_bisector import CompilerBisector

    return CompilerBisector.get_backend() in (None, "inductor")


def counted(call: Any, counts: Any) -> Any:
    """``call``, counting the calls of eager models in ``counts``."""
    from ..compile.compiled import CompiledModel

    def call_counted(model: Any, inputs: Inputs) -> Any:
        if not isinstance(model, CompiledModel):
            counts.eager_runs += 1
        return call(model, inputs)

    return call_counted


def eager_side(request: DiagnosisRequest, build: Any, counts: Any) -> Any:
    """Eager's half of the item's check (``check.runner.EagerSide``, its float64 runs done), computed once; or the
    ``CheckResult`` of an eager side that cannot run."""
    import torch

    from ..check.result import CheckResult
    from ..check.runner import CheckSubject, observe_eager
    from ..machine import device_scope
    from .drawn import settled

    device = torch.device(request.device.name)
    with device_scope(request.device):
        subject = CheckSubject(
            make_eager=lambda: build.make_model(device),
            model=None,
            inputs=build.make_inputs(device),
            tolerance=request.tolerance,
            backend=request.selection.backend,
            second_opinion=request.second_opinion,
            call=counted(call_of(request), counts),
        )
        side = observe_eager(subject)
        if isinstance(side, CheckResult):
            return side
        side.float64 = settled(side.float64) if request.second_opinion else side.float64
        side.tf32 = settled(side.tf32)
    return side
