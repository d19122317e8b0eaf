"""GPU-correct timing: a synchronizing timer for pytest-benchmark, warm-up, device time, the eager baseline."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

WARMUP_MIN_CALLS = 5
WARMUP_MIN_SECONDS = 0.1
WARMUP_MAX_SECONDS = 10.0
DEVICE_TIME_SECONDS = 0.2  # how long CUDA-event sampling runs, at least DEVICE_TIME_MIN_CALLS calls
CUDA_MIN_ROUND_SECONDS = 0.005  # a timed round on CUDA lasts this long at least: the syncs at its ends amortize
DEVICE_TIME_MIN_CALLS = 10
DEVICE_TIME_MAX_CALLS = 1000


def cuda_synchronized_perf_counter() -> float:
    """``time.perf_counter()`` after waiting for every queued CUDA kernel: a wall clock that sees GPU work.

    pytest-benchmark reads its timer before and after each round of calls; with this timer a round
    ends when the GPU has finished it, not when the CPU has queued it.
    """
    import torch

    torch.cuda.synchronize()
    return time.perf_counter()


TIMER_NAME = f"{__name__}.cuda_synchronized_perf_counter"


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


def median_per_call(
    run: Callable[[], Any], timer: Callable[[], float], min_time: float, max_time: float, min_rounds: int
) -> tuple[float, int]:
    """Median seconds per call, measured as pytest-benchmark measures: rounds of ``iterations`` calls each.

    The iterations per round are calibrated so that a round lasts at least ``min_time``; rounds run
    until ``max_time`` is spent, at least ``min_rounds``. Returns (median, rounds).
    """

    def one_round(iterations: int) -> float:
        start = timer()
        for _ in range(iterations):
            run()
        return timer() - start

    iterations = 1
    while (duration := one_round(iterations)) < min_time and iterations < 1_000_000:
        estimate = iterations * 10 if duration <= 0 else math.ceil(min_time * iterations / duration)
        iterations = max(estimate, iterations + 1)
    rounds = max(min_rounds, math.ceil(max_time / max(duration, 1e-9)))
    per_call = [one_round(iterations) / iterations for _ in range(rounds)]
    return statistics.median(per_call), rounds
