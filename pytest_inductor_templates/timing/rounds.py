"""Timed rounds of one callable, as pytest-benchmark times them: calibrated calls per round, then rounds until
the time budget is spent (at least a minimum number). Plain Python: the numbers go into pytest-benchmark's
statistics afterwards (``integrations.benchmark.feed``), in whichever process they were taken."""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

RESOLUTION_SAMPLES = 10  # timer reads whose smallest step is the timer's resolution
MAX_ITERATIONS = 1_000_000


@dataclass(frozen=True)
class RoundsPlan:
    """pytest-benchmark's settings for one benchmark: its timer, a round's minimum length, the time budget, the
    minimum number of rounds, how many timer resolutions a round lasts at least, and whether the cyclic garbage
    collector is held off."""

    timer: Callable[[], float]
    min_time: float
    max_time: float
    min_rounds: int
    calibration_precision: int = 10
    disable_gc: bool = False


@dataclass(frozen=True)
class Rounds:
    """Seconds per call of each timed round, and the calls in a round."""

    iterations: int
    per_call: list[float]


def timer_resolution(timer: Callable[[], float]) -> float:
    """The smallest step the timer takes between two reads."""
    steps = []
    for _ in range(RESOLUTION_SAMPLES):
        start = timer()
        end = timer()
        while end == start:
            end = timer()
        steps.append(end - start)
    return min(steps)


def _round(run: Callable[[], Any], iterations: int, plan: RoundsPlan) -> float:
    enabled = gc.isenabled()
    if plan.disable_gc:
        gc.disable()
    try:
        start = plan.timer()
        for _ in range(iterations):
            run()
        return plan.timer() - start
    finally:
        if enabled:
            gc.enable()


def calibrate(run: Callable[[], Any], plan: RoundsPlan) -> tuple[int, float]:
    """Calls per round so that a round lasts ``plan.min_time`` and ``calibration_precision`` timer steps at least
    (pytest-benchmark's rule), and the last calibration round's duration."""
    min_time = max(plan.min_time, timer_resolution(plan.timer) * plan.calibration_precision)
    estimate_from = min_time * 5 / plan.calibration_precision
    iterations = 1
    while True:
        duration = _round(run, iterations, plan)
        if duration >= min_time or iterations >= MAX_ITERATIONS:
            return iterations, duration
        if duration >= estimate_from:
            iterations = min(MAX_ITERATIONS, math.ceil(min_time * iterations / duration))
            if iterations == 1:
                return iterations, duration
        else:
            iterations = min(MAX_ITERATIONS, iterations * 10)


def time_rounds(run: Callable[[], Any], plan: RoundsPlan) -> Rounds:
    """Calibrate, then ``max(ceil(max_time / round), min_rounds)`` rounds of ``run`` (warmed up already)."""
    iterations, duration = calibrate(run, plan)
    count = max(math.ceil(plan.max_time / duration) if duration > 0 else plan.min_rounds, plan.min_rounds)
    return Rounds(iterations, [_round(run, iterations, plan) / iterations for _ in range(count)])
