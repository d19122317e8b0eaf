"""The cell engine: check one (subject, case) against eager, judge its template's effect, then, when a timing plan
is given and the check left something to time, time it (paired with eager when it passed).

Plain data in, plain data out: no pytest and no record here. The user fixtures, the sample items in the pytest
process and the sample worker all call ``run_cell``; the check, the effect verdict and the timing are called from
here alone.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .. import phases
from ..check.inputs import Inputs
from ..check.result import CheckResult
from ..check.runner import CheckSubject, run_check
from ..compile.compiled import CompiledModel, CompileStats, EagerModel, no_grad_call
from ..compile.effects import Effect, default_code_of, effects_of, overall_effect
from ..compile.isolation import CompileWatcher
from ..compile.precision import tf32_scope
from ..machine import Device, device_scope
from ..option_table import LOADS_COMPILE_SECONDS
from ..outcomes import ENDED_EARLY, UNTIMEABLE, Outcome
from ..templates.selection import Selection
from ..timing import host_lock
from ..timing.measure import Timing, TimingPlan, measure
from ..timing.memory_peak import PeakMemory, peak_memory
from ..timing.processes import Repeat
from ..tolerance import Tolerance

NOT_TIMED = UNTIMEABLE | ENDED_EARLY | {Outcome.SKIPPED}  # nothing ran to time, or eager has no reproducible answer


def plain_call(model: Any, inputs: Inputs) -> Any:
    """A call as a user test makes it."""
    return model(*inputs.args, **inputs.kwargs)


@dataclass
class Subject:
    """What one cell runs: a maker of fresh eager models, the model under test (not yet called), its inputs (the
    first call's, then later calls'), the column and device, and how the check and the timing call a model."""

    make_eager: Callable[[], Any]
    model: CompiledModel | EagerModel
    inputs: list[Inputs]
    selection: Selection
    device: Device
    watcher: CompileWatcher | None = None
    tolerance: Tolerance | None = None
    check_call: Callable[[Any, Inputs], Any] = plain_call  # the check's calls (a sample's announce their phase)
    timed_call: Callable[[Any, Inputs], Any] = plain_call  # the timed calls: nothing but the call
    # the model under test compiled anew, as a fresh process would (a sample's: timing's later loads); None: no loads
    reload: Callable[[], CompiledModel | EagerModel] | None = None


@dataclass(frozen=True)
class CheckPolicy:
    """The session's rules for every cell: fail a passing item whose template had no effect; ask the float64 second
    opinion of an output beyond its tolerance; the TF32 mode the whole cell runs in (None: torch's flags as they
    are); compile each triple or user test with a fresh compile cache (``--inductor-fresh-cache``)."""

    require_effect: bool = False
    second_opinion: bool = True
    tf32: str | None = None
    fresh_cache: bool = False


@dataclass
class Verdict:
    """A check's result and, for a compiled model that ran, whether its template took effect."""

    result: CheckResult
    effects: list[Effect] = field(default_factory=list)
    no_effect: str | None = None  # why the template had no effect, when it had none
    compile_cache: str | None = None  # where the checked code came from (``compile.cache`` state), for a diagnosis

    @property
    def effect(self) -> str | None:
        """``effect``, ``no effect`` or ``not observed`` over every aspect; None when nothing was judged."""
        return overall_effect(self.effects) if self.effects else None


@dataclass(frozen=True)
class Footprint:
    """The process that built a triple, and its memory just before (flat over a run when nothing leaks)."""

    pid: int
    rss_mib: float | None
    cuda_mib: float | None


@dataclass
class CellResult:
    """A cell's verdict, its compile figures (None for the eager row or a model never built), its timing (None
    when not timed), eager's and compiled's peak CUDA memory (None but for a compiled bench item that passed and
    was timed on CUDA), and for a sample the process that ran it."""

    verdict: Verdict
    stats: CompileStats | None = None
    timing: Timing | None = None
    peak: PeakMemory | None = None
    footprint: Footprint | None = None
    tf32: str | None = None  # the TF32 mode it ran in (--inductor-tf32), None where torch's flags were left alone
    ended: bool = False  # the process running it was lost (crashed, timed out) during this request
    unbuilt: bool = False  # the sample could not be built: every cell of it fails alike

    @property
    def outcome(self) -> Outcome:
        return self.verdict.result.outcome


