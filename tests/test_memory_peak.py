"""Peak memory per item: eager's and compiled's peak CUDA memory of a steady call, and their ratio, in the records,
the tables, the report, compare and its memory gate. Off CUDA nothing is measured: the CPU has no allocator peak.

The real runs here are on the CPU; the peaks a GPU would measure are written into copies of their saved records
(the one thing that cannot exist on this machine). tests/test_gpu_memory.py measures real peaks on a GPU.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import SharedRuns, cli
from pytest_inductor_templates.check.result import CheckResult
from pytest_inductor_templates.engine.cell import CellResult, Verdict
from pytest_inductor_templates.machine import CPU
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.report.records import write_cell
from pytest_inductor_templates.report.terminal import MEMORY_NOTE, SPEEDUP_TITLE, speedup_table
from pytest_inductor_templates.runs.files import load
from pytest_inductor_templates.timing.memory_peak import PeakMemory, peak_memory
from pytest_inductor_templates.worker import protocol

MiB = 1024 * 1024
FIELDS = ("eager_peak_mib", "compiled_peak_mib", "memory_ratio")


@pytest.fixture(scope="module")
def cpu_run(shared_runs: SharedRuns) -> tuple[dict[str, Path], str]:
    """A real run of two built-in samples (launch_bound, embedding) on the CPU, saved as pytest-benchmark JSON and as
    a results file, with its terminal output: the session's base run (tests/shared_runs.py)."""
    base = shared_runs["base"]
    output = base.with_suffix(".out").read_text()
    assert base.with_suffix(".returncode").read_text() == "0", output[-3000:]
    return {"run.json": base, "run.jsonl": base.with_suffix(".jsonl")}, output


def with_peaks(source: Path, target: Path, peaks: dict[str, tuple[float, float]]) -> Path:
    """A copy of a saved run (JSON or results file) whose ``default`` bench records of the samples in ``peaks`` carry
    the peaks a GPU would have measured, (eager MiB, compiled MiB), and their ratio."""

    def plant(record: dict[str, Any]) -> None:
        if record.get("kind") == "bench" and record.get("template") == "default" and record["sample"] in peaks:
            eager, compiled = peaks[record["sample"]]
            record.update(eager_peak_mib=eager, compiled_peak_mib=compiled, memory_ratio=eager / compiled)

    if source.suffix == ".jsonl":
        lines = [json.loads(line) for line in source.read_text().splitlines()]
        for line in lines:
            if "record" in line:
                plant(line["record"])
        target.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return target
    data = json.loads(source.read_text())
    for record in data["inductor_templates"]["items"]:
        plant(record)
    for entry in data["benchmarks"]:
        plant(entry["extra_info"])
    target.write_text(json.dumps(data))
    return target


def test_a_real_cpu_run_records_no_peak(cpu_run) -> None:
    """The compiled bench items were timed in pairs with eager (the condition for peaks on CUDA), yet on the CPU no
    record, entry or results line has a peak, and the speedup table has no memory column."""
    paths, stdout = cpu_run
    for path in paths.values():
        records = load(str(path)).records
        timed = [r for r in records if r.kind == "bench" and r.template == "default"]
        assert len(timed) == 2 and all(r.speedup is not None for r in timed), [r.to_dict() for r in timed]
        assert all(getattr(r, name) is None for r in records for name in FIELDS)
    for entry in json.loads(paths["run.json"].read_text())["benchmarks"]:
        assert not set(FIELDS) & set(entry["extra_info"])
    assert SPEEDUP_TITLE in stdout and "default memory" not in stdout and MEMORY_NOTE not in stdout


def test_nothing_is_measured_off_cuda() -> None:
    """On the CPU neither model is even called for a peak: there is none to read."""
    calls: list[str] = []
    assert peak_memory(lambda: calls.append("eager"), lambda: calls.append("compiled"), CPU) is None
    assert calls == []


