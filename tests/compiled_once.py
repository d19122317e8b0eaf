"""Imported by the warm interpreter's server (``inner_runs.PRELOAD``): one Inductor compile for the CPU, so that the
runs forked from it start with what a process's first compile sets up once and keeps (the modules Inductor imports
as it first lowers and generates code, the precompiled header's path found by running the preprocessor, the
compiler's version, the CPU's ISA). Here a forked run's first compile took 1.0-1.2 s less (2.95 s against 4.1 s
from an empty cache, 1.0 s against 2.1 s from a warm one).

The compile is Inductor's alone (``compile_fx`` on a traced graph): no Dynamo frame, and the compiled code never
runs, so no OpenMP thread starts before the server forks; one compile thread (no pool), no FX graph cache, an
Inductor cache of its own that is removed after (what ``_compile_once`` clears after it, it says)."""

from __future__ import annotations

import contextlib
import os
import tempfile

import torch
import torch._dynamo
import torch._dynamo.utils
import torch._inductor.metrics
from torch._inductor import config
from torch._inductor.compile_fx import compile_fx
from torch._inductor.utils import clear_caches


def _compile_once() -> None:
    """The compile, then the environment as it was, Inductor's in-memory code caches cleared (as its ``fresh_cache``
    clears them: the compiled module's entries point into a folder removed here), counters and metrics cleared,
    Dynamo reset. A machine that cannot compile for its CPU (no C++ compiler) keeps the server as it was: a saving,
    not a need (the runs' own first compiles say what is wrong). Not with a CUDA or ROCm torch: Inductor's lowering
    asks ``torch.cuda`` (``current_device`` initialises CUDA), and CUDA set up in the server cannot be used in the
    runs it forks."""
    if torch.version.cuda or torch.version.hip:
        return
    environment = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="compiled-once-") as folder:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
        try:
            with contextlib.suppress(Exception), config.patch(compile_threads=1, fx_graph_cache=False), torch.no_grad():
                model = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()))
                compile_fx(model, [torch.randn(4, 16)])
        finally:
            os.environ.clear()
            os.environ.update(environment)
    clear_caches()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch._dynamo.utils.compilation_time_metrics.clear()
    torch._inductor.metrics.reset()


_compile_once()
