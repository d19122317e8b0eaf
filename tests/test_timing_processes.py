"""A speedup over several timings (timing.processes): the band from the spread between them, with planted per-process
and per-load offsets; and real runs whose compiled item is timed in three worker processes, and in three loads."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from graphnet_tree import fault_model, write_fault_sample
from inner_runs import run_pytest_warm

from conftest import FAST, QUIET
from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.student import band_units
from pytest_inductor_templates.timing.measure import Timing, TimingPlan
from pytest_inductor_templates.timing.paired import Interval, PairedPlan, time_paired
from pytest_inductor_templates.timing.processes import (
    Repeat,
    across_processes,
    loads_for,
    most_processes_for,
    processes_for,
)
from pytest_inductor_templates.timing.rounds import RoundsPlan

EAGER_SECONDS, SPEEDUP = 1e-3, 1.25
PLAN = PairedPlan(block_seconds=1e-3, min_rounds=40, max_seconds=0.0, target=0.02)


def one_process(offset: float, seed: int) -> Interval:
    """A real paired timing (time_paired's rounds, stop rule and interval) of a process whose compiled calls run
    ``offset`` times slower than the true speedup says, each block with 0.3% noise: what one process measures."""
    noise = random.Random(seed)
    ticks = iter(range(10**9))

    def clock() -> float:  # every CPU-speed probe alike: all rounds at full speed
        return next(ticks) * 1e-6

    def block(run: Callable[[], Any], iterations: int) -> tuple[float, float | None]:
        per_call = EAGER_SECONDS if run() == "eager" else EAGER_SECONDS / SPEEDUP * offset
        return per_call * iterations * (1 + noise.gauss(0, 0.003)), None

    return time_paired(lambda: "eager", lambda: "compiled", block, PLAN, clock).speedup


def test_the_band_covers_a_repeat_that_one_process_interval_does_not() -> None:
    """Three processes with planted offsets (0%, +4%, -3%): each process's own interval is narrow and misses the
    others' medians (rounds do not see a process's offset); the band over them is wider than each and holds a
    fourth process within the offsets' range."""
    processes = [one_process(offset, seed) for seed, offset in enumerate((1.0, 1.04, 0.97))]
    first = processes[0]
    assert any(not first.low <= other.median <= first.high for other in processes[1:])
    band = across_processes(processes)
    assert all(band.half_width > p.half_width for p in processes)
    assert math.isclose(band.median, math.exp(sum(math.log(p.median) for p in processes) / 3))
    repeat = one_process(1.01, seed=7)
    assert band.low <= repeat.median <= band.high
    assert not first.low <= repeat.median <= first.high

    assert across_processes(processes[:1]) == first  # one process: its own interval


def test_loads_share_their_process_s_offset_so_the_band_over_processes_is_over_their_means() -> None:
    """Three processes (offsets 0%, +4%, -3%) of three loads each, the loads of a process agreeing (their rounds'
    noise alone): t over the nine timings as if each were a process of its own is narrow and misses a repeat whose
    process met the -3% offset; the band over the processes' means (t with 2 degrees of freedom) holds it, centred
    on the geometric mean of those means. A Timing numbers its timings' processes from its loads (each process's
    load 0 starts it)."""
    offsets = (1.0, 1.04, 0.97)
    timings = [one_process(offset, seed=10 * p + load) for p, offset in enumerate(offsets) for load in range(3)]
    processes = [p for p in range(3) for _ in range(3)]
    as_if_apart, band = across_processes(timings), across_processes(timings, processes)
    repeat = one_process(0.97, seed=99)
    assert not as_if_apart.low <= repeat.median <= as_if_apart.high, (as_if_apart, repeat)
    assert band.low <= repeat.median <= band.high, (band, repeat)
    means = [statistics.fmean(math.log(t.median) for t in timings[3 * p : 3 * p + 3]) for p in range(3)]
    assert math.isclose(math.log(band.median), statistics.fmean(means))
    assert math.isclose(math.log(band.high / band.median), 4.303 * statistics.stdev(means) / math.sqrt(3), rel_tol=1e-3)
    assert across_processes(timings[:3], [0, 0, 0]) == across_processes(timings[:3])  # one process: its loads
    uneven = across_processes(timings[:5], [0, 0, 0, 1, 1])  # a process that timed fewer loads counts as one
    first, second = statistics.fmean(means[:1]), statistics.fmean(math.log(t.median) for t in timings[3:5])
    assert math.isclose(math.log(uneven.median), (first + second) / 2)

    def repeated(load: int) -> Repeat:
        return Repeat(cast(Any, None), pid=1, load=load)

    timing = Timing(repeats=tuple(repeated(load) for load in (1, 2, 0, 1, 2, 0)))
    assert timing.process_of == [0, 0, 0, 1, 1, 1, 2]


