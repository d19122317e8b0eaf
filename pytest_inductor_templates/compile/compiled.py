"""The compiled-model wrapper: compile once with the selection, clone CUDA-graph outputs, keep stats."""

from __future__ import annotations

import contextlib
import unittest.mock
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import phases
from ..templates.selection import Selection
from ..timing import host_lock
from . import cache
from .evidence import CompileEvidence, gather
from .isolation import CompileWatcher
from .outputs import map_tensors


@dataclass
class CompileStats:
    """What compiling one model cost and produced (complete after the first call)."""

    compile_seconds: float = 0.0  # first call (trace + compile + run) + backend time of later compiles
    graphs: int = 0
    graph_breaks: int = 0
    graph_break_reasons: list[str] = field(default_factory=list)
    recompiles: int = 0
    cudagraph_skips: int = 0
    cudagraph_skip_reasons: list[str] = field(default_factory=list)
    cache_lookups: dict[str, int] = field(default_factory=dict)  # FX graph and AOTAutograd cache lookups, by counter
    compile_failure: BaseException | None = None  # what the backend raised, if it failed

    @property
    def cache_state(self) -> str | None:
        """``cold``, ``warm`` or ``mixed``: the compile caches' state over the backend's compiles; None when it
        consulted none."""
        return cache.state(self.cache_lookups)

    def summary(self) -> str:
        text = (
            f"compiled in {self.compile_seconds:.2f}s: {self.graphs} graph(s), "
            f"{self.graph_breaks} graph break(s), {self.recompiles} recompile(s)"
        )
        if self.cudagraph_skips:
            text += f", CUDA graphs skipped {self.cudagraph_skips}x ({'; '.join(self.cudagraph_skip_reasons)})"
        return text


def _cudagraph_skip_count() -> int:
    from torch._dynamo.utils import counters

    return counters["inductor"]["cudagraph_skips"]


class _SkipTracker:
    """Counts CUDA-graph skips over a span, with Inductor's logged reasons; nested spans count once."""

    def __init__(self, stats: CompileStats, watcher: CompileWatcher) -> None:
        self.stats = stats
        self.watcher = watcher
        self._open = False

    @contextlib.contextmanager
    def span(self, unlogged_reason: Callable[[], str]) -> Iterator[None]:
        if self._open:
            yield
            return
        count, logged = _cudagraph_skip_count(), len(self.watcher.cudagraph_skips)
        self._open = True
        try:
            yield
        finally:
            self._open = False
        new = _cudagraph_skip_count() - count
        if new > 0:
            reasons = self.watcher.cudagraph_skips[logged:][:new]
            self.stats.cudagraph_skips += new
            self.stats.cudagraph_skip_reasons += reasons + [unlogged_reason()] * (new - len(reasons))


def _inner_backend(selection: Selection) -> Any:
    import torch

    if selection.backend == "inductor":
        return torch._TorchCompileInductorWrapper(selection.mode, selection.compile_options, selection.dynamic)
    return torch._TorchCompileWrapper(selection.backend, selection.mode, selection.compile_options, selection.dynamic)


