"""Comparing two saved runs (``compare_output`` writes a comparison out): speedup changes per template (a ratio
of ratios) with their 95% intervals, time, memory-ratio and correctness changes, the compile figures
(``compile_changes``), and the gate: a speedup regressed when it fell significantly further than the limit; a
memory ratio when it fell further than its limit."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from ..outcomes import FAILURES, Outcome
from ..record import EAGER, ItemRecord, geomean
from ..student import Z_975, band_floor, degrees_of, t_975_of, welch_degrees
from ..tables import times, timings_text
from . import compile_changes
from .compile_changes import CompileComparison
from .files import Cell, Key, Run

PASS = Outcome.PASS.value


def log_error(record: ItemRecord | None) -> float | None:
    """The standard error of log(speedup) that the record's 95% interval implies, or None without one: its
    half-width over the quantile it was made with (``band_quantile``: Student's t over the processes' means or one
    process's loads, where it was timed several times; else, and for records saved before the field, the normal's,
    which reads an older t band wider than it was: the gate then errs towards not flagging)."""
    if record is None or record.speedup is None or record.speedup_low is None or record.speedup_high is None:
        return None
    if record.speedup_low <= 0:
        return None
    quantile = record.band_quantile or Z_975
    return (math.log(record.speedup_high) - math.log(record.speedup_low)) / (2 * quantile)


def at_floor(record: ItemRecord) -> bool:
    """Whether the record's band was widened to the CUDA floor on either side (``student.band_floor``)."""
    floor = band_floor(record.launch_bound)
    speedup, low, high = record.speedup, record.speedup_low, record.speedup_high
    if not floor or not speedup or not low or not high or low <= 0:
        return False
    sides = (math.log(high / speedup), math.log(speedup / low))
    return any(math.isclose(side, floor, rel_tol=1e-6) for side in sides)


def weights_of(record: ItemRecord | None, other: ItemRecord | None) -> str | None:
    """How ``record``'s GraphNet sample passed its weights (``sample_weights``). A record saved before the field
    existed lacks it; where ``other``, the same sample in the other run, has it, that run passed the weights as
    inputs, as every run did then."""
    if record is None:
        return None
    if record.sample_weights is None and other is not None and other.sample_weights is not None:
        return "inputs"
    return record.sample_weights


@dataclass
class Row:
    """One (sample, device) of one template in both runs: the bench records that carry the speedups."""

    sample: str
    device: str
    base: ItemRecord | None
    new: ItemRecord | None
    base_outcome: str | None
    new_outcome: str | None
    base_weights: str | None = None  # how the sample's weights were passed (a GraphNet sample's sample_weights)
    new_weights: str | None = None

    @property
    def weights_differ(self) -> bool:
        """The runs passed the sample's weights differently (parameters against inputs): different programs, whose
        speedups do not compare."""
        return self.base_weights != self.new_weights

    @property
    def base_speedup(self) -> float | None:
        return self.base.speedup if self.base else None

    @property
    def new_speedup(self) -> float | None:
        return self.new.speedup if self.new else None

    @property
    def log_change(self) -> float | None:
        """log(new speedup / base speedup): each speedup is against eager of its own run; None where the runs passed
        the weights differently."""
        if not self.base_speedup or not self.new_speedup or self.weights_differ:
            return None
        return math.log(self.new_speedup / self.base_speedup)

    @property
    def log_error(self) -> float | None:
        """The standard error of ``log_change``, from both intervals; None when a run has no interval."""
        errors = (log_error(self.base), log_error(self.new))
        return None if None in errors else math.hypot(*errors)  # type: ignore[arg-type]

    @property
    def speedup_change(self) -> float | None:
        """new speedup / base speedup - 1."""
        return None if self.log_change is None else math.expm1(self.log_change)

    @property
    def change_interval(self) -> tuple[float, float] | None:
        """The change's 95% interval: its log's standard error times Student's t for the degrees of freedom of the two
        bands' errors together (Welch and Satterthwaite, each band's from the quantile it was made with: a band over
        a few processes' means knows its spread only roughly, and two of them together a little better); where a
        record was saved without its quantile, or with one the plugin does not make, or where a band was widened to
        the CUDA floor (its width is the runs' offset, not a spread's), the larger of the two."""
        records = [r for r in (self.base, self.new) if r is not None]
        quantiles = [r.band_quantile or Z_975 for r in records]
        errors = [log_error(r) for r in records]
        degrees = [degrees_of(r.band_quantile) if r.band_quantile else None for r in records]  # None: saved before
        spread = not any(at_floor(r) for r in records)  # a band widened to its floor holds no spread's degrees
        if len(records) == 2 and None not in errors and None not in degrees and spread:
            quantile = t_975_of(welch_degrees(errors, degrees))  # type: ignore[arg-type]
        else:
            quantile = max([Z_975, *quantiles])
        return interval_of(self.log_change, self.log_error, quantile)

    @property
    def time_change(self) -> float | None:
        """The change of the compiled model's time per call: of the geometric mean of its timings' medians of paired
        blocks (the speedup's own compiled side, over the timings its band is over), where both runs have it (else of
        pytest-benchmark's median)."""
        paired = self._side_change("process_compiled_ms", "compiled_median")
        return paired if paired is not None else self._change_of("median")

    @property
    def eager_change(self) -> float | None:
        """The change of eager's time per call (as the compiled side's): the speedup's other side. A speedup that
        moved because eager did (the machine, eager's own code) is no change of the compiled program."""
        return self._side_change("process_eager_ms", "eager_median")

    def _side_change(self, timings: str, median: str) -> float | None:
        """new / base - 1 of one side of the speedup: over every timing (the geometric mean of ``timings``, in ms)
        where a record has several, else its one ``median``."""
        sides = [_side_seconds(record, timings, median) for record in (self.base, self.new)]
        return None if not sides[0] or sides[1] is None else sides[1] / sides[0] - 1

    @property
    def base_memory_ratio(self) -> float | None:
        return self.base.memory_ratio if self.base else None

    @property
    def new_memory_ratio(self) -> float | None:
        return self.new.memory_ratio if self.new else None

    @property
    def memory_change(self) -> float | None:
        """new memory ratio / base memory ratio - 1 (below 0: the compiled model got heavier against eager); None
        where a run has no ratio (measured on CUDA only) or the runs passed the weights differently."""
        return None if self.weights_differ else self._change_of("memory_ratio")

    def _change_of(self, name: str) -> float | None:
        """new / base - 1 of a record field; None where a run lacks it (runs saved before paired timing)."""
        base, new = getattr(self.base, name, None), getattr(self.new, name, None)
        return None if not base or new is None else new / base - 1


