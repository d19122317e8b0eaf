"""Imported by the warm interpreter's server (``inner_runs.PRELOAD``): one Inductor compile for the CPU, so that the
runs forked from it start with what a process's first compile sets up once and keeps (the modules Inductor imports
as it first lowers and generates code, the precompiled header's path found by running the preprocessor, the
compiler's version, the CPU's ISA). Here a forked run's first compile took 1.0-1.2 s less (2.95 s against 4.1 s
from an empty cache, 1.0 s against 2.1 s from a warm one).

The compile is Inductor's alone (``compile_fx`` on a traced graph): no Dynamo frame, and the compiled code never
runs, so no OpenMP thread starts before the server forks; one compile thread (no pool), no FX graph cache, an
Inductor cache of its own that is removed after; the counters and metrics it added are cleared, and Dynamo reset."""

from __future__ import annotations

import contextlib
import os
import tempfile

import torch
import torch._dynamo
import torch._dynamo.utils
from torch._inductor import config
from torch._inductor.compile_fx import compile_fx


def _compile_once() -> None:
    """The compile, its state left as it found it; a machine that cannot compile for its CPU (no C++ compiler) keeps
    the server as it was: a saving, not a need (the runs' own first compiles say what is wrong)."""
    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="compiled-once-") as folder:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
        try:
            with contextlib.suppress(Exception), config.patch(compile_threads=1, fx_graph_cache=False), torch.no_grad():
                model = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()))
                compile_fx(model, [torch.randn(4, 16)])
        finally:
            if before is None:
                os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
            else:
                os.environ["TORCHINDUCTOR_CACHE_DIR"] = before
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    torch._dynamo.utils.compilation_time_metrics.clear()


_compile_once()
