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
from enum import Enum
from typing import Any

FORMAT = 2  # ``inductor_templates.format`` of the saved JSON; readers refuse other versions
SECTION = "inductor_templates"  # the plugin's top-level key in pytest-benchmark's JSON
PROPERTY_PREFIX = "inductor_"  # a record field ``outcome`` is the report property ``inductor_outcome``
EAGER = "eager"  # the uncompiled reference row's template
FIRST_COMPARISON = "first comparison"  # check_rule: decided by the scale-aware tolerance alone
SECOND_OPINION = "second opinion"  # check_rule: an output beyond it was cleared by the float64 second opinion


class Outcome(str, Enum):
    """How an item ended."""

    PASS = "pass"
    ACCURACY_FAIL = "accuracy_fail"
    COMPILE_FAIL = "compile_fail"
    RUNTIME_FAIL = "runtime_fail"
    EAGER_FAIL = "eager_fail"
    EAGER_NONDETERMINISTIC = "eager_nondeterministic"
    NO_EFFECT = "no_effect"  # only with --inductor-require-effect: the template changed nothing
    CRASHED = "crashed"  # the process running the item died (signal, exit, CUDA fault), or the item called sys.exit
    TIMEOUT = "timeout"  # the item ran past --inductor-timeout (or pytest-timeout's limit) and was stopped
    SKIPPED = "skipped"


SHORT_NAMES = {  # an outcome in a table cell
    Outcome.PASS: "pass",
    Outcome.ACCURACY_FAIL: "ACCURACY",
    Outcome.COMPILE_FAIL: "COMPILE",
    Outcome.RUNTIME_FAIL: "RUNTIME",
    Outcome.EAGER_FAIL: "EAGER",
    Outcome.EAGER_NONDETERMINISTIC: "nondet",
    Outcome.NO_EFFECT: "NO-EFFECT",
    Outcome.CRASHED: "CRASHED",
    Outcome.TIMEOUT: "TIMEOUT",
    Outcome.SKIPPED: "skip",
}
FAILURES = frozenset(Outcome) - {Outcome.PASS, Outcome.SKIPPED, Outcome.EAGER_NONDETERMINISTIC}
UNTIMEABLE = frozenset({Outcome.EAGER_FAIL, Outcome.COMPILE_FAIL, Outcome.RUNTIME_FAIL})  # nothing ran to time
ENDED_EARLY = frozenset({Outcome.CRASHED, Outcome.TIMEOUT})  # the triple's later items are skipped


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
    # how it ended
    outcome: Outcome | None = None
    reason: str = ""  # one line
    tolerance_level: int | None = None  # tightest GraphNet tolerance level t at which every output passes
    check_rule: str | None = None  # what decided the comparison: ``first comparison``, ``second opinion``, ...
    fp64_second_opinion: str | None = None  # each output the float64 second opinion cleared, with its figures
    # what the template did
    effect: str | None = None  # ``effect``, ``no effect``, ``not observed``; None when nothing to judge
    effect_evidence: str = ""
    # what compiling cost
    compile_seconds: float | None = None
    graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    cudagraph_skips: int | None = None
    # timing (bench items)
    median: float | None = None  # seconds per call, pytest-benchmark's median
    warmup_calls: int | None = None
    timer: str | None = None
    device_time_ms: float | None = None
    eager_median: float | None = None
    eager_rounds: int | None = None
    eager_device_time_ms: float | None = None
    speedup: float | None = None  # eager median / median; None unless the item passed
    # memory when a sample's triple began, after the previous triple was released: flat over a run when nothing leaks
    pid: int | None = None  # the process that ran it: a new worker after a crash, a timeout or recycling
    rss_mib: float | None = None  # resident memory of the process that ran it
    cuda_mib: float | None = None  # CUDA memory allocated on its device

    @property
    def key(self) -> tuple[str, str, str]:
        """The matrix cell: (sample, template, device)."""
        return (self.sample, self.template, self.device)

    @property
    def failed(self) -> bool:
        return self.outcome in FAILURES

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
        """A record from ``to_dict``'s fields; unknown fields are ignored, a missing identity raises KeyError."""
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
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


def speedup_of(eager_median: float | None, median: float | None, outcome: Outcome | None) -> float | None:
    """eager median / median, only for an item that passed its check."""
    if eager_median is None or not median or outcome is not Outcome.PASS:
        return None
    return eager_median / median


def fill_speedups(records: list[ItemRecord]) -> list[ItemRecord]:
    """Give every compiled sample bench record without an eager median the median of its eager row (same
    sample, device and GPU), and every compiled bench record its speedup. A record that has its eager median
    (timed with its own baseline, or read from a saved run, whose eager row it keeps across a merge) keeps it."""
    eager = {
        (r.sample, r.device, r.gpu): r.median
        for r in records
        if r.template == EAGER and r.kind == "bench" and r.outcome is Outcome.PASS
    }
    for record in records:
        if record.kind != "bench" or record.template == EAGER:
            continue
        if record.source == "sample" and record.eager_median is None:
            record.eager_median = eager.get((record.sample, record.device, record.gpu))
        record.speedup = speedup_of(record.eager_median, record.median, record.outcome)
    return records


def geomean(values: Iterable[float]) -> float | None:
    """The geometric mean of the positive values, or None when there are none."""
    positive = [v for v in values if v > 0]
    return statistics.geometric_mean(positive) if positive else None
