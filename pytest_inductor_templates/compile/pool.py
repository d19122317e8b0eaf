"""Inductor's compile pool, waited for until it has started.

Inductor starts its pool of compile processes (``compile_threads`` of them, behind a sidecar process that imports
torch) in the background, at the first compile of a process, and a compile that hit the cache can return before
the pool is up. Under pytest-xdist that start would then run beside another worker's timing; so the sample worker
waits for it before it leaves the work group (``timing.host_lock``), and a sample worker that shares its host
starts its pool with its own start (``start_compile_pool``): the workers' pools then start together, at the
session's start, instead of one after another, each at its worker's first compile, behind the others' timings.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

_reported: set[int] = set()  # the pools whose start was reported already


def start_compile_pool() -> None:
    """Start Inductor's compile pool now (its sidecar and, woken, its processes), where Inductor would use one; a
    torch without ``AsyncCompile.warm_pool`` or ``wakeup`` starts it at its first compile instead."""
    from torch._inductor import async_compile

    compiler = async_compile.AsyncCompile
    with contextlib.suppress(Exception):  # a pool that cannot start fails the compile that needs it, saying why
        compiler.warm_pool()
        made = getattr(compiler.process_pool, "cache_info", None)
        if made is not None and made().currsize:
            wakeup = getattr(compiler.process_pool(), "wakeup", None)
            if wakeup is not None:
                wakeup()  # a SubprocPool's processes start only when woken or given work


def wait_for_compile_pool() -> tuple[str, float, float] | None:
    """Wait until the compile pool this process made (if it made one) is ready; never start one. The first time
    a pool is seen: (its sidecar's process id, when that process started, when the pool was ready), else None.
    A torch without ``AsyncCompile.wait_pool_ready`` (2.13 has it) is not waited for."""
    module = sys.modules.get("torch._inductor.async_compile")
    compiler = getattr(module, "AsyncCompile", None)
    make_pool = getattr(compiler, "process_pool", None)
    cache_info = getattr(make_pool, "cache_info", None)
    if not hasattr(compiler, "wait_pool_ready") or cache_info is None or cache_info().currsize == 0:
        return None
    pool = make_pool()  # the one made (it is cached)
    with contextlib.suppress(Exception):  # a pool that cannot start fails the compile that needs it, saying why
        compiler.wait_pool_ready()
    ready = time.time()
    if id(pool) in _reported:
        return None
    _reported.add(id(pool))
    process = getattr(pool, "process", None)  # a SubprocPool's sidecar
    pid = getattr(process, "pid", None)
    started = process_started(pid) if pid is not None else None
    return (str(pid or "-"), started if started is not None else ready, ready)


def process_started(pid: int) -> float | None:
    """When process ``pid`` started, in wall-clock seconds (Linux: ``/proc``, to a clock tick), or None."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        since_boot = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, counted after the command's ")"
        return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot)
    except (OSError, ValueError, IndexError, AttributeError):
        return None
