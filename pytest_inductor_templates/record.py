"""One record per matrix item: what ran, how it ended and why, what the template did, what it cost.

The plugin fills an ``ItemRecord`` once per item and every output reads it: the test report's
``user_properties`` (and so JUnit XML and xdist's controller), the terminal tables, the benchmark
JSON (each entry's ``extra_info`` and the ``inductor_templates`` section), and the command's
``report``, ``compare`` and ``merge``. One encoding (``to_dict``/``from_dict``) serves them all.
Neither torch nor pytest is imported here.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .outcomes import FAILURES, Outcome

# ``inductor_templates.format`` of the saved JSON. 3: paired speedups with intervals, outcomes crashed and timeout,
# check_rule, pid/rss_mib/cuda_mib; 4: a compiled item's rounds are its paired compiled blocks, with its speedup's
# target, launch shares and timing seconds; 5: speedups over several processes (timing_processes, process_speedups,
# process_pids, first_process_*; later slow_cpu_processes, process_probe_ms, full_speed_mark_ms, diagnosis_deferred,
# cpu_moves, timing_loads, process_loads, process_eager_ms, process_compiled_ms, band_quantile, process_counted:
# written by 4febb4a-bb8774e under an older rule, and again now). Format 3 and 4 files still read. Readers refuse
# others.
FORMAT = 5
READS = (3, 4, 5)
SECTION = "inductor_templates"  # the plugin's top-level key in pytest-benchmark's JSON
PROPERTY_PREFIX = "inductor_"  # a record field ``outcome`` is the report property ``inductor_outcome``
EAGER = "eager"  # the uncompiled reference row's template
UNCACHED = "uncached"  # the cache state of a compile that consulted no compile cache (a backend other than Inductor)


@dataclass
class ItemRecord:
    """Everything known about one item of the sample x template x device matrix, or of a user test."""

    # what ran
    sample: str  # the sample id; for a user test, its node id without the matrix's parameters
    template: str  # the column label: a template, ``mode-MODE`` or ``options-HASH``
    device: str  # ``cpu``, ``cuda:0``
    kind: str  # ``check`` or ``bench``
    source: str = "sample"  # ``sample``, or ``test`` for a user test's inductor_check / inductor_benchmark
    nodeid: str = ""
    gpu: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # the column's effective Inductor settings
    fallback: str | None = None  # what runs instead of the template's intent here (tma below sm 9.0)
    sample_weights: str | None = None  # a GraphNet sample's weights: ``parameters`` or ``inputs`` (forward arguments)
    tf32: str | None = None  # ``on`` or ``off`` under --inductor-tf32; None: torch's flags left as they were
    # how it ended
    outcome: Outcome | None = None
    reason: str = ""  # one line
    tolerance_level: int | None = None  # tightest GraphNet tolerance level t at which every output passes
    check_rule: str | None = None  # what decided the comparison: ``first comparison``, ``second opinion``, ...
    fp64_second_opinion: str | None = None  # each output the float64 second opinion cleared, with its figures
    uncompared: str | None = None  # a passing item's floating outputs that eager left NaN or Inf everywhere
    # what the template did
    effect: str | None = None  # ``effect``, ``no effect``, ``not observed``; None when nothing to judge
    effect_evidence: str = ""
    # where and why a failing check fails (--inductor-diagnose)
    diagnosis: str | None = None  # one line: stage, setting, first diverging operator, numerics or miscompile
    diagnosis_stage: str | None = None  # the first failing stage and, inside Inductor, the subsystem and its pass
    diagnosis_setting: str | None = None  # the smallest subset of the template's settings that still fails
    diagnosis_op: str | None = None  # the first diverging aten operator (and model.py line), or ``not localised``
    diagnosis_kind: str | None = None  # ``numerics`` or ``miscompile``, with ``diagnosis_figures``
    diagnosis_figures: str | None = None  # how far compiled and eager are from float64
    repro: str | None = None  # the standalone repro.py of this item
    diagnosis_seconds: float | None = None  # what the diagnosis took
    diagnosis_draws: int | None = None  # models and input sets the diagnosis drew (built from the sample or test)
    diagnosis_eager_runs: int | None = None  # calls of an eager model it made (float64 runs included)
    diagnosis_compiles: int | None = None  # models or graphs it compiled
    diagnosis_deferred: bool | None = None  # diagnosed after the run's items, cheapest first (a run budget)
    # what compiling cost
    compile_seconds: float | None = None
    compile_cache: str | None = None  # ``cold``, ``warm`` or ``mixed``: the compile caches' state; None: none consulted
    compile_cache_lookups: dict[str, int] = field(default_factory=dict)  # the lookups behind it, by torch's counter
    graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    cudagraph_skips: int | None = None
    # timing (bench items)
    median: float | None = None  # seconds per call, pytest-benchmark's median
    warmup_calls: int | None = None
    timer: str | None = None
    threads: int | None = None  # torch's intra-op threads while timing
    device_time_ms: float | None = None
    # paired timing (compiled bench items that passed): eager and compiled alternately, round by round
    eager_median: float | None = None  # seconds per call, median of the paired eager blocks
    compiled_median: float | None = None  # seconds per call, median of the paired compiled blocks
    eager_device_time_ms: float | None = None
    paired_rounds: int | None = None
    speedup: float | None = None  # median of the per-round eager/compiled ratios; None unless the item passed
    speedup_low: float | None = None  # its 95% confidence interval (timing.paired)
    speedup_high: float | None = None
    unstable: bool | None = None  # the interval stayed wider than --inductor-speedup-precision
    device_speedup: float | None = None  # median of the per-round ratios of CUDA device time
    paired_seconds: float | None = None  # the wall time the paired rounds spanned
    cpu_slow_rounds: float | None = None  # share of paired rounds whose CPU-speed probe ran over 1.3x the fastest known
    full_speed_speedup: float | None = None  # median ratio over the full-speed rounds (at least 10 of them)
    speedup_target: float | None = None  # the half-width the paired rounds stopped at (unstable: never reached)
    speedup_of: str | None = None  # which rounds ``speedup`` is over: full-speed, all or slow-CPU rounds
    all_rounds_speedup: float | None = None  # the median ratio over every round, beside a full-speed ``speedup``
    timing_processes: int | None = None  # processes the paired timing ran in (the item's worker and its repeats)
    timing_loads: int | None = None  # loads each process timed (its first compile, then compiles from the cache)
    # each timing's speedup, the item's own first (2 or more timings), process by process, load by load
    process_speedups: list[float] | None = None
    process_pids: list[int] | None = None  # the processes those speedups were timed in, in that order
    process_loads: list[int] | None = None  # ... and the load of its process each was (0: the process's first)
    slow_cpu_processes: int | None = None  # of those, the ones with too few full-speed rounds (all their rounds)
    process_counted: list[bool] | None = None  # ... whether the band is over it (on CUDA: its CPU at full speed)
    process_probe_ms: list[float] | None = None  # each process's median CPU-speed probe (ms), the item's own first
    process_eager_ms: list[float] | None = None  # each timing's eager median (ms per call), in process_speedups' order
    process_compiled_ms: list[float] | None = None  # ... and compiled median: which side a timing's offset is on
    full_speed_mark_ms: float | None = None  # the mark of full speed the processes' rounds were judged against (ms)
    cpu_moves: list[int] | None = None  # each process's rounds that moved to a CPU at full speed (following it)
    band_quantile: float | None = None  # the Student's t the band over several timings was made with (compare reads it)
    first_process_low: float | None = None  # the interval of the item's own process's rounds, around
    first_process_high: float | None = None  # ... ``process_speedups[0]``, beside the band over the processes
    launch_bound: bool | None = None  # CUDA: eager or compiled spends at least half of a call launching it
    eager_host_share: float | None = None  # CUDA: the share of eager's call the host spends launching it
    compiled_host_share: float | None = None  # ... of the compiled call
    timing_seconds: float | None = None  # wall time the item held its device's timing slot (peak memory included)
    # peak CUDA memory of a steady call (compiled bench items that passed, timed on CUDA; None on the CPU, which has
    # no allocator peak): torch.cuda.max_memory_allocated over the call, so everything resident counts (weights,
    # inputs, a frozen model's copies of its weights, CUDA-graph pools), the same for both calls
    eager_peak_mib: float | None = None  # the model's own module called uncompiled
    compiled_peak_mib: float | None = None
    memory_ratio: float | None = None  # eager peak / compiled peak: above 1, compiled needs less memory
    # memory when a sample's triple began, after the previous triple was released: flat over a run when nothing leaks
    pid: int | None = None  # the process that ran it: a new worker after a crash, a timeout or recycling
    rss_mib: float | None = None  # resident memory of the process that ran it
    cuda_mib: float | None = None  # CUDA memory allocated on its device

    @property
    def key(self) -> tuple[str, str, str]:
        """The matrix cell: (sample, template, device)."""
        return (self.sample, self.template, self.device)

    @property
    def cache_state(self) -> str | None:
        """The compile caches' state of a compiled item: ``compile_cache``, or ``uncached`` where it consulted none;
        None where nothing was compiled (the eager row, a compile that failed)."""
        return None if self.compile_seconds is None else self.compile_cache or UNCACHED

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES

    def drop_speedup(self) -> None:
        """A failed item has no speedup (a wrong program's speed is no speedup), nor the paired figures behind it,
        nor peaks of memory."""
        self.speedup = self.speedup_low = self.speedup_high = self.unstable = self.device_speedup = None
        self.eager_median = self.compiled_median = self.eager_device_time_ms = self.paired_rounds = None
        self.paired_seconds = self.cpu_slow_rounds = self.full_speed_speedup = self.speedup_target = None
        self.speedup_of = self.all_rounds_speedup = None
        self.timing_processes = self.process_speedups = self.process_pids = self.slow_cpu_processes = None
        self.process_counted = None
        self.timing_loads = self.process_loads = None
        self.process_probe_ms = self.full_speed_mark_ms = self.cpu_moves = None
        self.process_eager_ms = self.process_compiled_ms = self.band_quantile = None
        self.first_process_low = self.first_process_high = None
        self.launch_bound = self.eager_host_share = self.compiled_host_share = None
        self.eager_peak_mib = self.compiled_peak_mib = self.memory_ratio = None

    @property
    def counts_as_check(self) -> bool:
        """Whether this item carries its cell's correctness verdict: every item except a sample's bench item,
        whose triple's check item carries it."""
        return not (self.source == "sample" and self.kind == "bench")

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready fields; unset (None or empty) fields are left out."""
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or (value in ("", {}) and f.name not in ("sample", "template", "device", "kind")):
                continue
            data[f.name] = value.value if isinstance(value, Outcome) else value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemRecord:
        """A record from ``to_dict``'s fields; unknown fields are ignored, a missing identity raises KeyError, a
        value of the wrong type TypeError."""
        types = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in types}
        for name, value in values.items():
            if not _fits(value, types[name]):
                raise TypeError(f"{name}: {value!r} is not {types[name]}")
        if values.get("outcome") is not None:
            values["outcome"] = Outcome(values["outcome"])
        for name in ("sample", "template", "device", "kind"):
            values[name] = str(data[name])
        return cls(**values)

    def properties(self) -> list[tuple[str, Any]]:
        """The record as test-report ``user_properties`` (what JUnit XML writes and xdist carries)."""
        return [(PROPERTY_PREFIX + name, value) for name, value in self.to_dict().items()]

    @classmethod
    def from_properties(cls, properties: list[tuple[str, Any]]) -> ItemRecord | None:
        """The record a report carries, or None for a report of an item that is not the plugin's."""
        fields = {k.removeprefix(PROPERTY_PREFIX): v for k, v in properties if k.startswith(PROPERTY_PREFIX)}
        if "outcome" not in fields:
            return None
        return cls.from_dict(fields)


def _fits(value: Any, annotation: str) -> bool:
    """Whether a decoded JSON value fits a field's annotation, such as ``float | None``, ``dict[str, Any]`` or
    ``list[float] | None``."""
    for part in (part.strip() for part in annotation.split("|")):
        kind = part.split("[")[0]
        if (
            (kind == "None" and value is None)
            or (kind == "float" and isinstance(value, int | float) and not isinstance(value, bool))
            or (kind == "int" and isinstance(value, int) and not isinstance(value, bool))
            or (kind in ("str", "Outcome") and isinstance(value, str))
            or (kind == "bool" and isinstance(value, bool))
            or (kind == "dict" and isinstance(value, dict))
            or (kind == "list" and isinstance(value, list) and all(_fits(v, part[len("list[") : -1]) for v in value))
        ):
            return True
    return False


def geomean(values: Iterable[float]) -> float | None:
    """The geometric mean of the positive values, or None when there are none."""
    positive = [v for v in values if v > 0]
    return statistics.geometric_mean(positive) if positive else None