def check(subject: Subject, policy: CheckPolicy) -> Verdict:
    """Run the check; for a model that compiled and ran, judge each aspect of its template; with
    ``policy.require_effect``, a passing item whose template had no effect becomes ``no_effect``."""
    checked = CheckSubject(
        subject.make_eager, subject.model, subject.inputs, subject.tolerance, subject.selection.backend,
        second_opinion=policy.second_opinion, call=subject.check_call,
    )  # fmt: skip
    result = run_check(checked)
    if result.outcome not in (Outcome.PASS, Outcome.ACCURACY_FAIL):
        return Verdict(result)
    first = subject.inputs[0]
    call_first: Callable[[Any], Any] = lambda model: subject.check_call(model, first)  # noqa: E731
    selection = subject.selection
    default_code = default_code_of(selection, subject.make_eager, call_first, subject.watcher)
    effects = effects_of(subject.model, selection, subject.device, default_code, lambda: call_first(subject.model))
    if overall_effect(effects) != "no effect":
        return Verdict(result, effects)
    why = f"template {selection.label!r} had no effect: " + "; ".join(str(e) for e in effects if e.took_effect is False)
    if policy.require_effect and result.outcome is Outcome.PASS:
        result = replace(result, outcome=Outcome.NO_EFFECT, reason=why, details=why)
    return Verdict(result, effects, why)


def compile_for_timing(subject: Subject) -> Verdict:
    """A timing repeat's stand-in for the check (the item's own process checked the same compiled code): the
    compiled model called on each input set in the check's order, which compiles it as the check did (from the
    compile cache the item's process filled: a sample of several shapes ends on the same dynamic graph, which the
    timed calls then run); a call that raises ends the repeat untimed, with the reason."""
    with host_lock.work():
        for number, inputs in enumerate(subject.inputs, 1):
            try:
                subject.check_call(subject.model, inputs)
            except Exception as error:  # the repeat is left out, its reason printed by the caller
                reason = f"its call {number} raised {type(error).__name__}: {error}".splitlines()[0]
                return Verdict(CheckResult(Outcome.RUNTIME_FAIL, reason, error=error))
    return Verdict(CheckResult(Outcome.PASS, "a timing repeat: compiled, not checked"))


def time_subject(subject: Subject, plan: TimingPlan, eager: Any | None) -> Timing:
    """Time the model under test (compiled by the check: its steady state, without per-call scaffolding); in pairs
    with ``eager`` where given (a fresh eager model, made within the caller's work), called as the compiled one is."""
    phases.enter(phases.TIMING)
    inputs, steady = subject.inputs[0], subject.model.steady()
    eager_run = None
    if eager is not None:
        eager_call = no_grad_call(eager) if subject.selection.inference_only else eager
        eager_run = lambda: subject.timed_call(eager_call, inputs)  # noqa: E731
    run = lambda: subject.timed_call(steady, inputs)  # noqa: E731
    return measure(run, eager_run, subject.device.type == "cuda", plan)


def eager_to_pair(subject: Subject, verdict: Verdict, plan: TimingPlan | None) -> Any | None:
    """A fresh eager model for a compiled subject's paired timing, where a ``plan`` times it and its check passed
    (None otherwise): made by the caller within the work that compiled or checked it, so that each timing waits for
    one work hold of its process, not one more for the eager model (each hold's start waits for every timing asked
    meanwhile)."""
    if plan is None or not subject.selection.compiles or verdict.result.outcome is not Outcome.PASS:
        return None
    return subject.make_eager()


def time_loads(subject: Subject, plan: TimingPlan) -> tuple[Repeat, ...]:
    """The paired timings of the plan's later loads: each the model under test compiled anew (``Subject.reload``),
    called as the check called it (which compiles it from the compile cache), then timed in pairs with a fresh eager
    model. A later load starts only while the loads so far (and the check's compile, where the cache could not keep
    its graph: a frozen one compiles in full each time) spent under ``LOADS_COMPILE_SECONDS`` compiling. A load that
    raised ends the loads there, its reason on stderr; the timings before it are kept."""
    assert subject.reload is not None
    own = subject.model.stats
    compiling = own.compile_seconds if own.cache_lookups.get("fxgraph_cache_bypass") else 0.0
    loads: list[Repeat] = []
    for load in range(1, plan.loads):
        if compiling >= LOADS_COMPILE_SECONDS:
            sys.stderr.write(
                f"inductor-templates: {load} of {plan.loads} loads timed: compiles took {compiling:.1f} s\n"
            )
            break
        timed, seconds, why = _one_load(subject, plan, load)
        compiling += seconds
        if timed is None:
            sys.stderr.write(f"inductor-templates: load {load + 1} not timed: {why}\n")
            break
        loads.append(timed)
    return tuple(loads)


