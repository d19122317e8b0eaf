"""Where Inductor's compiles spent their time, from torch's own compile timers (``dynamo_timed``), kept across
Dynamo's resets (each reset clears those timers: ``isolated_compile_state`` resets through ``reset_dynamo``)."""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from typing import Any

PARTS = {  # the field a block's figures get: the torch timer it sums
    "dynamo": "_compile.compile_inner",  # Dynamo's whole compile of a frame: tracing, AOT autograd, the backend
    "tracing": "bytecode_tracing",  # Dynamo tracing the model's Python into a graph
    "aot": "create_aot_dispatcher_function",  # AOT autograd's trace and decompositions, the backend's compile inside
    "inductor": "compile_fx_inner",  # Inductor's whole compile of a graph: its passes, lowering, code, loading
    "lowering": "GraphLowering.run",
    "codegen": "GraphLowering.codegen",  # the scheduler's fusion and the kernels' source
    "kernel_wait": "async_compile.wait",  # the generated module waiting for its kernels (a compile pool)
    "kernel_compile": "async_compile.precompile",  # a kernel compiled in the process (no pool)
}
OWN_PARTS = {  # the parts of a diagnosis's check outside the compile, timed by the plugin (``own_part``)
    "build": "the check's fresh copy of the model and its compiled wrapper",
    "calls": "the compiled model's calls, its compile (the first call's) and their GPU work included",
    "compare": "the outputs compared with eager's, the float64 second opinion included",
    "graph_eager": "a kept graph run eagerly, to see whether it stands for the model",
    "gc": "Python's garbage collector's pauses, within the other parts (a large compile leaves many objects)",
}
_totals: dict[str, float] = dict.fromkeys([*PARTS, *OWN_PARTS], 0.0)  # this process's seconds per part, banked
_banked: dict[str, int] = {}  # how many of each timer's entries are in the totals
_collecting: list[float] = []  # when the garbage collector's pause now running started


def _bank() -> None:
    from torch._dynamo.utils import compilation_time_metrics

    for field, key in PARTS.items():
        times = compilation_time_metrics.get(key, [])
        _totals[field] += sum(times[_banked.get(key, 0) :])
        _banked[key] = len(times)


def reset_dynamo() -> None:
    """``torch._dynamo.reset()``, with the compile timers' figures banked first (the reset clears them)."""
    import torch._dynamo

    _bank()
    torch._dynamo.reset()
    _banked.clear()


@contextlib.contextmanager
def own_part(field: str) -> Iterator[None]:
    """Count the block's seconds as ``field`` of ``OWN_PARTS`` (where ``compile_parts`` reads them)."""
    if field not in OWN_PARTS:
        raise ValueError(f"{field!r} is none of {', '.join(OWN_PARTS)}")
    start = time.perf_counter()
    try:
        yield
    finally:
        _totals[field] += time.perf_counter() - start


def _gc_pause(phase: str, info: dict[str, Any]) -> None:
    """``gc.callbacks``' hook: each collection's pause counted as ``gc``."""
    if phase == "start":
        _collecting[:] = [time.perf_counter()]
    elif _collecting:
        _totals["gc"] += time.perf_counter() - _collecting.pop()


@contextlib.contextmanager
def compile_parts(into: dict[str, Any]) -> Iterator[None]:
    """Add to ``into`` the seconds the block's Inductor compiles spent in each of ``PARTS``, the block's
    ``OWN_PARTS``, and ``kernels``: the Triton kernels they asked for (loaded from a cache or compiled)."""
    from torch._dynamo.utils import counters

    if _gc_pause not in gc.callbacks:  # a diagnosis's processes only: kept for the process's later checks
        gc.callbacks.append(_gc_pause)
    _bank()
    before = dict(_totals)
    asked = counters["inductor"]["async_compile_cache_miss"]  # counted per kernel asked, before any cache
    try:
        yield
    finally:
        _bank()
        into.update({field: round(_totals[field] - before[field], 2) for field in [*PARTS, *OWN_PARTS]})
        into["kernels"] = counters["inductor"]["async_compile_cache_miss"] - asked
