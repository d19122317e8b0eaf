"""Did the template take effect? Verdicts from the compile evidence and stats, one per aspect.

``effects_from`` turns what ``evidence.gather`` collected while a model compiled, with its compile stats, into
one verdict per aspect the selection turns on (CUDA graphs, freezing, the C++ wrapper, autotuning, TMA,
CUTLASS, ATen GEMMs), and, for settings outside those, whether the code differs from ``default``'s.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..machine import Device, package_missing
from ..templates.selection import Selection
from .compiled import CompiledModel, CompileStats
from .evidence import CompileEvidence, gather
from .failures import first_line

FROZEN_PARAM = re.compile(r"_frozen_param\d+")
CPP_WRAPPER = re.compile(r"inductor_entry_impl|CppWrapperCodeCache")
TRITON_KERNEL = re.compile(r"async_compile\.triton\(|@triton\.jit")
TEMPLATE_KERNEL = re.compile(r"triton_tem_|triton_(?:mm|bmm|addmm|conv)\w*persistent|def triton_(?:mm|bmm|conv)")
TMA_KERNEL = re.compile(r"tensor_descriptor|TensorDescriptor|tma_descriptor|experimental_device_tensormap|_tma_")
PERSISTENT_KERNEL = re.compile(r"persistent")
ATEN_GEMM = re.compile(r"extern_kernels\.(?:mm|addmm|bmm|baddbmm|_int_mm)|aoti_torch_\w*(?:mm|addmm|bmm)\b")
CONVOLUTION = re.compile(r"extern_kernels\.convolution|aoti_torch_\w*convolution|mkldnn\w*conv|triton_\w*conv")
CUTLASS_KERNEL = re.compile(r"cutlass", re.IGNORECASE)
GEMM = re.compile(ATEN_GEMM.pattern + "|" + TEMPLATE_KERNEL.pattern + r"|_linear_pointwise|mkl_linear|mkldnn\w*linear")

# An attribute of a model whose weights are forward inputs (a GraphNet sample under --inductor-sample-weights=inputs):
# how many there are. Freezing folds a module's parameters and buffers only.
WEIGHTS_AS_INPUTS = "inductor_weights_as_inputs"

# The settings each rule below judges; any other setting is judged by comparing the code with default's.
CUDAGRAPH_KEYS = {"triton.cudagraphs"}
GEMM_BACKEND_KEYS = {"max_autotune_gemm", "max_autotune_gemm_backends"}
TMA_KEYS = GEMM_BACKEND_KEYS | {"triton.enable_persistent_tma_matmul"}
CUTLASS_KEYS = GEMM_BACKEND_KEYS | {"cuda.cutlass_dir", "cutlass.cutlass_dir"}
AUTOTUNE_KEYS = GEMM_BACKEND_KEYS | {"max_autotune", "coordinate_descent_tuning", "epilogue_fusion"}


@dataclass(frozen=True)
class Effect:
    """One aspect of a selection, and whether it showed in what was compiled."""

    aspect: str
    took_effect: bool | None  # None: could not be observed (served from a cache, no Inductor code)
    evidence: str

    def __str__(self) -> str:
        return f"{self.aspect}: {self.evidence}"


def _cudagraphs(stats: CompileStats, device_type: str, recorded: int | None) -> Effect:
    if stats.cudagraph_skips or device_type != "cuda":
        reasons = "; ".join(dict.fromkeys(stats.cudagraph_skip_reasons)) or f"the model runs on {device_type}"
        return Effect("cudagraphs", False, f"CUDA graphs skipped: {reasons}")
    if recorded == 0:
        return Effect("cudagraphs", False, "no CUDA graph was recorded, even on repeated calls")
    count = f"{recorded} CUDA graph(s) recorded" if recorded else "CUDA graphs in use"
    return Effect("cudagraphs", True, f"{count}, no skip reported for {stats.graphs} graph(s)")


def _freezing(codes: list[str], model: Any = None) -> Effect:
    frozen = sum(len(set(FROZEN_PARAM.findall(code))) for code in codes)  # each graph numbers its own from 0
    if frozen:
        return Effect("freezing", True, f"{frozen} parameter(s) frozen into constants")
    as_inputs = getattr(model, WEIGHTS_AS_INPUTS, None)
    if as_inputs:
        why = (
            f" (the sample's {as_inputs} weights are forward inputs, --inductor-sample-weights=inputs: freezing folds "
            "a module's parameters and buffers, not inputs)"
        )
    elif model is None:
        why = " (a model without parameters?)"
    else:
        why = "" if _holds_state(model) else " (the model has no parameters or buffers)"
    return Effect("freezing", False, f"no parameter was frozen into a constant{why}")


def _holds_state(model: Any) -> bool:
    """Whether ``model`` is a module with a parameter or a buffer (True when that cannot be told)."""
    parameters, buffers = getattr(model, "parameters", None), getattr(model, "buffers", None)
    if not callable(parameters) or not callable(buffers):
        return True
    return any(True for _ in parameters()) or any(True for _ in buffers())


def _autotuning(evidence: CompileEvidence, code: str) -> Effect:
    if evidence.autotuned:
        choices = f", {evidence.choices} choice(s) timed" if evidence.choices else ""
        return Effect("max_autotune", True, f"autotuning benchmarked {evidence.autotuned} selection(s){choices}")
    if evidence.choices:  # the timings came from Inductor's local autotune cache: chosen among, not re-timed
        cached = f"autotuning chose among {evidence.choices} choice(s) timed earlier (cache)"
        return Effect("max_autotune", True, cached)
    if TEMPLATE_KERNEL.search(code):
        return Effect("max_autotune", True, "a Triton template kernel was chosen (autotune results from a cache)")
    if evidence.cache_hits:
        return Effect("max_autotune", None, "served from Inductor's FX graph cache: autotuning not observed")
    if not GEMM.search(code) and not CONVOLUTION.search(code):
        return Effect("max_autotune", False, "nothing to autotune: no GEMM or convolution in the graph")
    return Effect("max_autotune", False, "no autotuning ran: no GEMM offered template choices on this device")


def _tma(code: str, capability: tuple[int, int] | None) -> Effect:
    if TMA_KERNEL.search(code):
        return Effect("tma", True, "a persistent TMA GEMM kernel was chosen")
    if PERSISTENT_KERNEL.search(code) and TEMPLATE_KERNEL.search(code):
        return Effect("tma", True, "the persistent (non-TMA) GEMM kernel was chosen")
    if not GEMM.search(code):
        return Effect("tma", False, "no GEMM in the graph")
    if capability is not None and capability < (9, 0):
        return Effect("tma", False, f"TMA needs compute capability 9.0, this GPU has {capability[0]}.{capability[1]}")
    if capability is None:
        return Effect("tma", False, "TMA GEMMs need a CUDA device")
    return Effect("tma", False, "autotuning chose another kernel (ATen, or a non-persistent template)")


def _cutlass(code: str, missing_library: str | None) -> Effect:
    if CUTLASS_KERNEL.search(code):
        return Effect("cutlass", True, "a CUTLASS kernel was chosen")
    if missing_library:
        return Effect("cutlass", False, missing_library)
    if not GEMM.search(code):
        return Effect("cutlass", False, "no GEMM in the graph")
    return Effect(
        "cutlass", False, "no CUTLASS kernel was chosen (fp32 GEMMs never use CUTLASS; or another was faster)"
    )


def _aten(code: str) -> Effect:
    if ATEN_GEMM.search(code) and not TEMPLATE_KERNEL.search(code):
        return Effect("aten", True, "the GEMMs went to ATen")
    if not GEMM.search(code):
        return Effect("aten", False, "no GEMM in the graph")
    return Effect("aten", False, "a GEMM did not go to ATen")


def normalized(code: str) -> str:
    """Inductor's code without what differs between identical compiles: paths, hashes, comments."""
    code = re.sub(r"#.*", "", code)
    code = re.sub(r"/\S*torchinductor\S*", "PATH", code)
    return re.sub(r"\b[a-z0-9]{20,}\b", "HASH", code)


