"""Compile figures between two saved runs: the compile times of the items compiled in the same cache state by runs
with as many pytest-xdist workers, the gate on their growth, and the graph breaks and recompiles that changed.

A compile time depends on the compile caches (a warm compile of a small model takes a fraction of a cold one) and
on what else compiles on the CPUs: so an item's compile times compare only where both runs compiled it in the same
cache state (``compile_cache``) and had as many pytest-xdist workers (``machine_info.xdist_workers``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..record import EAGER
from ..tables import render, seconds
from .files import Key, Run

NOISE_SECONDS = 1.0  # a compile time flagged must also have grown by this much: load moves small compiles as much


def _label(key: Key) -> str:
    return f"{key[0]} [{key[2]}]"


def _relative(base: float, new: float) -> float | None:
    """new / base - 1."""
    return new / base - 1 if base > 0 else None


def _percent(change: float | None) -> str:
    return "n/a" if change is None else f"{change:+.1%}"


@dataclass(frozen=True)
class CompileTime:
    """One item's compile seconds in both runs, compiled in the same cache state."""

    key: Key
    state: str
    base: float
    new: float

    @property
    def change(self) -> float | None:
        return _relative(self.base, self.new)

    @property
    def growth(self) -> float:
        return self.new - self.base


@dataclass(frozen=True)
class StructureChange:
    """An item whose graph breaks or recompiles differ between the runs."""

    key: Key
    base_breaks: int
    new_breaks: int
    base_recompiles: int
    new_recompiles: int

    @property
    def gained(self) -> str | None:
        """What it gained (``graph breaks (0 -> 1)``, ``and recompiles ...``), or None when it gained nothing."""
        parts = [
            f"{what} ({base} -> {new})"
            for what, base, new in (
                ("graph breaks", self.base_breaks, self.new_breaks),
                ("recompiles", self.base_recompiles, self.new_recompiles),
            )
            if new > base
        ]
        return " and ".join(parts) or None


@dataclass
class CompileComparison:
    """The compile times compared (same cache state, as many workers), why none were, and the structure changes."""

    workers: int | None = None  # the runs' pytest-xdist workers (where they agree)
    times: list[CompileTime] = field(default_factory=list)
    states_differ: Counter[str] = field(default_factory=Counter)  # ``cold -> warm``: items not compared for it
    why_not: str | None = None  # why no compile time was compared
    structure: list[StructureChange] = field(default_factory=list)

    def groups(self) -> dict[tuple[str, str], list[CompileTime]]:
        """The compared items by (template, cache state)."""
        found: dict[tuple[str, str], list[CompileTime]] = defaultdict(list)
        for time in self.times:
            found[(time.key[1], time.state)].append(time)
        return dict(found)

    def grown(self, limit: float) -> tuple[list[str], list[str]]:
        """Where a compile time grew by more than ``limit`` (a fraction), of an item or of a template's mean in one
        cache state: those that also grew by ``NOISE_SECONDS`` or more (flagged), and those that did not (noise)."""
        flagged: list[str] = []
        waived: list[str] = []
        found = [(f"compile time of {_label(t.key)}", t.key[1], t.state, t.base, t.new) for t in self.times]
        for (template, state), times in self.groups().items():
            if len(times) > 1:
                found.append((f"mean compile time over {len(times)} items", template, state, *_means(times)))
        for what, template, state, base, new in found:
            change = _relative(base, new)
            if change is None or change <= limit:
                continue
            line = f"{template}: {what} grew {change:.1%} ({seconds(base)} -> {seconds(new)}, {state} in both runs)"
            if new - base >= NOISE_SECONDS:
                flagged.append(line)
            else:
                waived.append(line)
        return flagged, waived

    def gained(self) -> list[str]:
        """The items that gained graph breaks or recompiles."""
        return [f"{'/'.join(c.key)}: gained {c.gained}" for c in self.structure if c.gained]

    def notes(self) -> list[str]:
        if self.why_not:
            return [f"compile times not compared: {self.why_not}"]
        if self.states_differ:
            return [f"compile times not compared where the cache state differs: {_states(self.states_differ)}"]
        return []


def _means(times: list[CompileTime]) -> tuple[float, float]:
    """The mean compile seconds of ``times`` in base and in new."""
    return sum(t.base for t in times) / len(times), sum(t.new for t in times) / len(times)


def _states(changes: Counter[str]) -> str:
    """``cold -> warm on 2 items, ...``."""
    return ", ".join(f"{change} on {n} item{'' if n == 1 else 's'}" for change, n in changes.items())


