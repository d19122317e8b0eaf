"""The record writer: the one place that turns results into an item's record, and builds and parses node ids.

Every item of the plugin (sample items, and user tests that use ``inductor_check`` or ``inductor_benchmark``)
carries an ``ItemRecord`` in its stash, started at collection (``new_record``, ``start``). The item ends through
``conclude``, which writes its cell's result (verdict, compile figures, timing, peaks of memory, footprint) and
passes, fails or skips it; at report time ``complete`` gives an outcome to an item that got none (skipped, errored)
and puts the record into the report's ``user_properties``, the one transport to JUnit XML and to pytest-xdist's
controller.
"""

from __future__ import annotations

import re
import statistics
import warnings
from collections.abc import Callable

import pytest

from ..diagnose import Diagnosis
from ..engine.cell import CellResult, Verdict
from ..outcomes import FAILURES, Outcome
from ..record import ItemRecord
from ..student import band_units, t_975
from ..templates.matrix import Case
from ..templates.selection import Selection

RECORD_KEY = pytest.StashKey[ItemRecord]()
ROOT_NODEID = "inductor-samples"  # the node id under which every sample item is collected
SAMPLE_NODEID = re.compile(
    rf"{ROOT_NODEID}::(?P<sample>.+)::(?P<kind>check|bench)\[(?P<template>.+)-(?P<device>cpu|cuda:\d+)\]"
)


CHECK_ENDED = "the triple's check ended"  # how a bench item whose triple's check did not pass is skipped


class NoEffectWarning(UserWarning):
    """A template had no effect on an item: what ran is what default would have compiled."""


def new_record(case: Case, sample: str, kind: str, source: str, sample_weights: str | None = None) -> ItemRecord:
    """A new record of an item of ``case`` (``sample``: a sample id, or a user test's name; ``sample_weights``: how
    a GraphNet sample's weights reach its graph)."""
    device = case.device
    return ItemRecord(
        sample=sample,
        template=case.selection.label,
        device=device.name,
        kind=kind,
        source=source,
        gpu=device.description if device.type == "cuda" else None,
        settings=dict(case.selection.effective_settings),
        fallback=case.fallback_note,
        sample_weights=sample_weights,
    )


def sample_item_name(kind: str, case: Case) -> str:
    """A sample item's name under its sample's collector: ``check[default-cpu]``."""
    return f"{kind}[{case.id}]"


def user_test_name(base: str, params: str, matrix_id: str) -> str:
    """A user test's ``sample`` in its records: its node id (``base`` and parameter id ``params``) less the matrix's
    part of the parameters (``matrix_id``: ``template-device`` or ``template``), the same under every template."""
    rest = params.removesuffix(matrix_id).rstrip("-") if params.endswith(matrix_id) else params
    return f"{base}[{rest}]" if rest else base


def user_test_id(node: pytest.Item, selection: Selection) -> str:
    """A user test's node id without the matrix's part of its parameters: the same for every template."""
    callspec = getattr(node, "callspec", None)
    if callspec is None:
        return node.nodeid
    device = callspec.params.get("inductor_device")
    matrix_id = f"{selection.label}-{device}" if device is not None else selection.label
    return user_test_name(node.nodeid.partition("[")[0], callspec.id, matrix_id)


def matrix_params(nodeid: str, cases: list[tuple[str, str]]) -> tuple[str, str, str] | None:
    """(template, device, the matrix's part of the parameter id) of a user test parametrized by the plugin: its id
    ends in ``TEMPLATE-DEVICE`` or ``TEMPLATE`` of one of ``cases``, (template, device); None for another test."""
    params = nodeid.partition("[")[2].removesuffix("]")
    found = next(((t, d, f"{t}-{d}") for t, d in cases if params == f"{t}-{d}" or params.endswith(f"-{t}-{d}")), None)
    return found or next(((t, d, t) for t, d in cases if params == t or params.endswith(f"-{t}")), None)


XDIST_GROUP = re.compile(r"@[^\[\]]*\Z")  # what pytest-xdist's workers add to a grouped item's node id


