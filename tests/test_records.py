"""One record per item: every output (properties, JUnit XML, benchmark JSON, report, compare) tells the same story."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from inner_runs import run_pytest_warm, runpytest_warm

from conftest import FAST, QUIET, SharedRuns, cli, junit_properties, no_cuda_machine
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.record import FORMAT, ItemRecord
from pytest_inductor_templates.tables import percent, speedup_cell, speedup_text, times

ATEN_LAUNCH_BOUND = ("--inductor-samples", "--inductor-template=aten", "--inductor-devices=cpu", "-k", "launch_bound")


def test_a_record_survives_every_encoding() -> None:
    record = ItemRecord(
        "builtin/x", "default", "cuda:0", "bench", outcome=Outcome.ACCURACY_FAIL, reason="r", median=1.5
    )
    record.settings = {"max_autotune": True}
    record.check_rule, record.fp64_second_opinion = "second opinion: slice", "out: against float64, ..."
    assert ItemRecord.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    assert ItemRecord.from_properties([("other", 1), *record.properties()]) == record
    assert ItemRecord.from_properties([("inductor_sample", "x")]) is None  # no outcome: not a finished record
    assert "speedup" not in record.to_dict()  # unset fields are left out


def test_the_rule_that_decided_reaches_the_record_and_the_report() -> None:
    """A pass cleared by the float64 second opinion says so, with its figures (it used to be dropped)."""
    from pytest_inductor_templates.check.result import CheckResult
    from pytest_inductor_templates.engine.cell import CellResult, Verdict
    from pytest_inductor_templates.report.records import write_cell
    from pytest_inductor_templates.runs.files import Run
    from pytest_inductor_templates.runs.markdown import as_markdown

    evidence = "out[0]: against float64, compiled vs eager: RMSE 8.3e-06 vs 8.7e-06, worst element 4e-05 vs 4e-05"
    cleared = ItemRecord("corpus/yolo", "default", "cpu", "check")
    passed = CheckResult(Outcome.PASS, level=-4, rule="second opinion", second_opinions=[evidence])
    write_cell(cleared, CellResult(Verdict(passed)))
    assert ("inductor_check_rule", "second opinion") in cleared.properties()
    assert ("inductor_fp64_second_opinion", evidence) in cleared.properties()
    failed = ItemRecord("corpus/opt", "default", "cpu", "check")
    result = CheckResult(Outcome.ACCURACY_FAIL, "call 1 of 2: out[0]: ...", rule="first comparison")
    write_cell(failed, CellResult(Verdict(result)))
    report = as_markdown(Run("run.json", {"inductor_templates": {}}, [cleared, failed]))
    assert "| corpus/yolo [cpu] | pass (second opinion) |" in report
    assert f"- corpus/yolo/default/cpu: {evidence}" in report.split("Passed on the float64 second opinion:")[1]
    assert "- corpus/opt/default/cpu: accuracy_fail: call 1 of 2: out[0]: ..." in report  # the first comparison


def test_the_paired_rounds_cpu_probe_reaches_the_record() -> None:
    """cpu_slow_rounds is the share of paired rounds whose CPU probe ran slow; full_speed_speedup the median ratio over
    the other rounds (here 3x, where the median over all rounds reads 4.5x), left out below 10 full-speed rounds; the
    speedup is the full-speed one where there is one."""
    from pytest_inductor_templates.check.result import CheckResult
    from pytest_inductor_templates.engine.cell import CellResult, Verdict
    from pytest_inductor_templates.report.records import write_cell
    from pytest_inductor_templates.timing.measure import Timing
    from pytest_inductor_templates.timing.paired import Interval, PairedTiming
    from pytest_inductor_templates.timing.rounds import Rounds

    def record_of(full: int, slow: int) -> ItemRecord:
        eager, probes = [3e-3] * full + [4.5e-3] * slow, [1.0] * full + [2.0] * slow  # slow: the probe took 2x
        paired = PairedTiming(eager, [1e-3] * (full + slow), None, None, (1, 1), Interval(4.5, 4.4, 4.6), 0.02, 1.0)
        paired = dataclasses.replace(paired, probes=probes)
        timing = Timing(Rounds(1, [1e-3] * 3), "time.perf_counter", 1, 5, paired=paired)
        record = ItemRecord("builtin/x", "default", "cpu", "bench")
        write_cell(record, CellResult(Verdict(CheckResult(Outcome.PASS)), timing=timing))
        return record

    record = record_of(full=10, slow=11)
    assert record.full_speed_speedup == pytest.approx(3.0) == record.speedup  # the speedup is the full-speed rounds'
    assert record.speedup_of == "full-speed rounds" and record.all_rounds_speedup == 4.5  # every round's beside it
    assert record.cpu_slow_rounds == round(11 / 21, 3) and record.paired_rounds == 21
    assert record.process_probe_ms == [2.0] and record.full_speed_mark_ms == 1.0  # its median probe; the lower decile
    few = record_of(full=9, slow=11)  # too few at full speed, most of them slow: every round, said so
    assert few.full_speed_speedup is None and "full_speed_speedup" not in few.to_dict()
    assert few.speedup == 4.5 and few.speedup_of == "slow-CPU rounds"
    mostly_fast = record_of(full=9, slow=5)  # too few rounds in all to keep a part: every round
    assert mostly_fast.speedup == 4.5 and mostly_fast.speedup_of == "all rounds"


@pytest.mark.parametrize(
    ("probes", "host_shares", "loads", "counted"),
    [
        ((0.2, 0.1, 0.1, 0.1), (0.3, 0.7), False, [False, True, True, True]),  # CUDA, three of four at full speed
        ((0.2, 0.2, 0.1, 0.1), (0.3, 0.7), False, [True] * 4),  # CUDA, only half at full speed: every timing counts
        ((0.2, 0.1, 0.1, 0.1), None, False, [True] * 4),  # the CPU: every timing counts
        ((0.2, 0.1, 0.1, 0.1), (0.3, 0.7), True, [True] * 4),  # four loads of one process: every load counts
    ],
)
def test_a_timing_whose_cpu_ran_slow_throughout_is_left_out_where_most_ran_at_full_speed(
    probes: tuple[float, ...], host_shares: tuple[float, float] | None, loads: bool, counted: list[bool]
) -> None:
    """The item's own process met a CPU twice as slow as the others' mark (its launch-bound compiled call 4.5 ms
    where theirs took 3.0-3.1): on CUDA, where the timings at full speed are more than half, the band is over them
    and the record says which it left out (``process_counted``, its ``band_quantile`` Student's t over those kept);
    where they are not, on the CPU, or over one process's loads, every timing counts. Either way the record keeps
    every timing's figure and median probe, and the report's line marks the one left out."""
    from pytest_inductor_templates.check.result import CheckResult
    from pytest_inductor_templates.engine.cell import CellResult, Footprint, Verdict
    from pytest_inductor_templates.report.records import write_cell
    from pytest_inductor_templates.student import t_975
    from pytest_inductor_templates.tables import processes_text
    from pytest_inductor_templates.timing.measure import Timing
    from pytest_inductor_templates.timing.paired import Interval, PairedTiming
    from pytest_inductor_templates.timing.processes import Repeat
    from pytest_inductor_templates.timing.rounds import Rounds

    def process(eager: float, probe: float) -> PairedTiming:
        rounds, speedup = 20, eager / 1e-3
        every = Interval(speedup, speedup * 0.99, speedup * 1.01)
        paired = PairedTiming([eager] * rounds, [1e-3] * rounds, None, None, (1, 1), every, 0.02, 1.0)
        return dataclasses.replace(paired, probes=[probe] * rounds)

    eager_ms = (4.5e-3, 3.0e-3, 3.1e-3, 3.05e-3)
    timings = [process(eager, probe) for eager, probe in zip(eager_ms, probes, strict=True)]
    timing = Timing(Rounds(1, [1e-3] * 3), "time.perf_counter", 1, 5, paired=timings[0], host_shares=host_shares)
    timing.repeats = tuple(
        Repeat(t, 1, load) if loads else Repeat(t, pid) for load, (pid, t) in enumerate(enumerate(timings[1:], 2), 1)
    )
    record = ItemRecord("builtin/x", "default", "cuda:0", "bench")
    cell = CellResult(Verdict(CheckResult(Outcome.PASS)), timing=timing, footprint=Footprint(1, None, None))
    write_cell(record, cell)
    assert (record.timing_processes, record.process_counted) == (1 if loads else 4, counted)
    assert record.process_speedups == pytest.approx([4.5, 3.0, 3.1, 3.05]) and record.process_probe_ms == list(probes)
    kept = [s for s, c in zip(record.process_speedups, counted, strict=True) if c]
    assert record.speedup == pytest.approx(math.prod(kept) ** (1 / len(kept)))
    assert record.band_quantile == pytest.approx(t_975(len(kept)))  # over the kept processes, or one's loads
    left_out = "" if all(counted) else " (slow CPU, left out)"
    assert processes_text(record) == f"over 4 timings: 4.5x{left_out}, 3x, 3.1x, 3.05x"


def test_a_speedup_whose_interval_means_nothing_prints_as_noise_and_contradicting_medians_are_named() -> None:
    """A loaded 2-core machine once printed ``attention 3.75x ±268%`` while pytest-benchmark's medians were eager
    64 us and compiled 60 ms: no ``±N%`` past 100%, no point figure for a span over 2x, the medians named."""
    from pytest_inductor_templates.report.terminal import speedup_table

    attention = ItemRecord("builtin/attention", "default", "cpu", "bench", outcome=Outcome.PASS, speedup=3.75)
    attention.speedup_low, attention.speedup_high, attention.unstable, attention.median = -6.3, 13.8, True, 0.060
    eager = ItemRecord("builtin/attention", "eager", "cpu", "bench", outcome=Outcome.PASS, median=64e-6)
    assert speedup_text(attention) == "noise [0x, 13.8x]"
    assert speedup_text(attention, eager) == "noise [0x, 13.8x]"  # such an interval holds even 0.00107x
    attention.speedup_low, attention.speedup_high = 1.9, 4.1  # a span of 2.2x: still no point figure
    disagree = "(benchmark medians disagree: eager's own item gives {}; trust the paired figure)"
    assert speedup_text(attention, eager) == "noise [1.9x, 4.1x] " + disagree.format("0.00107x")
    attention.speedup_low, attention.speedup_high, attention.unstable = 3.6, 3.9, False
    eager.median = 3.7 * attention.median  # unpaired medians near the interval agree with it
    assert speedup_text(attention, eager) == "3.75x ±4%"
    eager.median = 3.9 * 1.3 * attention.median
    assert speedup_text(attention, eager) == "3.75x ±4% " + disagree.format("5.07x")
    row = next(line for line in speedup_table([eager, attention]) if line.startswith("builtin/attention"))
    assert row.endswith("3.75x ±4% " + disagree.format("5.07x"))
    attention.launch_bound = True  # timed seconds apart, two launch-bound medians met different CPU speeds
    assert speedup_text(attention, eager) == "3.75x ±4%"


def test_a_speedup_reads_with_significant_digits_and_its_interval_and_is_dropped_on_failure() -> None:
    record = ItemRecord("s", "default", "cpu", "bench", outcome=Outcome.PASS, speedup=0.00123)
    assert speedup_text(record) == "0.00123x"  # never 0.00x
    record.speedup, record.speedup_low, record.speedup_high, record.unstable = 1.2345, 1.21, 1.26, False
    assert speedup_text(record) == "1.23x ±2%"
    record.speedup, record.speedup_low, record.speedup_high, record.unstable = 317.4, 250.0, 380.0, True
    assert speedup_text(record) == "317x ±20% unstable" and speedup_cell(record) == "317x ±20% unstable"
    assert times(1234.4) == "1234x" and percent(0.0043) == "0.43%" and percent(2.5) == "250%"
    record.outcome = Outcome.ACCURACY_FAIL
    assert speedup_cell(record) == "ACCURACY"
    record.eager_median, record.paired_rounds, record.eager_device_time_ms = 2e-3, 12, 1.9  # the paired figures
    record.drop_speedup()
    dropped = {"speedup", "speedup_low", "speedup_high", "unstable", "eager_median", "paired_rounds"}
    assert not (dropped | {"eager_device_time_ms"}) & set(record.to_dict())


def test_a_no_effect_sample_says_no_effect_in_every_output(tmp_path: Path, shared_runs: SharedRuns) -> None:
    """The check item and the bench item of a triple read one verdict: with --inductor-require-effect, an
    ``aten`` template on a model without a GEMM is ``no_effect`` in the properties, the JUnit XML, the bench
    entry's extra_info, the records, the report and compare (regression: the bench item used to say pass). The base
    run is the session's aten shard (tests/shared_runs.py): the same selection without --inductor-require-effect."""
    base = shared_runs["shard2"]
    assert base.with_suffix(".returncode").read_text() == "0", base.with_suffix(".out").read_text()[-2000:]
    new = run_pytest_warm(
        tmp_path, *ATEN_LAUNCH_BOUND, "--inductor-require-effect", "--inductor-isolation=none",
        "--benchmark-json=new.json", "--junitxml=new.xml", *FAST, *QUIET, "-W", "ignore",
    )  # fmt: skip
    assert new.returncode == 1, new.stdout[-2000:]
    assert "no_effect inductor-samples::builtin/launch_bound::check[aten-cpu]: template 'aten' had no effect" in (
        new.stdout
    )
    properties = junit_properties(tmp_path / "new.xml")
    aten = {name: props for name, props in properties.items() if "aten-cpu" in name}
    assert len(aten) == 2 and {props["inductor_outcome"] for props in aten.values()} == {"no_effect"}
    data = json.loads((tmp_path / "new.json").read_text())
    assert data["inductor_templates"]["format"] == FORMAT
    bench = next(b for b in data["benchmarks"] if b["extra_info"]["template"] == "aten")
    assert bench["extra_info"]["outcome"] == "no_effect" and "speedup" not in bench["extra_info"]
    items = [r for r in data["inductor_templates"]["items"] if r["template"] == "aten"]
    assert [(r["kind"], r["outcome"]) for r in items] == [("check", "no_effect"), ("bench", "no_effect")]
    assert (
        "| builtin/launch_bound [cpu] | no_effect / **no effect** |" in cli("report", str(tmp_path / "new.json")).stdout
    )
    gate = cli("compare", str(base), str(tmp_path / "new.json"), "--fail-on", "correctness")
    assert gate.returncode == 1, gate.stdout
    assert "builtin/launch_bound/aten/cpu: newly failing (pass -> no_effect)" in gate.stdout


def test_a_user_test_and_a_sample_record_the_same_verdict(pytester: pytest.Pytester) -> None:
    """User tests go through the same check-and-judge step: an inductor_benchmark test under ``aten`` with a
    model without a GEMM is ``no_effect`` too, untimed-speedup and all, and counts in the outcome table."""
    pytester.makepyfile(
        test_user="""
        import torch

        def test_speed(inductor_benchmark):
            with torch.no_grad():
                inductor_benchmark(lambda x: torch.relu(x) + 1, torch.randn(64))
        """
    )
    result = runpytest_warm(
        pytester, "--inductor-template=aten", "--inductor-devices=cpu", "--inductor-require-effect",
        "--benchmark-json=run.json", *FAST, *QUIET, "-W", "ignore",
    )  # fmt: skip
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*check outcomes per template*", "aten *1 *0 *0 *0 *0 *0 *0 *1 *0 *0%"])
    data = json.loads((pytester.path / "run.json").read_text())
    (record,) = data["inductor_templates"]["items"]
    assert (record["source"], record["kind"], record["outcome"]) == ("test", "bench", "no_effect")
    assert "speedup" not in record


def test_a_run_of_another_format_is_refused_in_one_line(tmp_path: Path) -> None:
    old = {"benchmarks": [], "inductor_templates": {"format": 1, "items": []}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    result = cli("report", str(tmp_path / "old.json"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"inductor_templates format 1; this version of the plugin reads formats 3, 4 and {FORMAT}" in result.stderr
    record = {"sample": "s", "template": "default", "device": "cuda:0", "kind": "bench", "outcome": "pass",
              "speedup": 1.5, "speedup_low": 1.45, "speedup_high": 1.55}  # fmt: skip
    for earlier in (3, 4):  # saved baselines of the formats before still read (their records lack the new fields)
        (tmp_path / "earlier.json").write_text(json.dumps({"benchmarks": [], "inductor_templates": {
            "format": earlier, "items": [record], "left_out": []}}))  # fmt: skip
        result = cli("report", str(tmp_path / "earlier.json"))
        assert result.returncode == 0 and "pass / 1.5x ±3.3%" in result.stdout, result.stderr


def test_the_command_imports_neither_torch_nor_pytest() -> None:
    code = (
        "import sys, pytest_inductor_templates.runs.cli; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'pytest', '_pytest', 'numpy'}))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


@no_cuda_machine
def test_a_skipped_test_keeps_its_template_and_a_warning_points_at_the_users_test(pytester: pytest.Pytester) -> None:
    """A checked test skipped at setup (cudagraphs on a CPU machine) counts under its template, not ``?``; a
    NoEffectWarning names the user's test file and line, not the plugin's."""
    pytester.makepyfile(
        test_user="""
        import torch


        def test_block(inductor_check):
            inductor_check(lambda x: x.relu() + 1, torch.randn(8))
        """
    )
    result = runpytest_warm(
        pytester, "--inductor-template=aten,cudagraphs", "-p", "no:cacheprovider", "--inductor-cpu-probe=0"
    )
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*check outcomes per template*",
            "aten *1 *1 *0 *0 *0 *0 *0 *0 *0 *100%",
            "cudagraphs *1 *0 *0 *0 *0 *0 *0 *0 *1 *-",
        ]
    )
    assert "\n?" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*/test_user.py:4: NoEffectWarning: template 'aten' had no effect: aten: no GEMM*"])


def test_an_unstable_band_never_prints_as_within_its_target() -> None:
    """A band of ±2.04% against a 2% target printed ``±2% unstable``: it takes the digits that show it is wider."""
    record = ItemRecord("builtin/x", "default", "cuda:0", "bench", outcome=Outcome.PASS, speedup=1.5)
    record.speedup_low, record.speedup_high, record.speedup_target = 1.5 * 0.9796, 1.5 * 1.0204, 0.02
    record.unstable = True
    assert speedup_text(record) == "1.5x ±2.04% unstable"
    record.speedup_low, record.speedup_high, record.unstable = 1.5 * 0.9804, 1.5 * 1.0196, False
    assert speedup_text(record) == "1.5x ±2%"
    record.speedup_low, record.speedup_high, record.unstable = 1.5 * 0.97, 1.5 * 1.03, True
    assert speedup_text(record) == "1.5x ±3% unstable"


def test_a_record_timed_in_eight_processes_keeps_the_t_of_its_trimmed_band_for_compare() -> None:
    """Eight processes, one far from the others: the record's band is the 20%-trimmed mean's over the six kept, and
    its ``band_quantile`` is Student's t for six values (2.571), which ``compare`` divides the band by to read its
    standard error back (t for eight, 2.365, would read it wider than it was made)."""
    from pytest_inductor_templates.check.result import CheckResult
    from pytest_inductor_templates.engine.cell import CellResult, Footprint, Verdict
    from pytest_inductor_templates.report.records import write_cell
    from pytest_inductor_templates.timing.measure import Timing
    from pytest_inductor_templates.timing.paired import Interval, PairedTiming
    from pytest_inductor_templates.timing.processes import Repeat, trimmed_band
    from pytest_inductor_templates.timing.rounds import Rounds

    def process(speedup: float) -> PairedTiming:
        every = Interval(speedup, speedup * 0.99, speedup * 1.01)
        return PairedTiming([speedup * 1e-3] * 20, [1e-3] * 20, None, None, (1, 1), every, 0.02, 1.0)

    speedups = [1.5, 1.52, 1.48, 1.51, 1.49, 1.515, 1.485, 1.0]
    timing = Timing(Rounds(1, [1e-3] * 3), "time.perf_counter", 1, 5, paired=process(speedups[0]))
    timing.repeats = tuple(Repeat(process(s), pid) for pid, s in enumerate(speedups[1:], start=2))
    record = ItemRecord("builtin/x", "default", "cuda:0", "bench")
    write_cell(
        record, CellResult(Verdict(CheckResult(Outcome.PASS)), timing=timing, footprint=Footprint(1, None, None))
    )
    assert record.timing_processes == 8 and record.band_quantile == 2.571
    centre, half = trimmed_band([math.log(s) for s in speedups])
    assert record.speedup == pytest.approx(math.exp(centre)) and record.speedup_high == pytest.approx(
        math.exp(centre + half)
    )
    assert record.speedup_high / record.speedup < 1.02  # the far process sets neither the centre nor the band
