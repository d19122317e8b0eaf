"""``benchmarks/gpu_scaling.py``'s reading of a lock log: where a run's span went."""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def test_the_span_is_split_by_how_many_processes_worked_at_once(tmp_path: Path) -> None:
    """An item's own process compiles alone for 6 s while nothing else works (a timing pending behind it), a repeat
    works beside it for 2 s, a timing holds 2 s with no work, and one more after the last work: the profile says so,
    second by second, and its parts add up to the span."""
    sys.path.insert(0, str(BENCHMARKS))
    import gpu_scaling

    log = tmp_path / "run.lock.log"
    log.write_text(
        "1 work - 100.0 110.0\n"  # the item's own process: build, compile, check
        "2 work - 102.0 104.0\n"  # a repeat process beside it
        "1 timing gpu 110.0 112.0\n"
        "1 pool 9 101.0 103.0\n"  # within work: not work of its own
        "2 work - 112.0 113.0\n"
        "1 timing gpu 113.0 114.0\n"  # after the last work: a timing alone
    )
    profile = gpu_scaling.busy_profile(log, own={1})
    assert profile == (
        "span 14 s; timing 3 s; work 13 s (10 s in the items' own processes); "
        "seconds by processes at work: 0: 3 | 1 (own): 8 | 1 (other): 1 | 2: 2"
    ), profile
    assert gpu_scaling.busy_profile(tmp_path / "none.log", own=set()) is None


def test_compiles_beside_timings_are_summed_with_their_time_during_a_timing(tmp_path: Path) -> None:
    """A compile that left the work group (``compile``) for 5 s, 2 s of which a timing ran: the profile adds both."""
    sys.path.insert(0, str(BENCHMARKS))
    import gpu_scaling

    log = tmp_path / "run.lock.log"
    log.write_text(
        "1 work - 100.0 101.0\n"  # tracing
        "1 compile - 101.0 106.0\n"  # code generation, beside the other process's timing
        "2 timing gpu 104.0 106.5\n"
        "1 work - 106.5 107.0\n"  # the first run, after the timing
    )
    profile = gpu_scaling.busy_profile(log, own={1})
    assert profile is not None and profile.endswith(
        "; compiles beside timings (--inductor-compile-beside-timing) 5 s, 2 s of it during a timing"
    ), profile