def without_xdist_group(nodeid: str) -> str:
    """``nodeid`` less the ``@group`` suffix by which pytest-xdist's workers name an ``xdist_group`` item's group
    under pytest < 9.2 (and so the node id its controller reports the item's crash under)."""
    return XDIST_GROUP.sub("", nodeid)


def crashed_record(nodeid: str, worker: str, cases: list[tuple[str, str]]) -> ItemRecord | None:
    """The record of an item whose pytest-xdist worker died running it: a sample item, or a user test parametrized
    by the plugin (its id ends in one of ``cases``, (template, device)); None for other tests. A node id with
    xdist's ``@group`` suffix is read without it."""
    reason = f"the pytest-xdist worker {worker} died running it (its stderr, above, says how)"
    nodeid = without_xdist_group(nodeid)
    if match := SAMPLE_NODEID.fullmatch(nodeid):
        sample, template, device, kind, source = *match.group("sample", "template", "device", "kind"), "sample"
    else:
        found = matrix_params(nodeid, cases)
        if found is None:
            return None
        (template, device, matrix_id), kind, source = found, "check", "test"
        base, _, params = nodeid.partition("[")
        sample = user_test_name(base, params.removesuffix("]"), matrix_id)
    return ItemRecord(
        sample, template, device, kind, source=source, nodeid=nodeid, outcome=Outcome.CRASHED, reason=reason
    )


def write_cell(record: ItemRecord, cell: CellResult) -> None:
    """Write a cell's verdict, compile figures, timing, peaks of memory and footprint into ``record``."""
    verdict, stats, timing = cell.verdict, cell.stats, cell.timing
    result = verdict.result
    record.outcome, record.reason, record.tolerance_level = result.outcome, result.reason, result.level
    record.check_rule = result.rule or None
    record.fp64_second_opinion = "; ".join(result.second_opinions) or None
    if result.uncompared:
        record.uncompared = f"{', '.join(result.uncompared)}: NaN or Inf everywhere in eager, as in compiled"
    if verdict.effect is not None:
        record.effect, record.effect_evidence = verdict.effect, "; ".join(map(str, verdict.effects))
    if stats is not None and result.outcome not in (Outcome.EAGER_FAIL, Outcome.COMPILE_FAIL):
        record.compile_seconds = round(stats.compile_seconds, 4)
        record.compile_cache, record.compile_cache_lookups = stats.cache_state, dict(stats.cache_lookups)
        record.graphs, record.graph_breaks = stats.graphs, stats.graph_breaks
        record.recompiles, record.cudagraph_skips = stats.recompiles, stats.cudagraph_skips
    record.tf32 = cell.tf32
    if cell.footprint is not None:
        record.pid, record.rss_mib, record.cuda_mib = (
            cell.footprint.pid,
            cell.footprint.rss_mib,
            cell.footprint.cuda_mib,
        )
    if cell.peak is not None:
        record.eager_peak_mib, record.compiled_peak_mib = cell.peak.eager_mib, cell.peak.compiled_mib
        record.memory_ratio = cell.peak.ratio
    if timing is None or timing.rounds is None:
        return
    record.threads, record.warmup_calls, record.timer = timing.threads, timing.warmup_calls, timing.timer
    record.median, record.device_time_ms = timing.median, timing.device_time_ms
    if timing.seconds is not None:
        repeated = sum(repeat.paired.seconds for repeat in timing.repeats)
        record.timing_seconds = round(
            timing.seconds + repeated + (cell.peak.seconds if cell.peak is not None else 0.0), 3
        )
    if timing.host_shares is not None:
        record.eager_host_share, record.compiled_host_share = timing.host_shares
        record.launch_bound = timing.launch_bound
    paired = timing.paired
    if paired is None:
        return
    record.eager_median, record.compiled_median = paired.eager_median, paired.compiled_median
    record.paired_rounds, record.unstable, record.device_speedup = paired.rounds, timing.unstable, paired.device_speedup
    speedup = timing.speedup
    assert speedup is not None
    record.speedup, record.speedup_low, record.speedup_high = speedup.median, speedup.low, speedup.high
    processes = timing.processes  # every timing: each process's loads
    first = processes[0]  # this process's first load's rounds, judged with its repeats'
    loads = [0, *(repeat.load for repeat in timing.repeats)]
    record.timing_processes, record.timing_loads = 1 + max(timing.process_of), 1 + max(loads)
    if timing.repeats:
        record.process_speedups = [p.speedup.median for p in processes]
        assert cell.footprint is not None  # a triple built in a worker has its footprint
        record.process_pids = [cell.footprint.pid, *(repeat.pid for repeat in timing.repeats)]
        record.process_loads = loads
        counted = timing.in_band
        record.process_counted = counted
        in_band = {process for process, kept in zip(timing.process_of, counted, strict=True) if kept}
        record.band_quantile = t_975(band_units(len(in_band), sum(counted)))  # one process: over its loads
        record.process_eager_ms = [round(p.eager_median * 1e3, 5) for p in processes]
        record.process_compiled_ms = [round(p.compiled_median * 1e3, 5) for p in processes]
        record.first_process_low, record.first_process_high = first.speedup.low, first.speedup.high
        record.slow_cpu_processes = timing.slow_cpu_processes
    record.eager_device_time_ms = timing.eager_device_time_ms
    record.paired_seconds = round(paired.seconds, 3)
    if all(p.probes for p in processes):
        record.process_probe_ms = [round(statistics.median(p.probes), 4) for p in processes]
        record.full_speed_mark_ms = round(min(p.mark for p in processes if p.mark is not None), 4)
    if all(p.cpu_moves is not None for p in processes):
        record.cpu_moves = [p.cpu_moves for p in processes]  # type: ignore[misc]
    slow = first.slow_share
    record.cpu_slow_rounds = round(slow, 3) if slow is not None else None
    record.full_speed_speedup = first.full_speed_speedup
    record.speedup_target, record.speedup_of = timing.target, timing.speedup_of
    record.all_rounds_speedup = paired.all_rounds.median