def _side_seconds(record: ItemRecord | None, timings: str, median: str) -> float | None:
    """One side of a record's speedup in seconds per call: the geometric mean of its timings' medians (``timings``,
    ms) where it was timed several times (those its band is over, ``process_counted``), else its one ``median``;
    None where it has neither."""
    if record is None:
        return None
    values = getattr(record, timings) or []
    counted = record.process_counted
    if counted is not None and len(counted) == len(values):
        values = [value for value, kept in zip(values, counted, strict=True) if kept]
    mean = geomean(values)
    return mean / 1e3 if mean is not None else getattr(record, median)


def interval_of(
    log_change: float | None, log_error: float | None, quantile: float = Z_975
) -> tuple[float, float] | None:
    """The 95% interval of a relative change from its log, that log's standard error and the quantile to take."""
    if log_change is None or log_error is None:
        return None
    return math.expm1(log_change - quantile * log_error), math.expm1(log_change + quantile * log_error)


def regressed(change: float | None, interval: tuple[float, float] | None, limit: float) -> bool:
    """A speedup fell by more than ``limit`` and, where both runs give intervals, significantly more: the change's
    whole 95% interval lies below ``-limit`` (a one-sided test against the limit, not against no change, so a
    fall the size of the limit is flagged about 2.5% of the time, not half of it)."""
    return change is not None and change < -limit and (interval is None or interval[1] < -limit)


@dataclass
class TemplateComparison:
    template: str
    rows: list[Row] = field(default_factory=list)  # entries timed in at least one of the runs
    check_only: int = 0  # entries in both runs timed in neither (tests that only check): no row, only counted

    @property
    def compared(self) -> list[Row]:
        """The rows with a speedup in both runs: the geomeans are over these alone."""
        return [r for r in self.rows if r.log_change is not None]

    @property
    def base_geomean(self) -> float | None:
        return geomean(r.base_speedup for r in self.compared if r.base_speedup is not None)

    @property
    def new_geomean(self) -> float | None:
        return geomean(r.new_speedup for r in self.compared if r.new_speedup is not None)

    @property
    def geomean_change(self) -> float | None:
        base, new = self.base_geomean, self.new_geomean
        return None if base is None or new is None else new / base - 1

    @property
    def geomean_interval(self) -> tuple[float, float] | None:
        """The 95% interval of the geomean's change: the mean of the rows' log changes, whose errors add."""
        rows = self.compared
        errors = [r.log_error for r in rows]
        if not rows or None in errors:
            return None
        log_change = sum(r.log_change for r in rows if r.log_change is not None) / len(rows)
        return interval_of(log_change, math.sqrt(sum(e * e for e in errors if e is not None)) / len(rows))


