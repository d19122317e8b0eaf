"""Whether this machine's CPU speed holds still: a fixed pure-Python loop timed back to back for a moment.

Some virtual machines run a vCPU at two speeds about 1.7-2x apart, switching every few seconds, with nothing in
the guest showing it; another process on the same core looks the same from inside. A speedup whose eager side
waits on the CPU (one kernel launch after another) moves with that speed, so a run says, at its start, what a
short probe saw. ``benchmarks/cpu_steadiness.py`` probes for longer, per CPU.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

LOOP = 200_000  # iterations of the fixed loop: 6 to 28 ms on the H200 machines' vCPUs (two speeds on each)
SLOW = 1.3  # a loop this many times the fastest counts as slow
UNSTEADY_SHARE = 0.1  # a machine with more slow loops than this moves


def loop_ms(iterations: int = LOOP) -> float:
    """Milliseconds one run of the fixed loop takes."""
    start = time.perf_counter()
    total = 0
    for i in range(iterations):
        total += i
    return 1e3 * (time.perf_counter() - start)


def slow_share(times: list[float]) -> float:
    """The share of ``times`` more than ``SLOW`` times the fastest."""
    fastest = min(times)
    return sum(t > SLOW * fastest for t in times) / len(times)


@dataclass(frozen=True)
class Steadiness:
    """What one probe saw: how many loops it timed and the share of them that ran slow."""

    seconds: float
    loops: int
    slow: float

    @property
    def steady(self) -> bool:
        return self.slow <= UNSTEADY_SHARE

    def line(self) -> str:
        """The run header's verdict."""
        seen = f"{self.slow:.0%} of {self.loops} loops timed over {self.seconds:g} s ran over {SLOW}x the fastest"
        if self.steady:
            return f"CPU speed steady ({seen})"
        return (
            f"CPU speed moves ({seen}): speedups whose eager side waits on the CPU (launch-bound) may differ "
            "between runs; compare such runs with care"
        )

    def machine_info(self) -> dict[str, float | int]:
        return {"cpu_probe_seconds": self.seconds, "cpu_probe_loops": self.loops, "cpu_slow_share": self.slow}


def probe(seconds: float, iterations: int = LOOP) -> Steadiness:
    """Time the fixed loop back to back for ``seconds`` (at least two loops)."""
    times: list[float] = []
    end = time.perf_counter() + seconds
    while len(times) < 2 or time.perf_counter() < end:
        times.append(loop_ms(iterations))
    return Steadiness(seconds, len(times), round(slow_share(times), 3))


def unsteady_note(machine_info: dict[str, object]) -> str | None:
    """For ``report`` and ``compare``: a line where a saved run's probe saw the CPU's speed move, else None."""
    share = machine_info.get("cpu_slow_share")
    if not isinstance(share, (int, float)) or share <= UNSTEADY_SHARE:
        return None
    return (
        f"the CPU's speed moved during this run's start ({share:.0%} of its probe's loops ran over {SLOW}x the "
        "fastest): launch-bound speedups may differ from a steady machine's"
    )
