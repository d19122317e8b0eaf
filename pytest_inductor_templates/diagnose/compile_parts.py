"""Where a check's compile spent its time, from torch's own compile timers (``dynamo_timed``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

PARTS = {  # the field a check's step-log line gets: the torch timer it sums
    "lowering": "GraphLowering.run",
    "codegen": "GraphLowering.codegen",  # the scheduler's fusion and the kernels' source
    "kernel_wait": "async_compile.wait",  # the generated module waiting for its kernels' compiles
}


@contextlib.contextmanager
def compile_parts(into: dict[str, Any]) -> Iterator[None]:
    """Add to ``into`` the seconds the block's Inductor compiles spent in each of ``PARTS``, and ``kernels``: the
    Triton kernels they asked for (loaded from the cache or compiled)."""
    from torch._dynamo.utils import compilation_time_metrics, counters

    seen = {key: len(compilation_time_metrics.get(key, [])) for key in PARTS.values()}
    asked = counters["inductor"]["async_compile_cache_miss"]  # counted per kernel asked, before any cache
    try:
        yield
    finally:
        for field, key in PARTS.items():
            times = compilation_time_metrics.get(key, [])
            into[field] = round(sum(times[seen[key] :] if len(times) >= seen[key] else times), 2)
        into["kernels"] = counters["inductor"]["async_compile_cache_miss"] - asked