def test_processes_that_agree_give_a_band_as_narrow_as_their_spread_whatever_their_own_widths() -> None:
    """Eight processes whose medians agree within 1% but whose own intervals (few rounds each) are ±20% wide: the
    band is over the medians alone (their 20%-trimmed mean: Student's t over the six kept, of Yuen's standard error
    with the farthest each side set to its neighbour). Each median already carries its rounds' noise, so the
    processes' own widths are not added on top (they would make it about ±7%)."""
    medians = [1.20, 1.21, 1.19, 1.205, 1.195, 1.20, 1.21, 1.19]
    band = across_processes([Interval(m, m / 1.2, m * 1.2) for m in medians])
    logs = sorted(math.log(m) for m in medians)
    winsorized = [logs[1], *logs[1:7], logs[6]]
    squares = sum((x - statistics.fmean(winsorized)) ** 2 for x in winsorized)
    spread = 2.571 * math.sqrt(squares / (6 * 5))  # t with 5 degrees of freedom
    assert math.isclose(math.log(band.median), statistics.fmean(logs[1:7]))
    assert math.isclose(math.log(band.high / band.median), spread)
    assert math.isclose(math.log(band.median / band.low), spread)
    assert band.half_width < 0.01


def test_one_process_far_from_seven_that_agree_widens_their_band_no_more_than_their_spread() -> None:
    """Seven processes within ±1.5% of 1.5x and one a third slower (one process's offset, as an H100 showed on
    PoolFormer): the plain mean's band over the eight would be about ±12% and pulled down 5%; the 20%-trimmed mean
    leaves the outlier out of the centre and, winsorized, out of the spread: within ±2%, around the seven. Up to five
    values nothing is trimmed (of five, three kept would give a wider band than four): the mean and its t band."""
    seven = [1.50, 1.52, 1.48, 1.51, 1.49, 1.515, 1.485]
    band = across_processes([Interval(m, m, m) for m in [*seven, 1.0]])
    logs = [math.log(m) for m in [*seven, 1.0]]
    plain = 2.365 * statistics.stdev(logs) / math.sqrt(8)
    assert plain > 0.1 and band.half_width < 0.02, (plain, band)
    assert min(seven) < band.median < max(seven)
    five = [1.50, 1.52, 1.48, 1.51, 1.0]
    small = across_processes([Interval(m, m, m) for m in five])
    logs5 = [math.log(m) for m in five]
    assert math.isclose(math.log(small.median), statistics.fmean(logs5))
    assert math.isclose(math.log(small.high / small.median), 2.776 * statistics.stdev(logs5) / math.sqrt(5))
    assert (band_units(8, 1), band_units(5, 1), band_units(1, 10), band_units(1, 1)) == (6, 5, 6, 1)


def test_the_default_is_one_load_in_each_of_eight_processes_on_cuda_and_one_timing_on_the_cpu() -> None:
    """On CUDA eight timings: the first load of each of eight processes (a later load's figure can be off); where
    fewer processes time the item (none to repeat in, unisolated), at least four loads of those (two in each of
    three)."""
    assert (processes_for(None, "cuda"), processes_for(None, "cpu"), processes_for((3, 3), "cpu")) == (8, 1, 3)
    assert (most_processes_for(None, "cuda"), most_processes_for(None, "cpu"), most_processes_for((2, 5), "cpu")) == (
        8,
        1,
        5,
    )
    assert (loads_for(None, "cuda"), loads_for(None, "cpu"), loads_for(3, "cpu")) == (1, 1, 3)
    assert (loads_for(None, "cuda", 1), loads_for(None, "cuda", 3), loads_for(5, "cuda", 1)) == (4, 2, 5)


