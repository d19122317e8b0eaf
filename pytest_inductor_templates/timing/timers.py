"""GPU-correct timing: a synchronizing timer for pytest-benchmark, warm-up, device time, block timers."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from .paired import BlockTimer

WARMUP_MIN_CALLS = 5
WARMUP_MIN_SECONDS = 0.1
WARMUP_MAX_SECONDS = 10.0
DEVICE_TIME_SECONDS = 0.2  # how long CUDA-event sampling runs, at least DEVICE_TIME_MIN_CALLS calls
CUDA_MIN_ROUND_SECONDS = 0.005  # a timed round on CUDA lasts this long at least: the syncs at its ends amortize
DEVICE_TIME_MIN_CALLS = 10
DEVICE_TIME_MAX_CALLS = 1000
HOST_SHARE_CALLS = 5  # calls whose launch share is measured (the median is kept)
LAUNCH_BOUND_SHARE = 0.5  # a call whose launching takes at least this share of it waits on the host: launch-bound


def cuda_synchronized_perf_counter() -> float:
    """``time.perf_counter()`` after waiting for every queued CUDA kernel: a wall clock that sees GPU work.

    pytest-benchmark reads its timer before and after each round of calls; with this timer a round
    ends when the GPU has finished it, not when the CPU has queued it.
    """
    import torch

    torch.cuda.synchronize()
    return time.perf_counter()


def warm_up(run: Callable[[], Any], synchronize: Callable[[], None] | None) -> int:
    """Call ``run`` until steady state: at least 5 calls and 0.1 s (compile, autotuning and CUDA-graph
    recording happen in the first calls), at most 10 s. Returns the number of calls."""
    start, calls = time.perf_counter(), 0
    while True:
        run()
        calls += 1
        if synchronize is not None:
            synchronize()
        elapsed = time.perf_counter() - start
        if (calls >= WARMUP_MIN_CALLS and elapsed >= WARMUP_MIN_SECONDS) or elapsed >= WARMUP_MAX_SECONDS:
            return calls


def device_time_ms(run: Callable[[], Any]) -> float:
    """Median GPU time of one call in milliseconds, from a CUDA event pair around each call.

    Like ``triton.testing.do_bench``: the calls are queued back to back and synchronized once at the
    end, so the GPU is not left idle waiting for each launch. For a launch-bound model the gaps in
    which the GPU waits for the CPU still count: that is the model's time on the device.
    """
    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    run()
    torch.cuda.synchronize()
    one_call = max(time.perf_counter() - start, 1e-6)
    calls = min(DEVICE_TIME_MAX_CALLS, max(DEVICE_TIME_MIN_CALLS, int(DEVICE_TIME_SECONDS / one_call)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for begin, end in zip(starts, ends, strict=True):
        begin.record()
        run()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(begin.elapsed_time(end) for begin, end in zip(starts, ends, strict=True))


def host_share(run: Callable[[], Any]) -> float:
    """The share of one call's time the host spends launching it: from an idle GPU, the time until the call
    returns over the time until the GPU has finished it (the median of a few calls).

    Near 1 the GPU waits for each launch (launch-bound at this size: the host CPU's speed is in the call's time);
    well below, the host queues work ahead of the GPU. The lent H200 hosts' CPUs run at two speeds 1.7-2x apart, so
    a call launching for more than half its time can become host-bound whichever speed the CPU runs at.
    """
    import torch

    shares = []
    for _ in range(HOST_SHARE_CALLS):
        torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        launched = time.perf_counter()
        torch.cuda.synchronize()
        shares.append((launched - start) / max(time.perf_counter() - start, 1e-9))
    return round(statistics.median(shares), 3)


def block_timer(timer: Callable[[], float], cuda: bool) -> BlockTimer:
    """A block timer for paired timing: ``timer`` read around a block of calls (the item's pytest-benchmark
    timer, synchronizing on CUDA), and on CUDA the device time between two events around the block."""

    def wall(run: Callable[[], Any], iterations: int) -> tuple[float, float | None]:
        start = timer()
        for _ in range(iterations):
            run()
        return timer() - start, None

    if not cuda:
        return wall
    import torch

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def with_device(run: Callable[[], Any], iterations: int) -> tuple[float, float | None]:
        torch.cuda.synchronize()
        start = timer()
        begin.record()
        for _ in range(iterations):
            run()
        end.record()
        seconds = timer() - start
        end.synchronize()
        return seconds, begin.elapsed_time(end) / 1000

    return with_device
