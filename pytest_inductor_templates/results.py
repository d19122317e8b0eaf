"""Timed results keyed by (sample, template, device): speedups over eager, geometric means, tables.

Works on pytest-benchmark's JSON entries (``benchmarks`` list), whose ``extra_info`` the plugin fills.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .outcomes import SHORT_NAMES

EAGER = "eager"
PASS = "pass"


@dataclass
class Entry:
    """One timed item: a sample (or user test) under a template on a device."""

    sample: str
    template: str
    device: str
    median: float | None  # seconds per call (pytest-benchmark's median); None when not timed
    outcome: str | None = None  # the correctness outcome, None when no check ran
    eager_median: float | None = None
    speedup: float | None = None
    fullname: str = ""
    gpu: str | None = None
    reason: str = ""
    effect: str | None = None  # effect, no effect, not observed; None when nothing to judge
    effect_evidence: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.sample, self.template, self.device)

    @property
    def failed(self) -> bool:
        return self.outcome not in (None, PASS)


def entry_from_json(benchmark: dict[str, Any]) -> Entry | None:
    """The plugin's view of one pytest-benchmark JSON entry; None for entries it did not make."""
    info = benchmark.get("extra_info") or {}
    if "template" not in info or "sample" not in info:
        return None
    stats = benchmark.get("stats") or {}
    return Entry(
        sample=str(info["sample"]),
        template=str(info["template"]),
        device=str(info.get("device", "?")),
        median=stats.get("median"),
        outcome=info.get("outcome"),
        eager_median=info.get("eager_median"),
        speedup=info.get("speedup"),
        fullname=str(benchmark.get("fullname", "")),
        gpu=info.get("gpu"),
        reason=str(info.get("reason", "")),
        effect=info.get("effect"),
        effect_evidence=str(info.get("effect_evidence", "")),
    )


def speedup_of(eager_median: float | None, median: float | None, outcome: str | None) -> float | None:
    """eager median / compiled median, only for an item that passed its check (or had none)."""
    if eager_median is None or not median or outcome not in (None, PASS):
        return None
    return eager_median / median


def fill_speedups(entries: Iterable[Entry]) -> list[Entry]:
    """Give every compiled entry the median of the eager entry of its (sample, device, GPU) and its speedup.

    Entries that carry their own eager median (timed in the same test) keep it.
    """
    entries = list(entries)
    eager = {(e.sample, e.device, e.gpu): e for e in entries if e.template == EAGER and not e.failed}
    for entry in entries:
        if entry.template == EAGER:
            continue
        baseline = eager.get((entry.sample, entry.device, entry.gpu))
        if baseline is not None:
            entry.eager_median = baseline.median
        entry.speedup = speedup_of(entry.eager_median, entry.median, entry.outcome)
    return entries


def add_speedups_to_json(benchmarks: list[dict[str, Any]]) -> None:
    """Write ``eager_median`` and ``speedup`` into the extra_info of every compiled entry."""
    pairs = [(b, e) for b in benchmarks if (e := entry_from_json(b)) is not None]
    fill_speedups(e for _, e in pairs)
    for benchmark, entry in pairs:
        if entry.template != EAGER:
            benchmark["extra_info"]["eager_median"] = entry.eager_median
            benchmark["extra_info"]["speedup"] = entry.speedup


def geomean(values: Iterable[float]) -> float | None:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _cell(entry: Entry | None) -> str:
    if entry is None:
        return "-"
    if entry.failed:
        return SHORT_NAMES.get(str(entry.outcome), str(entry.outcome))
    return f"{entry.speedup:.2f}x" if entry.speedup is not None else "n/a"


def speedup_table(entries: Iterable[Entry]) -> list[str]:
    """Rows of samples (per device), columns of templates, cells of speedups over eager, a geomean row.

    A failed item shows its outcome, never a speedup.
    """
    compiled = [e for e in entries if e.template != EAGER]
    if not compiled:
        return []
    templates = list(dict.fromkeys(e.template for e in compiled))
    rows = list(dict.fromkeys(f"{e.sample} [{e.device}]" for e in compiled))
    cells = {(f"{e.sample} [{e.device}]", e.template): e for e in compiled}
    width = max(len(r) for r in [*rows, "geomean"]) + 2
    widths = [max(len(t), 9) for t in templates]

    def line(head: str, values: list[str]) -> str:
        return (head.ljust(width) + "  ".join(v.rjust(w) for v, w in zip(values, widths, strict=True))).rstrip()

    lines = [line("sample [device]", templates)]
    lines += [line(row, [_cell(cells.get((row, t))) for t in templates]) for row in rows]
    means = []
    for template in templates:
        speedups = [e.speedup for e in compiled if e.template == template and e.speedup is not None]
        mean = geomean(speedups)
        means.append(f"{mean:.2f}x" if mean is not None else "n/a")
    lines.append(line("geomean", means))
    return lines