def _why_not(base: Run, new: Run, times: list[CompileTime], states_differ: Counter[str]) -> str | None:
    for which, run in (("base", base), ("new", new)):
        if run.xdist_workers is None:
            return (
                f"the {which} run does not say how many pytest-xdist workers it had (saved before machine_info "
                "recorded xdist_workers)"
            )
    if base.xdist_workers != new.xdist_workers:
        return (
            f"the runs had different pytest-xdist worker counts (base {base.xdist_workers}, new {new.xdist_workers}): "
            "their compiles shared the CPUs differently"
        )
    if times:
        return None
    if states_differ:
        return (
            f"no item compiled in the same cache state in both runs ({_states(states_differ)}); run both cold "
            "(--inductor-fresh-cache) or both warm (a second run on the same cache)"
        )
    return "no compiled item has a compile time in both runs"


def compare_compiles(base: Run, new: Run) -> CompileComparison:
    """The compile figures of every compiled (sample, template, device) in both runs, from the records that carry
    each cell's verdict."""
    times: list[CompileTime] = []
    states_differ: Counter[str] = Counter()
    structure: list[StructureChange] = []
    for key, base_cell in base.cells.items():
        new_cell = new.cells.get(key)
        if new_cell is None or key[1] == EAGER:
            continue
        b, n = base_cell.verdict, new_cell.verdict
        if b.compile_seconds is not None and n.compile_seconds is not None:
            if b.cache_state == n.cache_state:
                times.append(CompileTime(key, str(b.cache_state), b.compile_seconds, n.compile_seconds))
            else:
                states_differ[f"{b.cache_state} -> {n.cache_state}"] += 1
        counts = (b.graph_breaks, n.graph_breaks, b.recompiles, n.recompiles)
        if None not in counts and (counts[0] != counts[1] or counts[2] != counts[3]):
            structure.append(StructureChange(key, *counts))  # type: ignore[arg-type]
    why = _why_not(base, new, times, states_differ)
    compared = [] if why else times
    return CompileComparison(base.xdist_workers, compared, states_differ, why, structure)


def lines(comparison: CompileComparison, markdown: bool) -> list[str]:
    """The compile-time means per template and cache state, the items whose compile time moved by the noise
    threshold or more, and the structure changes; as text or markdown."""
    found: list[str] = []
    heading = (lambda title: ["", f"### {title}", ""]) if markdown else (lambda title: ["", f"{title}:"])
    groups = comparison.groups()
    if groups:
        workers = f"{comparison.workers} pytest-xdist worker{'' if comparison.workers == 1 else 's'}"
        workers = workers if comparison.workers else "without pytest-xdist"
        found += heading(f"compile times (the same cache state in both runs, {workers})")
        rows = []
        for (template, state), times in groups.items():
            base, new = _means(times)
            rows.append([template, state, str(len(times)), seconds(base), seconds(new), _percent(_relative(base, new))])
        header = ["template", "cache", "items", "base mean", "new mean", "change"]
        found += render(header, rows, right=range(2, 6), markdown=markdown)
        moved = [t for t in comparison.times if abs(t.growth) >= NOISE_SECONDS]
        if moved:
            found += heading(f"compile times that moved by {NOISE_SECONDS:g} s or more")
            rows = [
                [_label(t.key), t.key[1], t.state, seconds(t.base), seconds(t.new), _percent(t.change)] for t in moved
            ]
            header = ["sample [device]", "template", "cache", "base", "new", "change"]
            found += render(header, rows, right=range(3, 6), markdown=markdown)
    if comparison.structure:
        found += heading("graph breaks and recompiles that changed")
        rows = [
            [_label(c.key), c.key[1], _pair(c.base_breaks, c.new_breaks), _pair(c.base_recompiles, c.new_recompiles)]
            for c in comparison.structure
        ]
        found += render(["sample [device]", "template", "graph breaks", "recompiles"], rows, markdown=markdown)
    return found


def _pair(base: int, new: int) -> str:
    return str(base) if base == new else f"{base} -> {new}"


def _time_json(time: CompileTime) -> dict[str, Any]:
    return {"key": list(time.key), "cache": time.state, "base_compile_seconds": time.base,
            "new_compile_seconds": time.new, "change": time.change}  # fmt: skip


def _structure_json(change: StructureChange) -> dict[str, Any]:
    return {"key": list(change.key), "base_graph_breaks": change.base_breaks, "new_graph_breaks": change.new_breaks,
            "base_recompiles": change.base_recompiles, "new_recompiles": change.new_recompiles}  # fmt: skip


def as_json(comparison: CompileComparison) -> dict[str, Any]:
    return {
        "why_not": comparison.why_not,
        "xdist_workers": comparison.workers,
        "states_differ": dict(comparison.states_differ),
        "rows": [_time_json(t) for t in comparison.times],
        "structure": [_structure_json(c) for c in comparison.structure],
    }