def effects_from(
    selection: Selection,
    stats: CompileStats,
    evidence: CompileEvidence,
    device_type: str,
    capability: tuple[int, int] | None = None,
    recorded_cuda_graphs: int | None = None,
    default_code: Callable[[], str | Exception] | None = None,
    cutlass_missing: str | None = None,
    target: Any = None,
) -> list[Effect]:
    """One verdict per aspect the selection turns on; empty when it turns nothing on (default, eager). ``target``,
    the model that was compiled, names why freezing found nothing to fold."""
    settings = selection.effective_settings
    code = evidence.code
    effects: list[Effect] = []
    covered: set[str] = set()
    if selection.cudagraphs:
        effects.append(_cudagraphs(stats, device_type, recorded_cuda_graphs))
        covered |= CUDAGRAPH_KEYS
    if not evidence.codes and (settings.keys() - covered):
        return [*effects, Effect("inductor", None, "Inductor produced no code for this model: nothing to observe")]
    if "freezing" in settings:
        effects.append(_freezing(evidence.codes, target))
        covered.add("freezing")
    if "cpp_wrapper" in settings:
        cpp = bool(CPP_WRAPPER.search(code))
        wrapper = "the wrapper is C++" if cpp else "the wrapper is Python"
        if settings["cpp_wrapper"]:
            effects.append(Effect("cpp_wrapper", cpp, wrapper))
        else:
            triton = bool(TRITON_KERNEL.search(code))
            kernels = "with Triton kernels" if triton else "without Triton kernels"
            effects.append(Effect("triton", not cpp and triton, f"{wrapper}, {kernels}"))
        covered.add("cpp_wrapper")
    backends = str(settings.get("max_autotune_gemm_backends", "")).upper()
    if settings.get("triton.enable_persistent_tma_matmul"):
        effects.append(_tma(code, capability if device_type == "cuda" else None))
        covered |= TMA_KEYS
    elif "CUTLASS" in backends:
        effects.append(_cutlass(code, cutlass_missing))
        covered |= CUTLASS_KEYS
    elif backends == "ATEN":
        effects.append(_aten(code))
        covered |= GEMM_BACKEND_KEYS
    if settings.get("max_autotune") or (settings.get("max_autotune_gemm") and not covered & GEMM_BACKEND_KEYS):
        effects.append(_autotuning(evidence, code))
        covered |= AUTOTUNE_KEYS
    if set(settings) - covered and default_code is not None:
        baseline = default_code()
        if isinstance(baseline, Exception):
            problem = f"could not compile under default to compare ({first_line(baseline)})"
            effects.append(Effect("settings", None, problem))
        else:
            differs = normalized(baseline) != normalized(code)
            what = "the compiled code differs from default's" if differs else "the compiled code is default's"
            effects.append(Effect("settings", differs, what))
    return effects


