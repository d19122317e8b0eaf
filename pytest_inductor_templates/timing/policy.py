"""How this session times: intra-op threads, the speedup interval's target, the load when the session started."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..cpu_speed import Steadiness, probe
from ..settings import Settings
from .paired import DEFAULT_PRECISION
from .threads import default_threads, load_average, load_warning, usable_cpus


@dataclass(frozen=True)
class TimingPolicy:
    """The session's timing policy: intra-op threads (and the load when the session started), and the
    speedup interval's target half-width."""

    threads: int
    precision: float = DEFAULT_PRECISION
    load_at_start: float | None = None
    probe_seconds: float = 0.0  # the CPU-speed probe before timing (0: none)
    min_seconds: float = 0.0  # each compiled item's paired rounds span at least this long

    @classmethod
    def from_settings(cls, chosen: Settings, workers: int | None = None) -> TimingPolicy:
        """The options' values, else the defaults: every usable CPU (shared among pytest-xdist's workers, this
        process's peers or, in its controller, the ``workers`` it starts), +-2%."""
        threads = chosen.timing_threads or default_threads(workers)
        precision = chosen.speedup_precision or DEFAULT_PRECISION
        return cls(threads, precision, load_average(), chosen.cpu_probe, chosen.timing_min_seconds)

    @cached_property
    def steadiness(self) -> Steadiness | None:
        """What the CPU-speed probe saw, probed on first use (the run's header, where timing is on)."""
        return probe(self.probe_seconds) if self.probe_seconds > 0 else None

    def machine_info(self) -> dict[str, Any]:
        """What pytest-benchmark's ``machine_info`` gains: the timing threads, usable CPUs, load at start, and
        what the CPU-speed probe saw where the header probed."""
        info = {"timing_threads": self.threads, "usable_cpus": usable_cpus(), "load_average": self.load_at_start}
        found = self.__dict__.get("steadiness")  # never probed here: by now the timings are over
        return {**info, **found.machine_info()} if found is not None else info

    def header_lines(self, timed: bool = True) -> list[str]:
        """The timing policy's header lines; where ``timed``, after the CPU-speed probe, its verdict."""
        lines = [
            f"inductor-templates: timing: {self.threads} intra-op thread(s); speedups paired with eager, "
            f"until their 95% interval is within ±{self.precision:.1%} (within half of each compiled item's max time; "
            "pytest-benchmark's rounds take the other half)"
            + (f"; paired rounds span at least {self.min_seconds:g} s" if self.min_seconds else "")
        ]
        if warning := load_warning(self.threads, self.load_at_start, usable_cpus()):
            lines.append(f"inductor-templates: warning: {warning}")
        if timed and self.steadiness is not None:
            lines.append(f"inductor-templates: {self.steadiness.line()}")
        return lines