def write_diagnosis(record: ItemRecord, diagnosis: Diagnosis) -> None:
    """Write where and why the item's check failed into ``record`` (its verdict stays as it was)."""
    record.diagnosis = diagnosis.summary
    record.diagnosis_stage, record.diagnosis_setting, record.diagnosis_op = (
        diagnosis.stage, diagnosis.setting, diagnosis.op
    )  # fmt: skip
    record.diagnosis_kind, record.diagnosis_figures, record.repro = diagnosis.kind, diagnosis.figures, diagnosis.repro
    record.diagnosis_seconds = round(diagnosis.seconds, 1)
    record.diagnosis_draws = diagnosis.counts.get("draws")
    record.diagnosis_eager_runs = diagnosis.counts.get("eager_runs")
    record.diagnosis_compiles = diagnosis.counts.get("compiles")


def start(item: pytest.Item, record: ItemRecord) -> None:
    """Give ``item`` its record (identity filled in; outcome still unknown)."""
    record.nodeid = item.nodeid
    item.stash[RECORD_KEY] = record


def record_of(item: pytest.Item) -> ItemRecord | None:
    return item.stash.get(RECORD_KEY, None)


def conclude(item: pytest.Item, cell: CellResult, diagnose: Callable[[], Diagnosis | None] = lambda: None) -> None:
    """Write ``cell`` into the item's record, then (for a failed check) its diagnosis, and end the item: pass, fail
    with the explanation, or skip."""
    record = item.stash[RECORD_KEY]
    write_cell(record, cell)
    if (diagnosis := diagnose()) is not None:
        write_diagnosis(record, diagnosis)
    end(item, record, cell.verdict)