def test_processes_share_the_item_s_spans_and_each_aims_wider() -> None:
    """Five processes time a fifth of the item's spans each, and each stops at the target times root five, times
    1.96 over the t of the band over five processes (2.776): with no offset between them, that band then meets the
    item's target (the timing costs what one process did). Four processes of two loads aim by t over four means;
    eight loads of one process by t over the six their 20%-trimmed mean keeps."""
    rounds = RoundsPlan(timer=time.perf_counter, min_time=5e-3, max_time=1.0, min_rounds=5)
    one, five = TimingPlan(rounds), TimingPlan(rounds, processes=5)
    alone, shared = one.paired(cuda=True, launch_bound=True), five.paired(cuda=True, launch_bound=True)
    assert (alone.min_seconds, alone.max_seconds, alone.target) == (2.0, 4.0, 0.04)
    assert (shared.min_seconds, shared.max_seconds) == (0.4, 0.8)
    assert (
        math.isclose(shared.target, 0.04 * math.sqrt(5) * 1.959964 / 2.776) and five.target(launch_bound=True) == 0.04
    )
    four_of_two = TimingPlan(rounds, processes=4, loads=2).paired(cuda=True, launch_bound=True)
    assert math.isclose(four_of_two.target, 0.04 * math.sqrt(8) * 1.959964 / 3.182)
    eight = TimingPlan(rounds, loads=8).paired(cuda=True, launch_bound=True)
    assert math.isclose(eight.target, 0.04 * math.sqrt(8) * 1.959964 / 2.571)
    assert shared.block_seconds == alone.block_seconds and shared.min_rounds == alone.min_rounds


def test_a_record_keeps_each_process_figure_and_refuses_a_wrong_list() -> None:
    record = ItemRecord("s", "default", "cpu", "bench", process_speedups=[1.2, 1.25], process_pids=[10, 11])
    assert ItemRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    with pytest.raises(TypeError, match="process_speedups"):
        ItemRecord.from_dict({**record.to_dict(), "process_speedups": ["fast"]})


OFFSET_TOP = """
BUILDS = {builds!r}
SLOW = False


def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
"""
# the second process to build the sample (the first repeater to build: they build side by side) runs eager 20 times
# slower
OFFSET_INIT = """global SLOW
        open(BUILDS, 'a').write(str(os.getpid()) + ' ')
        seen = list(dict.fromkeys(open(BUILDS).read().split()))
        SLOW = seen.index(str(os.getpid())) == 1"""
OFFSET_FORWARD = "if not torch.compiler.is_compiling(): spin(2e-4 * (20 if SLOW else 1))"