@dataclass
class RunComparison:
    base: Run
    new: Run
    templates: list[TemplateComparison]
    newly_failing: list[tuple[Key, str, str]]  # key, base outcome, new outcome
    newly_passing: list[tuple[Key, str, str]]
    only_in_base: list[Key]
    only_in_new: list[Key]
    compiles: CompileComparison = field(default_factory=CompileComparison)

    def speedup_drops(self, limit: float) -> tuple[list[str], list[str]]:
        """Where a speedup fell by more than ``limit`` (a fraction), on a sample or in a geomean: the
        drops significantly beyond the limit (a regression), and those the intervals cannot tell from a fall within
        it (not flagged)."""
        flagged: list[str] = []
        waived: list[str] = []
        for template in self.templates:
            found = [
                (f"speedup on {r.sample} [{r.device}]", r.speedup_change, r.change_interval, r.base_speedup,
                 r.new_speedup,
                 f"; compiled time {percent_change(r.time_change)}, eager time {percent_change(r.eager_change)}")
                for r in template.rows
            ]  # fmt: skip
            found.append(
                ("geomean speedup", template.geomean_change, template.geomean_interval, template.base_geomean,
                 template.new_geomean, "")
            )  # fmt: skip
            for what, change, interval, base, new, sides in found:
                if change is None or change >= -limit:
                    continue
                line = f"{template.template}: {what} fell {-change:.1%} ({ratio_text(base)} -> {ratio_text(new)}"
                line += f"; change {change_text(change, interval)}{sides})"
                (flagged if regressed(change, interval, limit) else waived).append(line)
        return flagged, waived

    def memory_drops(self, limit: float) -> list[str]:
        """Where an item's memory ratio (eager peak / compiled peak) fell by more than ``limit`` (a fraction): the
        compiled model got heavier against eager. Peaks of a steady call carry no interval: the change is judged as
        it is."""
        found = []
        for template in self.templates:
            for r in template.rows:
                if r.memory_change is None or r.memory_change >= -limit:
                    continue
                found.append(
                    f"{template.template}: memory ratio on {r.sample} [{r.device}] fell {-r.memory_change:.1%} "
                    f"({ratio_text(r.base_memory_ratio)} -> {ratio_text(r.new_memory_ratio)}; compiled peak "
                    f"{peaks_text(r, 'compiled_peak_mib')}, eager peak {peaks_text(r, 'eager_peak_mib')})"
                )
        return found

    def memory_incomparable(self) -> str | None:
        """Why no memory ratio compares (none in both runs), or None."""
        if any(r.memory_change is not None for t in self.templates for r in t.rows):
            return None
        measured = [sum(c.bench is not None and c.bench.memory_ratio is not None for c in run.cells.values())
                    for run in (self.base, self.new)]  # fmt: skip
        return (
            f"no compiled entry has a memory ratio in both runs (base has {measured[0]}, new has {measured[1]}; peaks "
            "are measured on CUDA only, by compiled bench items that passed and were timed)"
        )

    @property
    def weights_differ(self) -> list[Row]:
        """The rows whose sample passed its weights differently in the two runs: their speedups are not compared."""
        return [r for t in self.templates for r in t.rows if r.weights_differ]

    @property
    def timed_differently(self) -> Counter[tuple[str, str]]:
        """How the compared rows whose runs timed them differently were timed (``in 8 loads``, ``in 4 processes of
        2 loads``: base, new), counted: their bands are made differently (over one process's loads, or over
        processes' means), so a change inside one band may not be inside the other."""
        return Counter(
            (timed_as(row.base), timed_as(row.new))
            for template in self.templates
            for row in template.compared
            if timed_as(row.base) != timed_as(row.new)
        )

    def incomparable(self, speedups: bool) -> str | None:
        """Why nothing could be compared: no entry in both runs; or, when ``speedups`` are asked for, runs from
        different GPUs, or no compiled entry timed in both. None when there is something to compare."""
        if not any(key in self.new.cells for key in self.base.cells):
            return f"no entry is in both runs ({len(self.base.cells)} in base, {len(self.new.cells)} in new)"
        if not speedups:
            return None
        if self.base.gpu != self.new.gpu:
            return (
                f"the runs are from different GPUs ({self.base.gpu or 'no GPU'} vs {self.new.gpu or 'no GPU'}): "
                "their speedups do not compare (--fail-on correctness alone compares outcomes)"
            )
        if self.base.tf32 != self.new.tf32:
            return (
                f"the runs are in different TF32 modes (base {self.base.tf32}, new {self.new.tf32}; --inductor-tf32): "
                "their speedups do not compare (--fail-on correctness alone compares outcomes)"
            )
        if not any(t.compared for t in self.templates) and self.weights_differ:
            return f"the runs passed GraphNet sample weights differently ({weights_change(self.weights_differ)}): " + (
                "parameters and inputs are different programs, whose speedups do not compare (--fail-on correctness "
                "alone compares outcomes; rerun one with the other's --inductor-sample-weights)"
            )
        if not any(t.compared for t in self.templates):
            timed = [sum(c.speedup is not None for c in run.cells.values()) for run in (self.base, self.new)]
            return (
                f"no compiled entry has a speedup in both runs (base has {timed[0]}, new has {timed[1]}; runs with "
                "--benchmark-disable, --benchmark-skip or pytest-xdist are not timed, except CUDA sample items with -n "
                "equal to the number of GPUs unless timing is switched off)"
            )
        return None

    def correctness_drops(self) -> list[str]:
        return [f"{'/'.join(key)}: newly failing ({base} -> {new})" for key, base, new in self.newly_failing]