class RecordingBackend:
    """A torch.compile backend that runs the selected one and records every graph it compiles."""

    def __init__(self, selection: Selection, stats: CompileStats, skips: _SkipTracker) -> None:
        self.selection = selection
        self.inner = _inner_backend(selection)
        self.compiler_name = self.__name__ = getattr(self.inner, "compiler_name", selection.backend)
        self.stats = stats
        self.skips = skips
        self.backend_seconds = 0.0
        self.evidence = CompileEvidence()
        self.steady = False  # set once the model is timed: compiling then would lack the scoped settings

    def __call__(self, graph_module: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
        from torch._dynamo.exc import RestartAnalysis
        from torch._guards import CompileContext

        if self.steady:
            raise RecompiledWhileTimed(
                "the model recompiled while being timed (a guard failed on the timed inputs); "
                "its steady state was not reached in warm-up"
            )
        compile_id = CompileContext.current_compile_id()
        reason = getattr(graph_module, "compile_subgraph_reason", None)
        self.stats.graphs += 1
        if compile_id is not None and compile_id.frame_compile_id:
            self.stats.recompiles += 1
        if reason is not None and reason.graph_break:
            self.stats.graph_breaks += 1
            self.stats.graph_break_reasons.append(reason.reason.strip().splitlines()[0])
        phases.enter(phases.COMPILING)
        try:
            with host_lock.work():
                clock = host_lock.Stopwatch()  # after any wait for another worker's timing
                skips = self.skips.span(lambda: _unlogged_skip_reason(example_inputs))
                with beside_timings(self.selection), skips, gather(self.evidence), torch_deprecations_quiet():
                    compiled = self.inner(graph_module, example_inputs, **kwargs)
                self.backend_seconds += clock.seconds()
        except RestartAnalysis:  # Dynamo's signal to trace the frame again, not a failure
            raise
        except Exception as error:
            self.stats.compile_failure = error
            raise
        phases.enter(phases.COMPILED_CALL)
        return compiled

    def reset(self) -> None:
        if hasattr(self.inner, "reset"):
            self.inner.reset()

    def get_compiler_config(self) -> Any:
        getter = getattr(self.inner, "get_compiler_config", None)
        return getter() if getter else None


# Inductor settings under which a compile runs code on the GPU: autotuning (GEMM choices and their epilogues, fusions,
# kernels' configs), freezing (constants folded on the device), the C++ wrapper (it autotunes while it compiles)
GPU_AT_COMPILE = (
    "max_autotune", "max_autotune_gemm", "max_autotune_pointwise", "coordinate_descent_tuning", "benchmark_fusion",
    "benchmark_kernel", "freezing", "cpp_wrapper", "triton.autotune_at_compile_time",
)  # fmt: skip


def compiles_off_the_gpu(selection: Selection) -> bool:
    """Whether Inductor compiles for ``selection`` without running anything on the GPU (so that the compile may go
    on beside a timing; its benchmarker aside, which ``beside_timings`` watches): its own backend, none of
    ``GPU_AT_COMPILE`` on, in the selection's settings or in the Inductor config in force. A user's backend may do
    anything: never off the GPU."""
    from torch._inductor import config

    if selection.backend != "inductor":
        return False
    chosen = selection.effective_settings

    def on(key: str) -> bool:
        if key in chosen:
            return bool(chosen[key])
        value: Any = config
        for part in key.split("."):
            value = getattr(value, part, None)
        return bool(value)

    return not any(on(key) for key in GPU_AT_COMPILE)


@contextlib.contextmanager
def beside_timings(selection: Selection) -> Iterator[None]:
    """Around a compile: one that leaves the GPU alone (``compiles_off_the_gpu``) goes on beside the other
    processes' timings, where the session splits the host's CPUs (``host_lock.beside_timings``); should Inductor
    time code on the GPU after all (its benchmarker: padding a matmul's shapes, ``shape_padding``, times both), the
    compile first joins the work group again."""
    from torch._inductor.runtime import benchmarking

    if not host_lock.splits_host() or not compiles_off_the_gpu(selection):
        yield
        return
    timer = benchmarking.benchmarker

    def joining_work(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            with host_lock.work():
                return method(*args, **kwargs)

        return call

    names = [name for name in ("benchmark_gpu", "benchmark_gpu_with_cuda_graph") if hasattr(timer, name)]
    with contextlib.ExitStack() as patches:
        for name in names:
            patches.enter_context(unittest.mock.patch.object(timer, name, joining_work(getattr(timer, name))))
        with host_lock.beside_timings():
            yield


def no_grad_call(target: Callable[..., Any]) -> Callable[..., Any]:
    """``target`` called under ``torch.no_grad()``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        import torch

        with torch.no_grad():
            return target(*args, **kwargs)

    return call


class RecompiledWhileTimed(RuntimeError):
    """The compiled model compiled again during timing, where scoped settings are no longer applied."""


TORCH_MODULES = r"torch(\.|\Z)"  # a warning's module: torch's own code, not the code that called it


@contextlib.contextmanager
def torch_deprecations_quiet() -> Iterator[None]:
    """torch's own DeprecationWarnings silenced for the block: those warned from torch's modules (its jit's
    ``script_method``, 14 times as Inductor imports ``torch.utils.mkldnn``), which pytest would otherwise report
    against the user's test. One that torch attributes to the caller's code (the user's own use of a deprecated
    API) still shows, as does every warning of any other kind."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=TORCH_MODULES)
        yield


def _unlogged_skip_reason(example_inputs: list[Any]) -> str:
    import torch

    devices = {t.device.type for t in example_inputs if isinstance(t, torch.Tensor)}
    if "cuda" not in devices:
        return f"graph runs on {'/'.join(sorted(devices)) or 'no device'}: CUDA graphs need CUDA tensors"
    return "skipped without a logged reason"


def _clone_cuda(tensor: Any) -> Any:
    return tensor.clone() if tensor.is_cuda else tensor


class CompiledModel:
    """``target`` compiled with the session's selection; call it like the original.

    Compilation happens on the first call. Scoped config patches (freezing) and
    ``no_grad`` for inference-only templates are in force for every call. When CUDA
    graphs are on, CUDA tensors in the outputs are cloned right after each call, so
    a later call cannot overwrite them.
    """

    def __init__(self, target: Callable[..., Any], selection: Selection, watcher: CompileWatcher) -> None:
        import torch

        self.target = target
        self.selection = selection
        self._stats = CompileStats()
        self._skips = _SkipTracker(self._stats, watcher)
        self._backend = RecordingBackend(selection, self._stats, self._skips)
        with torch_deprecations_quiet():  # torch.compile imports Inductor here
            self._compiled = torch.compile(
                target, backend=self._backend, fullgraph=selection.fullgraph, dynamic=selection.dynamic
            )
        self._call = self._build_call()
        self._called = False
        self._first_call_seconds = 0.0
        self._first_call_backend_seconds = 0.0

    def _build_call(self) -> Callable[..., Any]:
        import torch

        call: Callable[..., Any] = self._compiled
        patches, inference = self.selection.config_patches, self.selection.inference_only
        if patches or inference:
            from torch._inductor import config

            plain = call

            def call(*args: Any, **kwargs: Any) -> Any:
                with contextlib.ExitStack() as stack:
                    if patches:
                        stack.enter_context(config.patch(patches))
                    if inference:
                        stack.enter_context(torch.no_grad())
                    return plain(*args, **kwargs)

        if self.selection.cudagraphs:
            uncloned = call

            def call(*args: Any, **kwargs: Any) -> Any:
                with self._skips.span(lambda: _unlogged_skip_reason([*args, *kwargs.values()])):
                    out = uncloned(*args, **kwargs)
                return map_tensors(_clone_cuda, out)

        return call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._called:
            return self._call(*args, **kwargs)
        with host_lock.work():  # the first call traces, compiles and runs (Triton may finish compiling then)
            clock = host_lock.Stopwatch()  # after any wait for another worker's timing
            out = self._call(*args, **kwargs)
            self._first_call_seconds = clock.seconds()
        self._called = True
        self._first_call_backend_seconds = self._backend.backend_seconds
        return out

    @property
    def called(self) -> bool:
        """Whether the first call (which compiles) has returned."""
        return self._called

    @property
    def evidence(self) -> CompileEvidence:
        """What Inductor produced while compiling: output code, autotuning, cache hits."""
        return self._backend.evidence

    def steady(self) -> Callable[..., Any]:
        """The compiled callable as timing calls it, once compiled: what ``torch.compile`` returned, under
        ``no_grad`` for inference-only templates, without the per-call scoped patches and output clones.

        Nothing compiles in steady state; should anything recompile from then on, it raises
        ``RecompiledWhileTimed`` rather than compile without the template's scoped settings.
        """

        self._backend.steady = True
        return no_grad_call(self._compiled) if self.selection.inference_only else self._compiled

    @property
    def stats(self) -> CompileStats:
        """Compile wall time, graphs, graph breaks, recompiles, CUDA-graph skips and cache lookups so far."""
        if self._called:
            later = self._backend.backend_seconds - self._first_call_backend_seconds
            self._stats.compile_seconds = self._first_call_seconds + later
        self._stats.cache_lookups = dict(self._backend.evidence.cache_lookups)
        return self._stats


class EagerModel:
    """The eager pseudo-template's model: ``target`` called as it is, with empty compile stats."""

    def __init__(self, target: Callable[..., Any]) -> None:
        self.target = target
        self.stats = CompileStats()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target(*args, **kwargs)

    def steady(self) -> Callable[..., Any]:
        """The callable as timing calls it: the target itself."""
        return self.target