def test_a_compiled_item_is_timed_in_loads_of_other_worker_processes_working_side_by_side(tmp_path: Path) -> None:
    """A real CPU run with --inductor-timing-processes=3-4 --inductor-timing-loads=2 (the compiled bench items alone,
    their rounds stopping early): the item's paired timing runs twice in its worker (the later load compiled again
    after a Dynamo reset, around a copy of the model as built) and twice in each of two other worker processes, whose
    work (build, compile) runs side by side (the lock log shows their work holds overlapping); the first of them to
    build is planted a 20-fold offset (its eager calls spin 20 times longer; the compiled graph leaves the spin
    out), so the band over the three is wider than its target and a fourth process times the item too. Each process
    builds the sample once (a sample that logs its builds: the model under test; the check's eager models, paired
    timing's and the loads' are copies of it as built); the record has each timing's speedup, pid and load, process
    by process, the speedup is their geometric mean with the first timing's own interval beside it, and the terminal
    says what the band is over, from its start."""
    builds = tmp_path / "builds.log"
    top = OFFSET_TOP.format(builds=str(builds))
    write_fault_sample(tmp_path / "corpus" / "logged", fault_model(init=OFFSET_INIT, forward=OFFSET_FORWARD, top=top))
    done = run_pytest_warm(
        tmp_path, "--inductor-samples=corpus", "-k", "logged and bench",
        "--inductor-template=default", "--inductor-devices=cpu", "--inductor-timing-processes=3-4",
        "--inductor-timing-loads=2", "--inductor-speedup-precision=50", "--inductor-results=run.jsonl",
        "--inductor-lock-log=locks.log", "-p", "no:randomly", *FAST, *QUIET,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    records = [
        json.loads(line)["record"] for line in (tmp_path / "run.jsonl").read_text().splitlines() if "record" in line
    ]
    bench = next(r for r in records if r["kind"] == "bench" and r["template"] == "default" and "logged" in r["sample"])
    built = [int(pid) for pid in builds.read_text().split()]
    pids = bench["process_pids"]
    assert [built.count(pid) for pid in pids[2::2]] == [1, 1, 1], (pids, built)
    assert built.count(bench["pid"]) == 2, built  # the eager row's triple and this one, one build each
    assert (bench["timing_processes"], bench["timing_loads"], bench["process_loads"]) == (4, 2, [0, 1] * 4)
    assert pids[0] == bench["pid"] and pids[::2] == pids[1::2] and len(set(pids)) == 4, pids
    speedups = bench["process_speedups"]
    slow = list(dict.fromkeys(built))[1]  # the first repeater to build (they build side by side): the planted offset
    assert slow in pids[2:6], (slow, pids)  # one of the first two repeaters, whichever built first
    planted = [s for s, pid in zip(speedups, pids, strict=True) if pid == slow]
    assert min(planted) > 5 * max(s for s, pid in zip(speedups, pids, strict=True) if pid != slow), speedups
    assert math.isclose(bench["speedup"], math.exp(sum(map(math.log, speedups)) / 8)), (bench["speedup"], speedups)
    assert bench["first_process_low"] <= speedups[0] <= bench["first_process_high"]
    assert bench["band_quantile"] == 3.182  # Student's t over the four processes' means: what compare reads back
    eager, compiled = bench["process_eager_ms"], bench["process_compiled_ms"]  # which side each timing's offset is on
    assert len(eager) == len(compiled) == 8 and math.isclose(eager[0], bench["eager_median"] * 1e3, rel_tol=1e-3)
    assert math.isclose(compiled[0], bench["compiled_median"] * 1e3, rel_tol=1e-3)  # each side where it belongs
    assert all(0.3 < e / c / s < 3 for e, c, s in zip(eager, compiled, speedups, strict=True)), (eager, speedups)
    assert bench["speedup_low"] < bench["speedup"] < bench["speedup_high"]
    assert "timed in 4 processes of 2 loads (--inductor-timing-loads, --inductor-timing-processes)" in done.stdout
    header = "; each compiled sample item timed in 3 processes of 2 loads, 4 where their band is wider than its target"
    assert header + " (the band from the spread" in done.stdout
    holds: dict[int, list[tuple[float, float]]] = {}
    order: dict[int, list[tuple[float, str]]] = {}
    for line in (tmp_path / "locks.log").read_text().splitlines():
        pid, group, _, start, end = line.split()
        order.setdefault(int(pid), []).append((float(start), group))
        if group == "work":
            holds.setdefault(int(pid), []).append((float(start), float(end)))
    first, second = (holds[pid][1:] for pid in pids[2:6:2])  # each repeater's first hold: its start (importing torch)
    assert any(a < d and c < b for a, b in first for c, d in second), holds  # the repeats worked at the same time
    for pid in pids[2::2]:  # one work hold before each load's timing: the copy, its compile and the eager model
        groups = "".join(group[0] for _, group in sorted(order[pid]) if group in ("work", "timing"))
        assert "twt" in groups and "twwt" not in groups, (pid, groups)


class Repeating:
    """A triple whose repeat processes give planted speedups (``speedups[1 + n]`` for the n-th repeater), those in
    ``lost`` giving nothing (a lost worker, a failed compile)."""

    def __init__(self, speedups: list[float], lost: frozenset[int] = frozenset()) -> None:
        self.speedups, self.lost, self.asked = speedups, lost, []

    def repeat(self, plan: TimingPlan, count: int, limit: object = None, after: int = 0) -> tuple[Repeat, ...]:
        self.asked.append((after, count))
        workers = [
            n for n in range(after, after + count) if n + 1 < len(self.speedups)
        ]  # as many repeaters as there are
        return tuple(Repeat(planted(self.speedups[1 + n]), pid=2 + n) for n in workers if n not in self.lost)


def planted(speedup: float) -> Any:
    """A paired timing whose speedup is ``speedup``, measured exactly."""
    return time_paired(
        lambda: "eager", lambda: "compiled",
        lambda run, iterations: ((1e-3 if run() == "eager" else 1e-3 / speedup) * iterations, None),
        PLAN, iter(range(10**9)).__next__,
    )  # fmt: skip


AGREE, SPREAD = [1.25, 1.26, 1.24, 1.25], [1.25, 1.26, 1.10, 1.40]
MORE = [1.25, 1.26, 1.24, 1.25, 1.25, 1.26]


@pytest.mark.parametrize(
    ("speedups", "first", "lost", "asked", "timed"),
    [
        ([*AGREE, 9, 9], 4, (), [(0, 3)], [*AGREE]),  # within the target: three others only
        ([*SPREAD, *MORE[:4]], 4, (), [(0, 3), (3, 4)], [*SPREAD, *MORE[:4]]),  # wider: four more
        ([*SPREAD, *MORE], 4, (1,), [(0, 3), (3, 5)], [1.25, 1.26, 1.40, *MORE[:5]]),  # a lost repeat made up for
        ([1.25, 2.0, *MORE[:6]], 1, (), [(0, 0), (0, 7)], [1.25, 2.0, *MORE[:6]]),  # 1-8: one first, then the rest
    ],
)
def test_more_processes_time_an_item_only_while_its_band_is_wider_than_its_target(
    speedups: list[float], first: int, lost: tuple[int, ...], asked: list[tuple[int, int]], timed: list[float]
) -> None:
    """With ``first`` processes first and at most 8: a compiled item whose first four agree within its target is
    repeated in three others only; one whose four spread past it, in the processes after those until eight have
    timed it (a repeat that gave nothing made up for by one more); with one first (``1-8``), in seven more once its
    one timing's interval is wider than the target."""
    from pytest_inductor_templates.items.sample_items import repeated

    triple = Repeating(speedups, frozenset(lost))
    own = planted(speedups[0])
    if first == 1:  # a lone timing's band is its own interval: make it wide
        own = dataclasses.replace(
            own, all_rounds=Interval(1.25, 1.0, 1.5), eager=own.eager[:3], compiled=own.compiled[:3]
        )
    timing = repeated(
        triple, Timing(paired=own, target=0.04), TimingPlan(None, processes=first), first, 8, cast(Any, None)
    )
    assert triple.asked == asked
    assert [round(t.speedup.median, 2) for t in timing.processes] == timed


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Loaded:
    """A model under test whose every load (compile) runs ``offset`` times slower than the true speedup says."""

    def __init__(self, offset: float) -> None:
        from pytest_inductor_templates.compile.compiled import CompileStats

        self.offset = offset
        self.stats = CompileStats()

    def __call__(self) -> str:
        spin(200e-6 / SPEEDUP * self.offset)
        return "compiled"

    def steady(self) -> Callable[[], str]:
        return self


def timed_in_loads(reload: Callable[[], Loaded], plan: TimingPlan) -> Any:
    """``run_cell``'s result for a passed check of a ``Loaded(1.0)`` model timed by ``plan`` against an eager call of
    200 us, each later load from ``reload``."""
    from pytest_inductor_templates.check.inputs import Inputs
    from pytest_inductor_templates.check.result import CheckResult
    from pytest_inductor_templates.engine.cell import CheckPolicy, Subject, Verdict, run_cell
    from pytest_inductor_templates.machine import CPU
    from pytest_inductor_templates.outcomes import Outcome
    from pytest_inductor_templates.templates.registry import BUILTIN_TEMPLATES
    from pytest_inductor_templates.templates.selection import Selection

    def eager() -> None:
        spin(200e-6)

    default = next(t for t in BUILTIN_TEMPLATES if t.name == "default")
    subject = Subject(
        lambda: eager, Loaded(1.0), [Inputs(())], Selection(template=default), CPU,  # type: ignore[arg-type]
        check_call=lambda model, inputs: model(), timed_call=lambda model, inputs: model(), reload=reload,  # type: ignore[arg-type]
    )  # fmt: skip
    return run_cell(subject, CheckPolicy(), plan, Verdict(CheckResult(Outcome.PASS, "")))


def test_loads_sample_an_offset_each_compile_carries_and_the_band_covers_it() -> None:
    """Three loads whose compiled code carries planted offsets (1x, 4x, 0.25x: what a compile's placement makes,
    made larger than the noise of a first load's tenth of a second on a loaded 2-core machine, where its interval
    read ±28%, once 0.84-1.86x around 1.25x, and with three pytest workers on the two cores 0.61-2.58x):
    ``run_cell`` reloads the model under test for each later load, calls it as the check did, and times it; the
    band over the loads holds the offsets' spread where the first load's own interval does not."""
    offsets = iter((4.0, 0.25))
    reloads: list[Loaded] = []

    def reload() -> Loaded:
        reloads.append(Loaded(next(offsets)))
        return reloads[-1]

    plan = TimingPlan(RoundsPlan(time.perf_counter, 1e-3, 0.3, 5), precision=0.01, loads=3)
    timing = timed_in_loads(reload, plan).timing
    assert timing is not None and len(reloads) == 2
    assert [(r.load, r.pid) for r in timing.repeats] == [(1, os.getpid()), (2, os.getpid())]
    first, *later = [t.speedup for t in timing.processes]
    band = timing.speedup
    assert band is not None and band.half_width > first.half_width
    assert any(not first.low <= other.median <= first.high for other in later), (first, later)
    slowest, fastest = min(t.median for t in [first, *later]), max(t.median for t in [first, *later])
    assert slowest < band.median < fastest


def test_later_loads_stop_once_their_compiles_took_the_loads_budget(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model whose every load compiles in full (a frozen graph: Inductor's cache bypasses it) is timed in as many
    loads as fit the loads' compile budget, not all eight: here each load's compile takes 0.15 s against a budget
    of 0.25 s, so two later loads run; stderr says why the rest did not."""
    from pytest_inductor_templates.engine import cell

    class Compiling(Loaded):
        def __call__(self) -> str:
            if not self.stats.compile_seconds:  # the first call compiles
                self.stats.compile_seconds = 0.15
            return super().__call__()

    monkeypatch.setattr(cell, "LOADS_COMPILE_SECONDS", 0.25)  # the name cell.time_loads reads
    reloads: list[Compiling] = []

    def reload() -> Compiling:
        reloads.append(Compiling(1.0))
        return reloads[-1]

    plan = TimingPlan(RoundsPlan(time.perf_counter, 1e-3, 0.1, 5), precision=0.5, loads=8)
    timing = timed_in_loads(reload, plan).timing
    assert timing is not None and len(reloads) == 2 and [r.load for r in timing.repeats] == [1, 2]
    assert "3 of 8 loads timed: compiles took 0.3 s" in capsys.readouterr().err


def test_a_load_that_raises_ends_the_loads_and_keeps_the_timings_before_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A later load whose copy of the model raises (out of memory on a large model) ends the loads: the item keeps
    its check's verdict, its own timing and the loads before, and stderr says which load and why."""
    from pytest_inductor_templates.outcomes import Outcome

    reloads: list[int] = []

    def reload() -> Loaded:
        reloads.append(1)
        if len(reloads) == 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return Loaded(1.0)

    plan = TimingPlan(RoundsPlan(time.perf_counter, 1e-3, 0.1, 5), precision=0.5, loads=8)
    cell = timed_in_loads(reload, plan)
    assert cell.verdict.result.outcome is Outcome.PASS and cell.timing is not None
    assert cell.timing.paired is not None and [r.load for r in cell.timing.repeats] == [1]
    assert "load 3 not timed: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB" in capsys.readouterr().err


REPEATERS_CONFTEST = """
from pytest_inductor_templates.items.session import plugin_state


def pytest_collection_finish(session):
    triples = plugin_state(session.config).session.triples
    print("repeat workers:", len(triples.repeaters))
"""


@pytest.mark.parametrize(("options", "count"), [((), 0), (("--inductor-timing-processes=3",), 2)])
def test_a_session_on_the_cpu_keeps_no_repeat_workers_unless_asked(
    pytester: pytest.Pytester, options: tuple[str, ...], count: int
) -> None:
    """The repeat workers follow the session's devices: on the CPU one process times (none kept idle), unless
    --inductor-timing-processes asks for more."""
    pytester.makeconftest(REPEATERS_CONFTEST)
    args = ("--inductor-samples", "--inductor-devices=cpu", "--collect-only", "-q", "-s", *options)
    result = pytester.runpytest_inprocess(*args)
    result.stdout.fnmatch_lines([f"repeat workers: {count}"])


def test_a_repeat_compiles_on_every_input_set_in_the_checks_order_and_says_which_call_raised() -> None:
    """A repeat calls the compiled model as the check did, on each input set in order, so that a sample of several
    shapes ends on the graph the first process timed (the dynamic one after its second shape), not on the static
    graph of its first shape alone; a call that raises ends the repeat with its number."""
    from pytest_inductor_templates.check.inputs import Inputs
    from pytest_inductor_templates.engine.cell import Subject, compile_for_timing
    from pytest_inductor_templates.machine import CPU
    from pytest_inductor_templates.outcomes import Outcome

    seen: list[int] = []

    def call(model: Any, inputs: Inputs) -> Any:
        seen.append(inputs.args[0])
        return model(*inputs.args)

    shapes = [Inputs((8,)), Inputs((5,)), Inputs((13,))]
    subject = Subject(lambda: None, lambda batch: batch, shapes, None, CPU, check_call=call)  # type: ignore[arg-type]
    verdict = compile_for_timing(subject)
    assert verdict.result.outcome is Outcome.PASS and seen == [8, 5, 13]

    def fails_on_five(batch: int) -> int:
        if batch == 5:
            raise RuntimeError("no kernel for batch 5")
        return batch

    failed = compile_for_timing(Subject(lambda: None, fails_on_five, shapes, None, CPU, check_call=call))  # type: ignore[arg-type]
    assert failed.result.outcome is Outcome.RUNTIME_FAIL
    assert failed.result.reason == "its call 2 raised RuntimeError: no kernel for batch 5"


def test_the_hosts_fastest_probe_is_kept_in_the_sessions_lock_folder(tmp_path: Path) -> None:
    """Every process of a session on the host reads one mark of full speed: the fastest CPU-speed probe offered so
    far, in the shared lock folder; a process sharing no folder keeps none."""
    from pytest_inductor_templates.timing import host_lock, probe_reference

    if not host_lock.available():
        pytest.skip("no fcntl.flock here: nothing shares a lock folder")
    before = host_lock._active
    try:
        host_lock.use(None)
        probe_reference.offer(0.1)
        assert probe_reference.fastest() is None
        host_lock.use(host_lock.Sharing(str(tmp_path)))
        assert probe_reference.fastest() is None
        for probe in (0.12, 0.2, 0.09, 0.15):
            probe_reference.offer(probe)
        assert probe_reference.fastest() == 0.09 == float((tmp_path / probe_reference.FILE).read_text())
        assert sorted(p.name for p in tmp_path.iterdir()) == [probe_reference.FILE, f"{probe_reference.FILE}.lock"]
    finally:
        host_lock._active = before


def test_a_timing_starts_from_the_hosts_mark_and_leaves_its_own(tmp_path: Path) -> None:
    """``measure`` judges its rounds against the mark the session's earlier timings left in the lock folder (one no
    CPU reaches: every round slow), and leaves its own mark where there is none yet."""
    from pytest_inductor_templates.timing import host_lock, probe_reference
    from pytest_inductor_templates.timing.measure import measure

    if not host_lock.available():
        pytest.skip("no fcntl.flock here: nothing shares a lock folder")
    plan = TimingPlan(RoundsPlan(time.perf_counter, 1e-5, 0.05, 10), precision=0.5)
    before = host_lock._active
    try:
        host_lock.use(host_lock.Sharing(str(tmp_path)))
        fresh = measure(lambda: sum(range(200)), lambda: sum(range(400)), False, plan).paired
        assert fresh is not None and fresh.reference_probe is None
        assert probe_reference.fastest() == fresh.mark
        probe_reference.offer(1e-9)  # a mark no CPU reaches: every round of the next timing is slow against it
        marked = measure(lambda: sum(range(200)), lambda: sum(range(400)), False, plan).paired
        assert marked is not None and marked.reference_probe == 1e-9 and marked.speedup_of == "slow-CPU rounds"
    finally:
        host_lock._active = before


def test_a_repeat_only_compiles_unless_the_cache_is_fresh_then_it_checks_its_own_code() -> None:
    """A repeat compiles from the cache the item's process filled (the same code, checked there), so it stands in
    for the check; under --inductor-fresh-cache it compiled code of its own, so it checks it as an item would."""
    from pytest_inductor_templates.engine.cell import CheckPolicy
    from pytest_inductor_templates.engine.triples import SampleCase, TripleCache
    from pytest_inductor_templates.machine import CPU
    from pytest_inductor_templates.outcomes import Outcome
    from pytest_inductor_templates.samples.builtin import builtin_sample
    from pytest_inductor_templates.templates.matrix import Case
    from pytest_inductor_templates.templates.registry import BUILTIN_TEMPLATES
    from pytest_inductor_templates.templates.selection import Selection

    default = next(t for t in BUILTIN_TEMPLATES if t.name == "default")
    case = SampleCase(builtin_sample("embedding"), Case(Selection(template=default), CPU), "bench")
    verdicts = {}
    for fresh in (False, True):
        cache = TripleCache(policy=CheckPolicy(fresh_cache=fresh))
        verdicts[fresh] = cache.get(case).result(repeat=True).verdict.result
        cache.release()
    stand_in, checked = verdicts[False], verdicts[True]
    assert stand_in.outcome is Outcome.PASS and stand_in.reason == "a timing repeat: compiled, not checked"
    assert checked.outcome is Outcome.PASS and checked.rule == "first comparison"


@pytest.mark.parametrize(
    ("host_shares", "floor", "target"),
    [((0.3, 0.7), 0.02, 0.04), ((0.1, 0.2), 0.01, 0.02), (None, 0.0, 0.02), ((0.3, 0.7), 0.02, 0.01)],
)
def test_on_cuda_a_band_is_never_narrower_than_a_repeat_of_the_run_moves(
    host_shares: tuple[float, float] | None, floor: float, target: float
) -> None:
    """Eight processes that agree within 0.1% (as five to eight did on an H100 where a repeat of the run then moved
    the speedup by 1.4-2.3%): on CUDA the band is at least ±2% launch-bound, ±1% bound by the GPU, around the same
    centre; on the CPU (no launch shares) it is their spread alone. Whether the item is unstable is judged on the
    spread, not the floor: a target of ±1% (``--inductor-speedup-precision 1``) under a ±2% floor is met."""
    speedups = [1.25, 1.251, 1.2505, 1.2495, 1.25, 1.2502, 1.2498, 1.2501]
    timings = [planted(s) for s in speedups]
    timing = Timing(paired=timings[0], host_shares=host_shares, target=target)
    timing.repeats = tuple(Repeat(t, pid=2 + n) for n, t in enumerate(timings[1:]))
    spread = across_processes([t.speedup for t in timings])
    band = timing.speedup
    assert band is not None and math.isclose(band.median, spread.median)
    assert spread.half_width < 0.002
    assert timing.spread == spread
    assert math.isclose(math.log(band.high / band.median), max(floor, math.log(spread.high / spread.median)))
    assert math.isclose(math.log(band.median / band.low), max(floor, math.log(spread.median / spread.low)))
    assert not timing.unstable


def test_the_floor_widens_each_side_of_a_lopsided_band() -> None:
    """A lone timing's interval can be lopsided (-0.25%, +3%): each side is widened to the floor on its own."""
    from pytest_inductor_templates.timing.processes import widened

    band = widened(Interval(1.0, math.exp(-0.0025), math.exp(0.03)), 0.02)
    assert math.isclose(band.low, math.exp(-0.02)) and math.isclose(band.high, math.exp(0.03))
