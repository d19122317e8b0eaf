"""How this session times: intra-op threads, the CPU items' clock, the speedup interval's target, the load when the
session started."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..cpu_speed import Steadiness, probe
from ..settings import Settings
from ..tables import timings_text
from .measure import CPU_MAX_SECONDS, CUDA_MAX_SECONDS, CUDA_MIN_SECONDS, LAUNCH_BOUND_PRECISION
from .paired import DEFAULT_PRECISION
from .processes import loads_for, most_processes_for, processes_for
from .threads import default_threads, load_average, load_warning, usable_cpus


@dataclass(frozen=True)
class TimingPolicy:
    """The session's timing policy: intra-op threads (and the load when the session started), the speedup
    interval's target half-width and the paired rounds' least span (None: the defaults), and whether CPU items are
    timed by the process's CPU time (one timing thread and no timer chosen)."""

    threads: int
    precision: float | None = None
    load_at_start: float | None = None
    probe_seconds: float = 0.0  # the CPU-speed probe before timing (0: none)
    min_seconds: float | None = None  # each compiled item's paired rounds span at least this long
    cpu_time: bool = False  # CPU items' default timer is time.process_time
    follow_cpu: bool = False  # CUDA items' paired rounds move to a CPU at full speed (``fast_cpu``)
    processes: tuple[int, int] | None = None  # --inductor-timing-processes (first, most; None: defaults; 1 unisolated)
    loads: int | None = None  # --inductor-timing-loads (None: each device type's default)
    processes_unused: str | None = None  # --inductor-timing-processes as given where no process can repeat a timing

    @classmethod
    def from_settings(cls, chosen: Settings, workers: int | None = None, timer_chosen: bool = False) -> TimingPolicy:
        """The options' values, else the defaults: this process's share of the usable CPUs (shared among
        pytest-xdist's workers, this process's peers or, in its controller, the ``workers`` it starts; one thread
        on a share of at most two CPUs), +-2% (4% launch-bound). With one timing thread and no ``timer_chosen``
        (``--benchmark-timer``), CPU items are timed by the process's CPU time: a shared CPU's waits stay out."""
        threads = chosen.timing_threads or default_threads(workers)
        cpu_time = threads == 1 and not timer_chosen
        unused = not chosen.isolated and (chosen.timing_processes or (1, 1))[1] > 1  # no other process to repeat in
        return cls(
            threads,
            precision=chosen.speedup_precision,
            load_at_start=load_average(),
            probe_seconds=chosen.cpu_probe,
            min_seconds=chosen.timing_min_seconds,
            cpu_time=cpu_time,
            follow_cpu=chosen.timing_follow_cpu,
            processes=chosen.timing_processes if chosen.isolated else (1, 1),
            loads=chosen.timing_loads,
            processes_unused=chosen.value("inductor_timing_processes") if unused else None,
        )

    @cached_property
    def steadiness(self) -> Steadiness | None:
        """What the CPU-speed probe saw, probed on first use (the run's header, where timing is on)."""
        return probe(self.probe_seconds) if self.probe_seconds > 0 else None

    def machine_info(self) -> dict[str, Any]:
        """What pytest-benchmark's ``machine_info`` gains: the timing threads, usable CPUs, load at start, the CPU
        items' clock, and what the CPU-speed probe saw where the header probed."""
        info = {
            "timing_threads": self.threads,
            "usable_cpus": usable_cpus(),
            "load_average": self.load_at_start,
            "cpu_timer": "time.process_time" if self.cpu_time else None,
        }
        found = self.__dict__.get("steadiness")  # never probed here: by now the timings are over
        info = {k: v for k, v in info.items() if v is not None or k == "load_average"}
        return {**info, **found.machine_info()} if found is not None else info

    def _target(self) -> str:
        if self.precision is not None:
            return f"±{self.precision:.1%}"
        return f"±{DEFAULT_PRECISION:.0%} (±{LAUNCH_BOUND_PRECISION:.0%} launch-bound on CUDA)"

    def _span(self) -> str:
        if self.min_seconds is not None:
            return f"paired rounds span at least {self.min_seconds:g} s, within each compiled item's max time"
        return (
            f"paired rounds span {CUDA_MIN_SECONDS:g}-{CUDA_MAX_SECONDS:g} s on CUDA and up to {CPU_MAX_SECONDS:g} s "
            "on the CPU (the max time, if longer); their compiled blocks are the item's pytest-benchmark rounds"
        )

    def _repeats(self) -> str:
        """How often each compiled sample item is timed (a user's ``inductor_benchmark`` test: once): ``each compiled
        sample item timed in 8 processes on CUDA (the band from the spread between them), once on the CPU``, with
        ``N where their band is wider than its target`` where ``--inductor-timing-processes`` asks for more after
        the first; and where ``--inductor-timing-processes`` cannot be had (unisolated), that it is not."""

        def timed(device: str, where: str = "") -> str:
            processes, most = processes_for(self.processes, device), most_processes_for(self.processes, device)
            text = timings_text(processes, loads_for(self.loads, device, processes)) + where
            if text.startswith("once"):
                return text
            more = f", {most} where their band is wider than its target" if most > processes else ""
            return f"{text}{more} (the band from the spread between them)"

        cuda, cpu = timed("cuda"), timed("cpu")
        text = cuda if cuda == cpu else f"{timed('cuda', ' on CUDA')}, {timed('cpu', ' on the CPU')}"
        if self.processes_unused is not None:
            text += (
                f"; --inductor-timing-processes={self.processes_unused} needs --inductor-isolation=process (no other "
                "process repeats a timing here)"
            )
        return f"each compiled sample item timed {text}"

    def header_lines(self, timed: bool = True) -> list[str]:
        """The timing policy's header lines; where ``timed``, after the CPU-speed probe, its verdict."""
        clock = "; CPU items timed by the process's CPU time (time.process_time)" if self.cpu_time else ""
        clock += (
            "; CUDA rounds follow a CPU at full speed (where the thread may move: Linux, 2+ CPUs)"
            if self.follow_cpu
            else ""
        )
        lines = [
            f"inductor-templates: timing: {self.threads} intra-op thread(s){clock}; speedups paired with eager, "
            f"until their 95% interval is within {self._target()}; {self._span()}; {self._repeats()}"
        ]
        if warning := load_warning(self.threads, self.load_at_start, usable_cpus(), self.cpu_time):
            lines.append(f"inductor-templates: warning: {warning}")
        if timed and self.steadiness is not None:
            lines.append(f"inductor-templates: {self.steadiness.line()}")
        return lines