def _one_load(subject: Subject, plan: TimingPlan, load: int) -> tuple[Repeat | None, float, str | None]:
    """One later load, compiled and timed: its paired timing (None where it raised), its compile's seconds, and why
    it was not timed. Its models are gone when it returns."""
    assert subject.reload is not None
    compiled = None
    try:
        with host_lock.work():  # one hold: the copy, its compile and the eager model to pair it with
            compiled = subject.reload()
            loaded = replace(subject, model=compiled)
            verdict = compile_for_timing(loaded)
            if verdict.result.outcome is not Outcome.PASS:
                return None, compiled.stats.compile_seconds, verdict.result.reason
            eager = eager_to_pair(loaded, verdict, plan)
        paired = time_subject(loaded, plan, eager).paired
        assert paired is not None  # a paired plan with rounds
        return Repeat(paired, os.getpid(), load), compiled.stats.compile_seconds, None
    except Exception as error:  # a copy, a compile or a timing that failed (out of memory): the loads end here
        seconds = compiled.stats.compile_seconds if compiled is not None else 0.0
        return None, seconds, f"{type(error).__name__}: {error}".splitlines()[0]


def peak_of(subject: Subject) -> PeakMemory | None:
    """Eager's and the compiled model's peak CUDA memory of a steady call, called as timing calls them, with the same
    memory resident: eager is the compiled model's own module called uncompiled (no second copy of the weights).
    None off CUDA."""
    if subject.device.type != "cuda":
        return None
    phases.enter(phases.PEAK_MEMORY)
    inputs, steady, target = subject.inputs[0], subject.model.steady(), subject.model.target
    eager = no_grad_call(target) if subject.selection.inference_only else target
    eager_run = lambda: subject.timed_call(eager, inputs)  # noqa: E731
    with host_lock.timing(subject.device.type):  # its calls take the GPU: no other worker times on it meanwhile
        start = time.perf_counter()
        peak = peak_memory(eager_run, lambda: subject.timed_call(steady, inputs), subject.device)
        return replace(peak, seconds=round(time.perf_counter() - start, 3)) if peak is not None else None


def run_cell(
    subject: Subject,
    policy: CheckPolicy,
    plan: TimingPlan | None = None,
    verdict: Verdict | None = None,
    repeat: bool = False,
) -> CellResult:
    """Check ``subject`` (unless ``verdict`` is its verdict already), then, with a ``plan``, time it when the check
    left something to time: paired with eager when it passed and compiles, and then, on CUDA, with both peaks of
    memory measured, then timed again in the plan's later loads (where the subject can be reloaded). A ``repeat`` of
    another process's timing is compiled instead of checked, and its peaks are not measured; under the policy's fresh
    cache a repeat compiles its own code, and so checks it. All of it in the policy's TF32 mode; the check is work
    and the timing a timing, kept apart from the other processes of the session (``host_lock``)."""
    with device_scope(subject.device), tf32_scope(policy.tf32):
        eager = None  # the paired timing's eager model, made in the work before it (one hold, one wait)
        if verdict is None or plan is not None:
            with host_lock.work():
                if repeat and not policy.fresh_cache:
                    verdict = compile_for_timing(subject)
                elif verdict is None:
                    verdict = check(subject, policy)
                    if subject.selection.compiles and not policy.fresh_cache:  # a fresh cache serves nothing stale
                        verdict.compile_cache = subject.model.stats.cache_state
                eager = eager_to_pair(subject, verdict, plan)
        stats = subject.model.stats if subject.selection.compiles else None
        timing: Timing | None = None
        peak: PeakMemory | None = None
        if plan is not None and verdict.result.outcome not in NOT_TIMED:
            timing = time_subject(subject, plan, eager)
            eager = None  # freed: the peaks below see the compiled model's memory alone
            if timing.paired is not None and not repeat:
                peak = peak_of(subject)
            if timing.paired is not None and plan.loads > 1 and subject.reload is not None:
                timing.repeats = time_loads(subject, plan)
    return CellResult(verdict, stats, timing, peak=peak, tf32=policy.tf32)