def overall_effect(effects: list[Effect]) -> str:
    """``effect``, ``no effect``, ``not observed``, or ``n/a`` (nothing to take effect)."""
    if not effects:
        return "n/a"
    if any(e.took_effect is False for e in effects):
        return "no effect"
    if any(e.took_effect is None for e in effects):
        return "not observed"
    return "effect"


def recorded_cuda_graphs(device_index: int) -> int | None:
    """How many CUDA graphs Inductor's CUDA-graph trees hold on the device (None where this torch hides it)."""
    try:
        from torch._inductor.cudagraph_trees import get_manager

        manager = get_manager(device_index, create_if_none_exists=False)
        if manager is None:
            return 0
        pending = [node for nodes in manager.roots.values() for node in nodes]
        count = 0
        while pending:
            node = pending.pop()
            count += 1
            pending += [child for children in node.children.values() for child in children]
        return count
    except (ImportError, AttributeError):  # a private structure: its absence costs the count, not the verdict
        return None


def baseline_of(selection: Selection) -> Selection:
    """The same compile call (backend, fullgraph, dynamic) with nothing selected: ``default``."""
    return dataclasses.replace(selection, template=None, mode=None, options=None, mode_options={})


def default_code_of(
    selection: Selection, make_model: Callable[[], Any], call: Callable[[Any], Any], watcher: Any
) -> Callable[[], str | Exception]:
    """A thunk compiling a fresh model under ``default`` and returning Inductor's code for it, or what
    compiling or running it raised."""

    def default_code() -> str | Exception:
        baseline = CompiledModel(make_model(), baseline_of(selection), watcher)
        evidence = CompileEvidence()
        try:
            with gather(evidence):
                call(baseline)
        except Exception as error:  # any failure of the baseline: the verdict says it could not compare
            return error
        return evidence.code

    return default_code


REPEAT_CALLS_FOR_CUDA_GRAPHS = 2  # a graph's (or a dynamic graph's shape's) first call warms up, the next records


def effects_of(
    model: Any,
    selection: Selection,
    device: Device,
    default_code: Callable[[], str | Exception] | None,
    call_again: Callable[[], Any] | None = None,
) -> list[Effect]:
    """The verdicts for a model that compiled and ran (none for the eager row or another backend's).

    Inductor's CUDA-graph trees record a graph the second time an input shape reaches it; where the check's
    calls recorded none and nothing was skipped, ``call_again`` (the first input set) is called up to twice.
    """
    if not isinstance(model, CompiledModel):
        return []
    index = int(device.name.partition(":")[2] or 0) if device.type == "cuda" else 0
    recorded = None
    if device.type == "cuda" and selection.cudagraphs:
        recorded = _cuda_graphs_recorded(model, index, call_again)
    backends = str(selection.effective_settings.get("max_autotune_gemm_backends", "")).upper()
    return effects_from(
        selection,
        model.stats,
        model.evidence,
        device.type,
        device.capability,
        recorded,
        default_code,
        package_missing("cutlass_library") if "CUTLASS" in backends else None,
        model.target,
    )


def _cuda_graphs_recorded(model: CompiledModel, index: int, call_again: Callable[[], Any] | None) -> int | None:
    """The CUDA graphs on device ``index``; where none is recorded yet and nothing was skipped, after
    calling ``call_again`` until one is (at most twice)."""
    recorded = recorded_cuda_graphs(index)
    for _ in range(REPEAT_CALLS_FOR_CUDA_GRAPHS):
        if call_again is None or recorded != 0 or model.stats.cudagraph_skips:
            break
        call_again()
        recorded = recorded_cuda_graphs(index)
    return recorded
