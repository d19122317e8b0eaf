"""The environment of a diagnosis's processes (the child and its helpers): one fresh Inductor cache they share,
the CPU's vector ISAs read first on the CPU, on a GPU Inductor's compile pool, started at once and waited for
before the first compile that lowers with Inductor, and the process's set-up moved out of the garbage collector's
reach before its checks."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..environ import variable_set
from .steplog import StepLog

SHARED_CACHE = "inductor-cache"  # in the work folder: the Inductor and Triton caches of all the diagnosis's processes
PROBE_PATH = "TORCH_CUSTOM_PYTHONPATH"


def warm_up() -> None:
    """Detect the CPU's vector ISAs now, from the usual cache: in an empty cache that compiles a test program
    per ISA (minutes on a loaded machine); it decides compiler flags, never what a graph computes. Each ISA's
    probe is a Python process that loads a library: it starts without this process's sitecustomize.py, which
    may import torch (a planted fault's does) and would make each probe cost an import of torch."""
    from torch._inductor.cpu_vec_isa import pick_vec_isa

    site = getattr(sys.modules.get("sitecustomize"), "__file__", None)
    scope: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if site and PROBE_PATH not in os.environ:  # the probes' PYTHONPATH (torch's python_subprocess_env), else sys.path
        folder = os.path.dirname(os.path.abspath(site))
        scope = variable_set(PROBE_PATH, os.pathsep.join(p for p in sys.path if p and os.path.abspath(p) != folder))
    with scope:
        pick_vec_isa()


@contextlib.contextmanager
def diagnosis_environment(work: Path, device_type: str) -> Iterator[None]:
    """A fresh Inductor cache for the whole diagnosis, one folder in ``work`` that its processes share (the child
    and its helpers: a kernel's key is its source, so what one process compiled the others load), and no FX graph
    or AOT autograd cache within it (their keys do not see a changed lowering, nor the bisector's switches), so
    every check lowers again. The CPU's ISAs are read first on the CPU only (a CUDA diagnosis compiles no C++
    kernels); on a GPU Inductor's compile pool starts now, while the process draws or waits for the draw, and
    the process waits for it before its first compile that may lower with Inductor (``pool_waiter``: before the pool is
    up, every Triton kernel compiles in this process, one after another)."""
    from unittest import mock

    from torch._inductor import config
    from torch._inductor.utils import fresh_cache

    from ..compile.pool import start_compile_pool

    if device_type == "cpu":
        warm_up()
    patches = {
        key: False for key in ("fx_graph_cache", "autograd_cache", "bundled_autograd_cache") if hasattr(config, key)
    }
    shared = work / SHARED_CACHE
    folders = {"TORCHINDUCTOR_CACHE_DIR": str(shared), "TRITON_CACHE_DIR": str(shared / "triton")}
    # fresh_cache clears what this process holds in memory, before and after; the folder is the diagnosis's own,
    # removed with the work folder even after a kill
    with fresh_cache(dir=str(work)), mock.patch.dict(os.environ, folders), config.patch(patches):
        if device_type != "cpu":
            start_compile_pool()
        yield


def pool_waiter(log: StepLog | None) -> Callable[[], None]:
    """A call that waits, the first time only, for the compile pool ``diagnosis_environment`` started (none on the
    CPU), and logs how long (``pool``). It is made before the first compile that may lower with Inductor, not
    before the first check: the stages before Inductor's compile nothing with it, and run while the pool starts
    (on an H100 the wait took 6-11 s before the first check); a helper is ready for them meanwhile."""
    from ..compile.pool import wait_for_compile_pool

    waited = False

    def wait() -> None:
        nonlocal waited
        if waited:
            return
        waited = True
        start = time.monotonic()
        wait_for_compile_pool()
        if log is not None:
            log.write("pool", waited=round(time.monotonic() - start, 2))

    return wait


def settle_heap() -> int:
    """Move what this process holds after its set-up (torch, the draw, eager's half) out of the garbage collector's
    reach (``gc.freeze``), so that the collections every compile triggers walk only what came after: on a 2-core
    CPU a compile's collections took 0.42-0.75 s with the set-up frozen against 0.70-0.96 s without. Returns the
    objects frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