def end(item: pytest.Item, record: ItemRecord, verdict: Verdict) -> None:
    """End the item as its verdict says: pass, fail with the explanation, or skip (warning on no effect)."""
    result = verdict.result
    if verdict.no_effect is not None and result.outcome is not Outcome.NO_EFFECT and record.counts_as_check:
        path, line, _ = item.reportinfo()
        warnings.warn_explicit(NoEffectWarning(verdict.no_effect), NoEffectWarning, str(path), (line or 0) + 1)
    if result.outcome is Outcome.PASS:
        return
    if result.outcome is Outcome.EAGER_NONDETERMINISTIC:  # not the compiler's fault: reported at the test
        raise pytest.skip.Exception(f"eager_nondeterministic: {result.reason}", _use_item_location=True)
    if result.outcome is Outcome.SKIPPED:  # not run on purpose (over --inductor-memory-budget)
        raise pytest.skip.Exception(result.reason, _use_item_location=True)
    if item.config.option.tbstyle == "long" and result.error is not None:
        raise result.error
    diagnosed = f"\ndiagnosis: {record.diagnosis}" + (f"\nrepro: python {record.repro}" if record.repro else "")
    pytest.fail(f"{result.outcome.value}: {result.details or result.reason}" + (diagnosed if record.diagnosis else ""),
                pytrace=False)  # fmt: skip


NOT_RUN = "not diagnosed:"  # a diagnosis refused by the run's cap or budget


def _diagnoses(records: list[ItemRecord]) -> list[ItemRecord]:
    """One record per diagnosis that ran (a sample's check and bench items share their triple's)."""
    ran = [r for r in records if r.diagnosis_seconds is not None and not (r.diagnosis or "").startswith(NOT_RUN)]
    return list({(r.sample, r.template, r.device): r for r in ran}.values())


def diagnosis_seconds(records: list[ItemRecord]) -> float | None:
    """What the run's diagnoses took in all, or None where none ran."""
    ran = _diagnoses(records)
    return round(sum(r.diagnosis_seconds or 0.0 for r in ran), 1) if ran else None


def diagnosis_total(records: list[ItemRecord]) -> str:
    """The line under the diagnoses: how many ran and what they took and cost in all."""
    ran = _diagnoses(records)
    compiles = sum(r.diagnosis_compiles or 0 for r in ran)
    draws = sum(r.diagnosis_draws or 0 for r in ran)
    return (
        f"{len(ran)} diagnoses took {diagnosis_seconds(records) or 0:g} s in all ({draws} draws, {compiles} compiles;"
        " --inductor-diagnose-run-budget bounds a run's)"
    )


def counted(report: pytest.TestReport) -> bool:
    """One report per item counts: the call, or the setup when the item went no further."""
    return report.when == "call" or (report.when == "setup" and not report.passed)


def first_line(report: pytest.TestReport) -> str:
    """The first line of what a report says: a skip's reason, or a failure's first line."""
    text = str(report.longrepr) if report.longrepr else ""
    if report.skipped and isinstance(report.longrepr, tuple):
        text = report.longrepr[2]
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _summary_line_only(report: pytest.TestReport) -> None:
    """Keep a failure's short-summary message to its first line. pytest quotes the whole message there on CI (``CI``
    or ``BUILD_NUMBER`` set) and under ``-vv``: the details of the plugin's failures (a hung worker's stack, the last
    lines of its stderr, a diagnosis) would be printed twice; they stay in the failure's own section."""
    crash = getattr(report.longrepr, "reprcrash", None)  # the same object as the newest of its chain (xdist sends it)
    if crash is not None and "\n" in crash.message:
        crash.message = crash.message.splitlines()[0]


def complete(item: pytest.Item, report: pytest.TestReport) -> None:
    """At the item's counted report: settle its outcome from the report where the item recorded none (or
    recorded a pass and failed later), and put the record on the report and the item (JUnit XML writes the
    properties of the item's last report)."""
    record = record_of(item)
    if record is None or not counted(report):
        return
    if report.skipped and record.outcome in (None, Outcome.PASS):
        record.outcome, record.reason = Outcome.SKIPPED, first_line(report)
    elif report.failed and record.outcome not in FAILURES:
        record.outcome, record.reason = Outcome.RUNTIME_FAIL, first_line(report)
    elif report.failed:
        _summary_line_only(report)
    elif report.passed and record.outcome is None:
        record.outcome = Outcome.PASS
    if record.outcome is not Outcome.PASS:
        record.drop_speedup()
    properties = record.properties()
    report.user_properties.extend(properties)
    item.user_properties.extend(properties)