def _outcome_name(cell: Cell | None) -> str | None:
    outcome = cell.outcome if cell is not None else None
    return outcome.value if outcome is not None else None


def _failing(outcome: str | None) -> bool:
    return outcome is not None and Outcome(outcome) in FAILURES


def compare_runs(base: Run, new: Run) -> RunComparison:
    keys = list(dict.fromkeys([*base.cells, *new.cells]))
    templates: dict[str, TemplateComparison] = {}
    newly_failing, newly_passing, only_base, only_new = [], [], [], []
    for key in keys:
        sample, template, device = key
        b, n = base.cells.get(key), new.cells.get(key)
        if n is None:
            only_base.append(key)
            continue
        if b is None:
            only_new.append(key)
            continue
        base_outcome, new_outcome = _outcome_name(b), _outcome_name(n)
        if not _failing(base_outcome) and _failing(new_outcome):
            newly_failing.append((key, base_outcome or PASS, str(new_outcome)))
        elif _failing(base_outcome) and not _failing(new_outcome):
            newly_passing.append((key, str(base_outcome), new_outcome or PASS))
        if template == EAGER:
            continue
        base_weights, new_weights = weights_of(b.verdict, n.verdict), weights_of(n.verdict, b.verdict)
        comparison = templates.setdefault(template, TemplateComparison(template))
        if b.bench is None and n.bench is None:
            comparison.check_only += 1  # its outcome is compared above (newly failing or passing); no speedup
            continue
        comparison.rows.append(
            Row(sample, device, b.bench, n.bench, base_outcome, new_outcome, base_weights, new_weights)
        )
    compiles = compile_changes.compare_compiles(base, new)
    return RunComparison(
        base, new, list(templates.values()), newly_failing, newly_passing, only_base, only_new, compiles
    )


def timed_as(record: ItemRecord | None) -> str:
    """How a record's speedup was timed: ``once``, ``in 8 loads``, ``in 4 processes of 2 loads``."""
    if record is None:
        return "once"
    return timings_text(record.timing_processes or 1, record.timing_loads or 1)


def weights_change(rows: list[Row]) -> str:
    """``inputs -> parameters`` (for each distinct change among ``rows``), with how many rows each covers."""
    changes = Counter(f"{r.base_weights or 'none'} -> {r.new_weights or 'none'}" for r in rows)
    return ", ".join(f"{change} on {count} entr{'y' if count == 1 else 'ies'}" for change, count in changes.items())


def percent_change(value: float | None) -> str:
    return "n/a" if value is None else f"{value:+.1%}"


def ratio_text(value: float | None) -> str:
    return "n/a" if value is None else times(value)


def peaks_text(row: Row, name: str) -> str:
    """A peak of memory in both runs: ``512 -> 768 MiB``."""
    base, new = (getattr(record, name, None) for record in (row.base, row.new))
    return f"{'n/a' if base is None else format(base, 'g')} -> {'n/a' if new is None else format(new, 'g')} MiB"


def change_text(change: float | None, interval: tuple[float, float] | None) -> str:
    """``-2.4% [-5.1%, +0.4%]``: a change and its 95% interval (when both runs give intervals)."""
    if change is None:
        return "n/a"
    return percent_change(change) + (
        f" [{percent_change(interval[0])}, {percent_change(interval[1])}]" if interval is not None else ""
    )
