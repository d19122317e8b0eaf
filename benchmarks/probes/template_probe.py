"""Probe what each built-in template changes in Inductor's generated code, on this machine.

Compiles a bf16 GEMM block (CUDA) or an fp32 one (CPU) through the plugin's CompiledModel under
every template available here and prints, per template: the stats, and markers found in the
generated code (ATen GEMM call, Triton template kernel, TMA descriptors, CUTLASS, C++ wrapper,
constants folded). Usage: python benchmarks/probes/template_probe.py [template ...]
"""

from __future__ import annotations

import re
import sys
import time

import torch
from torch._inductor.utils import run_and_get_code

from pytest_inductor_templates.compile.compiled import CompiledModel
from pytest_inductor_templates.compile.isolation import isolated_compile_state
from pytest_inductor_templates.machine import visible_devices
from pytest_inductor_templates.templates.registry import TemplateRegistry
from pytest_inductor_templates.templates.selection import Selection

MARKERS = {
    "aten_gemm": r"extern_kernels\.(mm|addmm|bmm)",
    "triton_template": r"def triton_tem_",
    "tma": r"tensor_descriptor|TensorDescriptor|tma_descriptor|experimental_device_tensormap",
    "cutlass": r"cutlass",
    "cpp_wrapper": r"inductor_entry_impl|CppWrapperCodeCache",
    "frozen_params": r"_frozen_param\d+",
    "mkl_packed_gemm": r"mkldnn\.|mkl\._mkl_linear|_linear_pointwise",
}


def main(names: list[str]) -> None:
    registry = TemplateRegistry()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    print(f"torch {torch.__version__}, devices {[str(d) for d in visible_devices()]}, dtype {dtype}")
    for template in (registry[n] for n in names or registry.names()):
        problem = template.machine_problem(visible_devices())
        if problem:
            print(f"{template.name:>12}: skipped: {problem}")
            continue
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4096, 2048), torch.nn.ReLU()).to(device, dtype).eval()
        x = torch.randn(1024, 4096, device=device, dtype=dtype)
        with isolated_compile_state() as watcher, torch.no_grad():
            compiled = CompiledModel(model, Selection(template=template), watcher)
            start = time.perf_counter()
            try:
                out, codes = run_and_get_code(compiled, x)
            except Exception as error:  # report and go on to the next template
                print(f"{template.name:>12}: FAILED {type(error).__name__}: {str(error).splitlines()[0]}")
                continue
            seconds = time.perf_counter() - start
            err = (out.float() - model(x).float()).abs().max().item()
            code = "\n".join(codes)
            found = [name for name, pattern in MARKERS.items() if re.search(pattern, code)]
            print(
                f"{template.name:>12}: {seconds:6.1f}s max|err| {err:.3g} markers {found} | {compiled.stats.summary()}"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