def test_the_peaks_cross_the_worker_pipe_into_the_record() -> None:
    """A cell's peaks travel in the worker's reply (a pickle) and land in the bench item's record, in MiB, with
    eager / compiled as the ratio; a failed item keeps none."""
    peak = PeakMemory(eager_bytes=300 * MiB, compiled_bytes=240 * MiB + MiB // 2)
    stream = io.BytesIO()
    protocol.write_message(stream, protocol.Ran(CellResult(Verdict(CheckResult(Outcome.PASS)), peak=peak)))
    stream.seek(0)
    reply = protocol.read_message(stream)
    assert isinstance(reply, protocol.Ran) and reply.cell.peak == peak
    record = ItemRecord("builtin/x", "default", "cuda:0", "bench")
    write_cell(record, reply.cell)
    assert (record.eager_peak_mib, record.compiled_peak_mib) == (300.0, 240.5)
    assert record.memory_ratio == 300 / 240.5
    assert {"eager_peak_mib", "compiled_peak_mib", "memory_ratio"} <= set(record.to_dict())
    record.outcome = Outcome.RUNTIME_FAIL  # failed after its cell passed (a teardown, say)
    record.drop_speedup()
    assert not {"eager_peak_mib", "compiled_peak_mib", "memory_ratio"} & set(record.to_dict())
    assert PeakMemory(1, 0).ratio is None


@pytest.fixture(scope="module")
def planted(cpu_run, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The CPU run with the peaks a GPU would measure: ``base`` (JSON) and ``same`` (its results file) with the same
    peaks; ``heavier`` (the results file) where launch_bound's compiled call peaks 50 MiB higher."""
    paths, _ = cpu_run
    root = tmp_path_factory.mktemp("memory")
    base = {"builtin/launch_bound": (100.0, 100.0), "builtin/embedding": (200.0, 100.0)}
    heavier = {**base, "builtin/launch_bound": (100.0, 150.0)}
    return {
        "run": paths["run.json"],
        "base": with_peaks(paths["run.json"], root / "base.json", base),
        "same": with_peaks(paths["run.jsonl"], root / "same.jsonl", base),
        "heavier": with_peaks(paths["run.jsonl"], root / "heavier.jsonl", heavier),
    }


DROP = (
    "- default: memory ratio on builtin/launch_bound [cpu] fell 33.3% (1x -> 0.667x; compiled peak 100 -> 150 MiB, "
    "eager peak 100 -> 100 MiB)"
)


def test_the_memory_gate_fails_a_planted_drop_and_passes_identical_runs(planted) -> None:
    heavier = cli("compare", str(planted["base"]), str(planted["heavier"]), "--fail-on", "memory:10%")
    assert heavier.returncode == 1, heavier.stdout + heavier.stderr
    assert DROP in heavier.stdout.splitlines() and "builtin/embedding [cpu] fell" not in heavier.stdout
    same = cli("compare", str(planted["base"]), str(planted["same"]), "--fail-on", "memory:10%")
    assert same.returncode == 0 and "FAILED" not in same.stdout, same.stdout + same.stderr
    within = cli("compare", str(planted["base"]), str(planted["heavier"]), "--fail-on", "memory:40%")
    assert within.returncode == 0 and "FAILED" not in within.stdout, within.stdout
    lighter = cli("compare", str(planted["heavier"]), str(planted["base"]), "--fail-on", "memory:10%")
    assert lighter.returncode == 0, lighter.stdout  # the compiled model got lighter: no regression
    both = cli("compare", str(planted["base"]), str(planted["heavier"]), "--fail-on", "memory:10%", "--format", "json")
    assert both.returncode == 1 and json.loads(both.stdout)["failures"] == [DROP.removeprefix("- ")]


def test_the_memory_gate_without_ratios_in_both_runs_is_nothing_to_compare(planted) -> None:
    """CPU runs have no memory ratio: the gate gates nothing, which is an error (exit 2, one line), not a pass."""
    result = cli("compare", str(planted["run"]), str(planted["heavier"]), "--fail-on", "memory:10%")
    assert result.returncode == 2 and result.stdout == "", result.stdout
    assert result.stderr == (
        "pytest-inductor-templates compare: error: nothing to compare: no compiled entry has a memory ratio in both "
        "runs (base has 0, new has 2; peaks are measured on CUDA only, by compiled bench items that passed and were "
        "timed)\n"
    )


@pytest.mark.parametrize("condition", ["memory:abc", "memory:", "memory:-5%", "memory"])
def test_a_bad_memory_limit_is_one_line_and_exit_2(planted, condition: str) -> None:
    result = cli("compare", str(planted["base"]), str(planted["base"]), "--fail-on", condition)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        f"pytest-inductor-templates compare: error: argument --fail-on: {condition!r}: expected speedup:N% "
        "(e.g. speedup:5%), compile-time:N% (e.g. compile-time:20%), memory:N% (e.g. memory:10%), graph-breaks or "
        "correctness (--help for usage)"
    ]


def test_compare_shows_memory_ratio_changes_in_every_format(planted) -> None:
    table = cli("compare", str(planted["base"]), str(planted["heavier"])).stdout
    header = next(line for line in table.splitlines() if line.startswith("sample [device]"))
    assert header.endswith("memory ratio (change)"), header
    rows = {line.split()[0]: line for line in table.splitlines() if line.startswith("builtin/")}
    assert rows["builtin/launch_bound"].endswith("1x -> 0.667x (-33.3%)")
    assert rows["builtin/embedding"].endswith("2x -> 2x (+0.0%)")
    markdown = cli("compare", str(planted["base"]), str(planted["heavier"]), "--format", "markdown").stdout
    assert "| outcome | memory ratio (change) |" in markdown and "| 1x -> 0.667x (-33.3%) |" in markdown
    data = json.loads(cli("compare", str(planted["base"]), str(planted["heavier"]), "--format", "json").stdout)
    launch_bound = next(r for r in data["templates"]["default"]["rows"] if r["sample"] == "builtin/launch_bound")
    assert launch_bound["memory_change"] == pytest.approx(-1 / 3)
    assert (launch_bound["base_memory_ratio"], launch_bound["new_compiled_peak_mib"]) == (1.0, 150.0)
    plain = cli("compare", str(planted["run"]), str(planted["run"])).stdout  # no ratio in either run: no column
    assert "memory ratio" not in plain


def test_the_report_and_the_terminal_table_show_memory_ratios(planted) -> None:
    from pytest_inductor_templates.tables import speedup_text

    run = load(str(planted["heavier"]))
    default, eager = (run.cells["builtin/launch_bound", t, "cpu"].bench for t in ("default", "eager"))
    assert default is not None
    report = cli("report", str(planted["heavier"])).stdout.splitlines()
    assert f"| builtin/launch_bound [cpu] | pass / {speedup_text(default, eager)} / memory 0.667x |" in report
    assert "| geomean memory ratio | 1.15x over 2 |" in report  # the geomean of 0.667x and 2x
    assert any(line.startswith("Memory: eager's peak CUDA memory in a steady call") for line in report)
    assert "memory" not in cli("report", str(planted["run"])).stdout.lower()
    summary = next(i for i, line in enumerate(report) if line.startswith("| template | cells |"))  # per template
    assert report[summary].endswith("| compile cache | geomean memory ratio |"), report[summary]
    assert report[summary + 2].startswith("| default | 2 |") and report[summary + 2].endswith("| 1.15x over 2 |")
    table = speedup_table(run.records)
    assert re.split(r"\s{2,}", table[0]) == ["sample [device]", "default", "default memory"]
    assert re.split(r"\s{2,}", next(line for line in table if line.startswith("builtin/launch_bound")))[-1] == "0.667x"
    assert re.split(r"\s{2,}", next(line for line in table if line.startswith("geomean")))[-1] == "1.15x"
    assert table[-1] == MEMORY_NOTE
    assert "default memory" not in speedup_table(load(str(planted["run"])).records)[0]
