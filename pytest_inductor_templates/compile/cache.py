"""The compile caches: Inductor's FX graph cache and AOTAutograd's cache, their lookups counted over a compile, the
state they leave a compile in (cold, warm, mixed), and a fresh cache for a scope (``--inductor-fresh-cache``).

torch counts every lookup in ``torch._dynamo.utils.counters``, which are global: a compile's lookups are the counts'
growth over it, read without changing them. A bypass (a graph the cache cannot hold) compiles in full, as a miss
does. Neither torch nor pytest is imported at module level.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

HITS = (("inductor", "fxgraph_cache_hit"), ("aot_autograd", "autograd_cache_hit"))
MISSES = (
    ("inductor", "fxgraph_cache_miss"),
    ("inductor", "fxgraph_cache_bypass"),
    ("aot_autograd", "autograd_cache_miss"),
    ("aot_autograd", "autograd_cache_bypass"),
)
COLD, WARM, MIXED = "cold", "warm", "mixed"  # every lookup missed; every one hit; some of each
STATES = (COLD, WARM, MIXED)


def lookups() -> dict[str, int]:
    """The cache lookups torch has counted so far in this process, by counter name (the counters left as they are:
    no group or name is added to them)."""
    from torch._dynamo.utils import counters

    return {name: counters.get(group, {}).get(name, 0) for group, name in (*HITS, *MISSES)}


@contextmanager
def counting(into: Counter[str]) -> Iterator[None]:
    """Add the cache lookups made inside the block to ``into`` (only the counters that grew)."""
    before = lookups()
    try:
        yield
    finally:
        after = lookups()
        into.update({name: after[name] - before[name] for name in after if after[name] > before[name]})


def state(counted: Mapping[str, int]) -> str | None:
    """``cold``, ``warm`` or ``mixed`` from a compile's lookups; None when it consulted no cache (a backend other
    than Inductor, or caches switched off)."""
    hits = sum(counted.get(name, 0) for _, name in HITS)
    misses = sum(counted.get(name, 0) for _, name in MISSES)
    if hits and misses:
        return MIXED
    return WARM if hits else COLD if misses else None


def clear_in_memory() -> None:
    """Clear Inductor's in-memory caches (compiled modules, Triton kernels: what a process has loaded), not the
    caches on disk."""
    from torch._inductor import utils

    (getattr(utils, "clear_caches", None) or utils.clear_inductor_caches)()  # torch < 2.8: the older name


@contextmanager
def fresh(enabled: bool = True) -> Iterator[None]:
    """With ``enabled``, an empty cache folder for the block (Inductor's, and Triton's under it; in-memory caches
    cleared on the way in and out), removed after it, and the environment as it was; else nothing changes."""
    if not enabled:
        yield
        return
    from torch._inductor import utils

    fresh_cache = getattr(utils, "fresh_cache", None) or utils.fresh_inductor_cache  # torch < 2.8: the older name
    with fresh_cache():
        yield
