"""The paired-timing core on a simulated machine: alternation, the ratio, its interval, the stop rule.

The core takes the callables, a block timer and a clock, so a simulated machine (its clock and load are
numbers) shows what pairing does with drift that no real machine reproduces on demand.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections.abc import Callable
from typing import Any

import pytest

from pytest_inductor_templates.timing.paired import (
    PairedPlan,
    bootstrap_median,
    calibrate,
    ratios,
    segment_interval,
    speedup_interval,
    time_paired,
)
from pytest_inductor_templates.timing.threads import load_warning


class Machine:
    """A clock that moves only when a block is timed: each call of ``eager`` costs ``eager_cost`` seconds and of
    ``compiled`` ``compiled_cost``, both times ``load(block)`` (drift shared by the two sides of a round), times
    a per-block noise factor drawn from ``noise`` (seeded)."""

    def __init__(
        self,
        eager_cost: float,
        compiled_cost: float,
        load: Callable[[int], float] = lambda _: 1.0,
        noise: float = 0.0,
        cold_cost: float = 0.0,
    ) -> None:
        self.now = 0.0
        self.blocks = 0
        self.calls: list[str] = []
        self.cost = {"eager": eager_cost, "compiled": compiled_cost}
        self.cold_cost = cold_cost  # what the first call after the other side's calls costs on top (cold caches)
        self.load = load
        self.noise = noise
        self.random = random.Random(0)
        self.cost_factor: Callable[[int], float] = lambda _: 1.0  # eager's alone: a drift the ratio sees

    def side(self, name: str) -> Callable[[], None]:
        return lambda: self.calls.append(name)

    def time_block(self, run: Callable[[], Any], iterations: int) -> tuple[float, None]:
        before = len(self.calls)
        for _ in range(iterations):
            run()
        name = self.calls[before]
        factor = self.load(self.blocks) * (1 + self.random.uniform(-self.noise, self.noise))
        if name == "eager":
            factor *= self.cost_factor(self.blocks)
        seconds = self.cost[name] * iterations * factor
        if before == 0 or self.calls[before - 1] != name:  # the caches hold the other side's data
            seconds += self.cold_cost
        self.blocks += 1
        self.now += seconds
        return seconds, None

    def time(self, plan: PairedPlan) -> Any:
        return time_paired(self.side("eager"), self.side("compiled"), self.time_block, plan, clock=lambda: self.now)


PLAN = PairedPlan(block_seconds=0.001, min_rounds=10, max_seconds=1.0, target=0.02)


def test_rounds_alternate_eager_and_compiled_and_swap_the_order_each_round() -> None:
    machine = Machine(0.001, 0.001)
    timing = machine.time(PLAN)
    assert timing.rounds == 10 and timing.iterations == (1, 1)  # one call fills a 1 ms block
    timed = machine.calls[2:]  # after calibrating each side once; each block after one untimed call
    assert timed[:12:2] == ["eager", "compiled", "compiled", "eager", "eager", "compiled"]
    assert timed[1:12:2] == timed[:12:2]
    assert timed.count("eager") == timed.count("compiled") == 20


def test_each_block_is_timed_warm_after_the_other_sides_block() -> None:
    """A first call after the other side's block pays for cold caches (here 1 ms on top of 0.1 ms): charged to
    the timed block, it would halve the speedup of whichever side a round times second."""
    machine = Machine(0.0004, 0.0001, cold_cost=0.001)
    timing = machine.time(PLAN)
    assert timing.speedup.median == pytest.approx(4.0)


def test_drift_shared_by_a_round_cancels_in_its_ratio() -> None:
    """The load doubles every few blocks and falls back: unpaired medians of each side would see a different
    mix of load; the per-round ratio sees the same load on both sides."""
    load = lambda block: 2.0 ** ((block // 5) % 4)  # noqa: E731
    timing = Machine(0.003, 0.001, load).time(PLAN)
    assert timing.speedup.median == pytest.approx(3.0)
    assert max(timing.eager) / min(timing.eager) >= 7  # eager alone moved by 8x
    assert timing.speedup.low == pytest.approx(3.0) and timing.speedup.high == pytest.approx(3.0)


def test_calibration_fills_blocks_and_per_call_times_divide_by_the_calls() -> None:
    machine = Machine(0.00001, 0.00004)
    assert calibrate(machine.side("eager"), machine.time_block, 0.001) == 100
    timing = Machine(0.00001, 0.00004).time(PLAN)
    assert timing.iterations == (100, 25)
    assert timing.eager_median == pytest.approx(0.00001) and statistics.median(timing.compiled) == pytest.approx(
        0.00004
    )
    assert timing.speedup.median == pytest.approx(0.25)


def test_the_interval_is_a_seeded_bootstrap_of_the_median() -> None:
    values = [1.0 + 0.01 * i for i in range(41)]
    interval = bootstrap_median(values)
    assert interval.median == statistics.median(values) == 1.2
    assert 1.1 < interval.low < 1.2 < interval.high < 1.3
    assert bootstrap_median(values) == interval  # seeded: the same values, the same interval
    assert bootstrap_median([2.0] * 20).half_width == 0
    assert bootstrap_median([4.0]).low == bootstrap_median([4.0]).high == 4.0
    assert ratios([2.0, 3.0], [1.0, 0.0]) == [2.0]  # a round with nothing timed on one side is left out


def test_noisy_rounds_go_on_until_the_interval_is_narrow_enough() -> None:
    timing = Machine(0.002, 0.001, noise=0.1).time(PLAN)
    assert timing.rounds > PLAN.min_rounds  # 10 rounds were not enough for +-2%
    assert timing.speedup.half_width <= PLAN.target and not timing.unstable
    assert timing.speedup.median == pytest.approx(2.0, rel=0.05) and timing.seconds < PLAN.max_seconds


def test_the_interval_covers_the_true_median_about_95_percent_of_the_time() -> None:
    draw = random.Random(1)
    trials = 300
    covered = 0
    for seed in range(trials):
        values = [draw.lognormvariate(0.0, 0.3) for _ in range(51)]  # true median: 1
        interval = bootstrap_median(values, seed=seed)
        covered += interval.low <= 1.0 <= interval.high
    assert 0.9 <= covered / trials <= 0.99


def test_a_drift_over_the_rounds_widens_the_interval_that_single_rounds_resampled_would_hide() -> None:
    draw = random.Random(2)
    # the machine's state drifts: the ratio moves from 0.97 to 1.03 over the rounds, with +-0.5% noise per round
    values = [(0.97 + 0.06 * i / 63) * (1 + draw.uniform(-0.005, 0.005)) for i in range(64)]
    boot, segments = bootstrap_median(values), segment_interval(values)
    assert segments.half_width > 1.5 * boot.half_width
    combined = speedup_interval(values)
    assert combined.median == statistics.median(values)
    assert (combined.low, combined.high) == (min(boot.low, segments.low), max(boot.high, segments.high))
    steady = [1.0 + draw.uniform(-0.005, 0.005) for _ in range(64)]
    assert speedup_interval(steady).half_width < 0.005  # no drift: both intervals are narrow
    assert segment_interval([3.0, 3.0, 3.0]).half_width == 0  # too few values for segments: the median alone


def test_with_drift_the_stop_rule_needs_more_rounds_than_the_noise_alone_would() -> None:
    drifting = Machine(0.002, 0.001, noise=0.01)
    drifting.cost_factor = lambda block: 1 + 0.004 * block  # eager alone slows, block after block: the ratio drifts
    quiet = Machine(0.002, 0.001, noise=0.01).time(PLAN)
    timing = drifting.time(PLAN)
    assert quiet.rounds == PLAN.min_rounds and not quiet.unstable
    assert timing.rounds > quiet.rounds


def test_an_interval_that_stays_wide_within_the_budget_is_unstable() -> None:
    plan = PairedPlan(block_seconds=0.001, min_rounds=10, max_seconds=0.05, target=0.02)
    timing = Machine(0.002, 0.001, noise=0.9).time(plan)
    assert timing.unstable and timing.speedup.half_width > plan.target
    assert timing.seconds >= plan.max_seconds and timing.rounds >= plan.min_rounds
    quiet = PairedPlan(block_seconds=0.001, min_rounds=10, max_seconds=0.0, target=0.02)
    assert Machine(0.002, 0.001).time(quiet).rounds == 10  # min_rounds hold even without budget


@pytest.mark.parametrize(
    ("load", "threads", "cpus", "warns"),
    [(None, 2, 2, False), (0.5, 2, 2, False), (1.5, 1, 4, False), (1.5, 2, 2, True), (3.0, 1, 2, True)],
)
def test_the_machine_counts_as_loaded_when_its_load_and_the_timing_threads_oversubscribe_it(
    load: float | None, threads: int, cpus: int, warns: bool
) -> None:
    warning = load_warning(threads, load, cpus)
    assert (warning is not None) == warns
    if warning:
        assert warning.startswith(f"the machine is already loaded (load average {load:.1f}")


def test_the_paired_rounds_run_with_the_garbage_collector_held_off_and_leave_it_as_it_was() -> None:
    import gc

    seen: list[bool] = []

    def noting_timer(run: Callable[[], Any], iterations: int) -> tuple[float, float | None]:
        seen.append(gc.isenabled())
        return 0.001 * iterations, None

    time_paired(lambda: None, lambda: None, noting_timer, PairedPlan(0.001, 10, 0.0, 0.5))
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:
        time_paired(lambda: None, lambda: None, noting_timer, PairedPlan(0.001, 10, 0.0, 0.5))
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()

    def failing_timer(run: Callable[[], Any], iterations: int) -> tuple[float, float | None]:
        raise RuntimeError("a timed call failed")

    with pytest.raises(RuntimeError, match="a timed call failed"):
        time_paired(lambda: None, lambda: None, failing_timer, PairedPlan(0.001, 10, 0.0, 0.5))
    assert gc.isenabled()  # on again after a failure too


def test_a_wildly_drifting_interval_stays_above_zero() -> None:
    values = [0.1, 0.1, 5.0, 5.0, 0.05, 0.05, 8.0, 8.0, 0.2, 0.2]  # segments' medians far apart: a wide factor
    interval = speedup_interval(values)
    assert 0 < interval.low <= interval.median <= interval.high


class TwoSpeedMachine(Machine):
    """A CPU switching between two speeds every ``period`` simulated seconds: in the slow state eager (waiting on
    the CPU) costs ``slow`` times more and the compiled side (bound by the device) nothing more; reading the clock
    costs 0.1 ms at full speed, ``slow`` times that in the slow state, so the probe before each round sees it."""

    def __init__(self, period: float, slow: float) -> None:
        super().__init__(0.003, 0.001)
        self.period, self.slow = period, slow
        self.cost_factor = lambda _: self.factor()

    def factor(self) -> float:
        return self.slow if int(self.now / self.period) % 2 else 1.0

    def clock(self) -> float:
        self.now += 1e-4 * self.factor()
        return self.now

    def time(self, plan: PairedPlan) -> Any:
        return time_paired(self.side("eager"), self.side("compiled"), self.time_block, plan, clock=self.clock)


def test_a_minimum_span_times_over_both_cpu_speeds_and_the_probe_tells_the_full_speed_rounds() -> None:
    """The stop rule alone sees a narrow interval inside the first speed state and ends there; with a minimum span
    the rounds meet both states, the probe before each round marks the slow ones, and the median over the
    full-speed rounds is the full-speed speedup."""
    alone = TwoSpeedMachine(period=2.0, slow=1.5).time(PLAN)
    assert alone.seconds < 2.0 and alone.slow_share == 0.0 and alone.speedup.median == pytest.approx(3.0)
    spanned = TwoSpeedMachine(period=2.0, slow=1.5).time(
        PairedPlan(block_seconds=0.001, min_rounds=10, max_seconds=1.0, target=0.02, min_seconds=8.0)
    )
    assert spanned.seconds >= 8.0 and len(spanned.probes) == spanned.rounds
    assert spanned.slow_share is not None and 0.3 < spanned.slow_share < 0.7
    assert spanned.full_speed_speedup == pytest.approx(3.0)
    assert set(map(round, ratios(spanned.eager, spanned.compiled), [1] * spanned.rounds)) == {3.0, 4.5}
    # the speedup (and its interval) is the full-speed rounds': the share of slow rounds, which moves from process
    # to process, does not move it; the all-rounds figure stays beside it
    assert spanned.speedup_of == "full-speed rounds" and alone.speedup_of == "all rounds"
    assert spanned.speedup.low <= 3.0 <= spanned.speedup.high and spanned.speedup.median == pytest.approx(3.0)
    assert spanned.speedup.half_width < 0.01 < spanned.all_rounds.half_width  # the slow rounds widen it


def test_a_timing_that_meets_only_the_slow_speed_is_told_by_the_hosts_fastest_probe_and_counted_as_such() -> None:
    """The H200 hosts' CPUs stay at their slow speed for seconds, longer than one process's share of an item's rounds:
    on its own probes such a timing reads as steady. Against the fastest probe an earlier timing on the host saw, it
    says ``slow-CPU rounds`` and goes on to its longest span (waiting for the full speed); over several processes,
    the one that met only the slow speed is counted with all its rounds and said to be slow."""
    from pytest_inductor_templates.timing.measure import Timing
    from pytest_inductor_templates.timing.processes import Repeat, judged_together

    def slow_throughout() -> TwoSpeedMachine:
        machine = TwoSpeedMachine(period=1e6, slow=1.5)
        machine.now = 1e6  # in the slow state, for longer than the timing
        return machine

    fast = TwoSpeedMachine(period=1e6, slow=1.5).time(PLAN)
    assert fast.speedup_of == "all rounds" and fast.speedup.median == pytest.approx(3.0)
    blind = slow_throughout().time(PLAN)  # its own probes alone: steady, and stopped at the target
    assert blind.speedup_of == "all rounds" and blind.speedup.median == pytest.approx(4.5) and blind.seconds < 1.0
    marked = dataclasses.replace(PLAN, reference_probe=fast.fastest_probe)
    slow = slow_throughout().time(marked)
    assert slow.speedup_of == "slow-CPU rounds" and slow.seconds >= PLAN.max_seconds and slow.slow_share == 1.0
    assert [t.speedup_of for t in judged_together([blind, fast])] == ["slow-CPU rounds", "all rounds"]
    timing = Timing(paired=blind, repeats=(Repeat(fast, 2), Repeat(slow, 3)))
    assert timing.slow_cpu_processes == 2 and timing.speedup is not None  # the two slow ones, counted
    assert timing.speedup.median == pytest.approx((3.0 * 4.5 * 4.5) ** (1 / 3))
    assert timing.speedup_of == "all rounds"
    everywhere_slow = Timing(paired=blind, repeats=(Repeat(slow, 3),))
    assert everywhere_slow.slow_cpu_processes == 2 and everywhere_slow.speedup_of == "slow-CPU rounds"


class TwoCpuMachine(TwoSpeedMachine):
    """Two CPUs, each switching between the two speeds every ``period`` simulated seconds, the one slow while the other
    runs at full speed; the timing thread runs on ``cpu``, moved by ``FastCpu``."""

    def __init__(self, period: float, slow: float) -> None:
        super().__init__(period, slow)
        self.cpu = 0

    def factor(self) -> float:
        return self.slow if int(self.now / self.period + self.cpu) % 2 else 1.0

    def time_following(self, plan: PairedPlan) -> Any:
        from pytest_inductor_templates.cpu_speed import loop_ms
        from pytest_inductor_templates.timing.fast_cpu import FastCpu
        from pytest_inductor_templates.timing.paired import PROBE_LOOP

        def move(cpu: int) -> None:
            self.cpu = cpu

        follow = FastCpu(lambda: loop_ms(PROBE_LOOP, self.clock), move, [0, 1])
        timing = time_paired(self.side("eager"), self.side("compiled"), self.time_block, plan, self.clock, follow)
        return timing, follow


def test_rounds_that_follow_a_cpu_at_full_speed_all_run_at_full_speed() -> None:
    """Where each CPU switches speed on its own, a timing that stays on one meets both speeds (a speedup of 3x at full
    speed, 4.5x at the slow one, in a share that moves from process to process); one that follows the full speed
    moves before a round whose CPU reads slow, and every round runs at full speed."""
    plan = PairedPlan(block_seconds=0.001, min_rounds=10, max_seconds=1.0, target=0.0, min_seconds=8.0)
    staying = TwoCpuMachine(period=2.0, slow=1.5).time(plan)
    assert set(map(round, ratios(staying.eager, staying.compiled), [1] * staying.rounds)) == {3.0, 4.5}
    assert staying.cpu_moves is None
    following, follow = TwoCpuMachine(period=2.0, slow=1.5).time_following(plan)
    assert following.seconds >= 8.0 and following.cpu_moves == follow.moves >= 3  # 8 s: the state changed 4 times
    rounded = list(map(round, ratios(following.eager, following.compiled), [1] * following.rounds))
    assert rounded.count(4.5) <= following.cpu_moves and set(rounded) <= {3.0, 4.5}  # a switch inside a round, at most
    assert following.slow_share == 0.0 and following.speedup.median == pytest.approx(3.0)
    assert following.speedup.half_width < 0.01 < staying.all_rounds.half_width


def test_following_skips_a_cpu_it_cannot_move_to() -> None:
    """A CPU that refuses the thread (offline, or no longer the process's) is left out of the survey; the round
    runs on the fastest CPU that took it."""
    from pytest_inductor_templates.timing.fast_cpu import FastCpu

    speeds = {0: 0.2, 1: 0.1, 2: 0.3}
    on: list[int] = [0]

    def move(cpu: int) -> None:
        if cpu == 1:
            raise OSError(22, "Invalid argument")
        on[0] = cpu

    follow = FastCpu(lambda: speeds[on[0]], move, [0, 1, 2])
    assert follow.settle(None) == 0.2 and follow.current == 0 and on == [0]


def test_following_judges_against_the_mark_not_one_lucky_probe() -> None:
    """A CPU is left for a survey only where it reads slower than 1.3x the mark it is given (the timing's lower
    decile or the host's mark), not than the single fastest probe the survey happened to see."""
    from pytest_inductor_templates.timing.fast_cpu import FastCpu

    readings = iter([0.2, 0.05, 0.1, 0.1])  # the first round's own probe, a lucky 0.05 on CPU 0, then CPU 1
    on: list[int] = [0]

    def move(cpu: int) -> None:
        on[0] = cpu

    follow = FastCpu(lambda: next(readings), move, [0, 1])
    assert follow.settle(None) == 0.05 and follow.current == 0 and follow.surveys == 1
    assert follow.settle(0.09) == 0.1 and follow.surveys == 1  # within 1.3x the mark 0.09: it stays
