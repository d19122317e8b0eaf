"""The pytest-inductor-templates command on real runs: compare (with --fail-on), merge and plot."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from inner_runs import run_pytest_warm
from shared_runs import GATE

from conftest import FAST, QUIET, SharedRuns, cli
from pytest_inductor_templates.record import FORMAT, ItemRecord
from pytest_inductor_templates.tables import speedup_text


@pytest.fixture
def runs(shared_runs: SharedRuns) -> SharedRuns:
    """The session's built-in runs (tests/shared_runs.py): base, rerun, failing, slowed, shard1 and shard2."""
    return shared_runs


def _row(output: str, sample: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(f"{sample} [cpu]"))


def test_an_unchanged_run_passes(runs) -> None:
    same = cli("compare", str(runs["base"]), str(runs["base"]), "--fail-on", "speedup:5%", "--fail-on", "correctness")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "template default: geomean speedup" in same.stdout and "+0.0%" in same.stdout
    rerun = cli("compare", str(runs["base"]), str(runs["rerun"]), *GATE, "--fail-on", "correctness")
    assert rerun.returncode == 0, rerun.stdout  # the same commit again: within noise, and nothing newly fails
    assert "geomean speedup" in rerun.stdout and "over 1 sample timed in both runs" in rerun.stdout  # embedding
    report = cli("report", str(runs["base"])).stdout  # a steady planted clock: eager's own item and the paired
    assert "| builtin/embedding [cpu] | pass / " in report and "medians disagree" not in report  # eager blocks agree


def test_a_planted_slowdown_fails_the_speedup_gate_with_the_intervals_shown(runs) -> None:
    base = json.loads(runs["base"].read_text())
    speedups = {r["sample"]: r for r in base["inductor_templates"]["items"] if r["template"] == "default"}
    result = cli("compare", str(runs["base"]), str(runs["slowed"]), *GATE)
    assert result.returncode == 1, result.stdout
    drop = re.search(r"- default: speedup on builtin/embedding \[cpu\] fell (\d+\.\d)% \((.*)\)", result.stdout)
    assert drop is not None, result.stdout
    assert float(drop.group(1)) == 50.0  # each compiled call took twice as long on the planted clock: 1 ms -> 2 ms
    sides = re.fullmatch(r"[0-9.]+x -> [0-9.]+x; change -\d+\.\d% \[-\d+\.\d%, -\d+\.\d%\]; "
                         r"compiled time \+(\d+\.\d)%, eager time ([-+]\d+\.\d)%", drop.group(2))  # fmt: skip
    assert sides is not None, drop.group(2)
    assert float(sides.group(1)) == 100.0 and float(sides.group(2)) == 0.0  # which side moved: the compiled one
    row = _row(result.stdout, "builtin/embedding")
    assert speedup_text(ItemRecord.from_dict(speedups["builtin/embedding"])) in row  # 1.08x ±7.1% and so on
    assert cli("compare", str(runs["base"]), str(runs["slowed"]), "--fail-on", "speedup:99%").returncode == 0


def _with_launch_bound_speedup(runs, path: Path, speedup: float, low: float, high: float) -> Path:
    """The base run with launch_bound's default speedup and interval replaced."""
    data = json.loads(runs["base"].read_text())
    for record in data["inductor_templates"]["items"]:
        if record["template"] == "default" and record["sample"] == "builtin/launch_bound" and record["kind"] == "bench":
            record.update(speedup=speedup, speedup_low=low, speedup_high=high)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("base", "new", "flagged"),
    [
        ((2.0, 1.4, 2.6), (1.76, 1.23, 2.29), False),  # +-30% wide: the change's interval includes no change
        ((2.0, 1.94, 2.06), (1.76, 1.71, 1.81), False),  # +-3%: below no change, but reaching above -10%
        ((2.0, 1.99, 2.01), (1.76, 1.75, 1.77), True),  # +-0.5%: the whole interval lies below -10%
    ],
    ids=["wide", "reaching-within-the-limit", "narrow"],
)
def test_a_fall_is_flagged_only_when_its_interval_lies_beyond_the_limit(
    runs, tmp_path: Path, base, new, flagged
) -> None:
    """A speedup 12% lower against a 10% limit: flagged only when the change's whole 95% interval lies below
    -10%; otherwise shown under 'not flagged' with its interval."""
    result = cli(
        "compare",
        str(_with_launch_bound_speedup(runs, tmp_path / "base.json", *base)),
        str(_with_launch_bound_speedup(runs, tmp_path / "new.json", *new)),
        "--fail-on",
        "speedup:10%",
    )
    assert result.returncode == (1 if flagged else 0), result.stdout
    line = re.search(r"- default: speedup on builtin/launch_bound \[cpu\] fell 12.0% \(2x -> 1.76x; change "
                     r"-12.0% \[([-+]?\d+\.\d)%, ([-+]?\d+\.\d)%\]; compiled time \+0.0%, eager time \+0.0%\)",
                     result.stdout)  # fmt: skip
    assert line is not None, result.stdout
    low, high = float(line.group(1)), float(line.group(2))
    assert low < -10 and (high < -10) == flagged
    heading = "not flagged: fell by more than the limit, but the 95% interval of the change reaches within it:"
    assert (heading in result.stdout) != flagged
    assert ("FAILED:" in result.stdout) == flagged


def test_a_run_saved_without_paired_medians_shows_no_eager_change(runs, tmp_path: Path) -> None:
    """A base run saved before paired timing kept no eager or compiled paired medians: the compiled side's change
    comes from pytest-benchmark's medians, eager's is n/a in the gate line, the table and the JSON."""
    base = _with_launch_bound_speedup(runs, tmp_path / "base.json", 2.0, 1.99, 2.01)
    data = json.loads(base.read_text())
    for record in data["inductor_templates"]["items"]:
        record.pop("eager_median", None)
        record.pop("compiled_median", None)
    base.write_text(json.dumps(data))
    new = _with_launch_bound_speedup(runs, tmp_path / "new.json", 1.76, 1.75, 1.77)
    result = cli("compare", str(base), str(new), "--fail-on", "speedup:10%")
    assert result.returncode == 1, result.stdout
    assert re.search(r"change -12.0% \[-1\d\.\d%, -1\d\.\d%\]; compiled time \+0.0%, eager time n/a\)", result.stdout)
    row = _row(result.stdout, "builtin/launch_bound")
    assert row.split()[-3:] == ["+0.0%", "n/a", "pass"]
    rows = json.loads(cli("compare", str(base), str(new), "--format", "json").stdout)["templates"]["default"]["rows"]
    launch_bound = next(r for r in rows if r["sample"] == "builtin/launch_bound")
    assert launch_bound["eager_change"] is None and launch_bound["time_change"] == 0.0


def test_nothing_comparable_exits_2(runs, tmp_path: Path) -> None:
    disjoint = cli("compare", str(runs["rerun"]), str(runs["shard1"]))  # embedding against launch_bound
    assert disjoint.returncode == 2 and disjoint.stdout == ""
    assert disjoint.stderr.strip() == (
        "pytest-inductor-templates compare: error: nothing to compare: no entry is in both runs (2 in base, 2 in new)"
    )
    data = json.loads(runs["base"].read_text())
    data["machine_info"].update(gpu="NVIDIA H200", gpu_compute_capability="9.0")  # no GPU here to time on
    other_gpu = tmp_path / "h200.json"
    other_gpu.write_text(json.dumps(data))
    gpus = cli("compare", str(runs["base"]), str(other_gpu))
    assert gpus.returncode == 2 and "the runs are from different GPUs (no GPU vs NVIDIA H200)" in gpus.stderr
    assert cli("compare", str(runs["base"]), str(other_gpu), "--fail-on", "correctness").returncode == 0


def test_a_planted_new_failure_fails_the_correctness_gate(runs) -> None:
    result = cli("compare", str(runs["base"]), str(runs["failing"]), "--fail-on", "correctness")
    assert result.returncode == 1, result.stdout
    assert "newly failing: builtin/embedding/default/cpu (pass -> accuracy_fail)" in result.stdout
    assert "- builtin/embedding/default/cpu: newly failing (pass -> accuracy_fail)" in result.stdout
    reverse = cli("compare", str(runs["failing"]), str(runs["base"]), "--fail-on", "correctness")
    assert reverse.returncode == 0 and "newly passing: builtin/embedding/default/cpu" in reverse.stdout


def test_markdown_and_json_formats(runs) -> None:
    markdown = cli("compare", str(runs["base"]), str(runs["failing"]), "--format", "markdown").stdout
    assert markdown.startswith("## pytest-inductor-templates compare")
    assert "| sample [device] | base speedup | new speedup | change [95% interval] |" in markdown
    data = json.loads(cli("compare", str(runs["base"]), str(runs["failing"]), "--format", "json").stdout)
    assert data["newly_failing"] == [
        {"key": ["builtin/embedding", "default", "cpu"], "base": "pass", "new": "accuracy_fail"}
    ]
    rows = {r["sample"]: r for r in data["templates"]["default"]["rows"]}
    assert rows["builtin/embedding"]["new_speedup"] is None  # a failed item has no speedup
    assert rows["builtin/launch_bound"]["speedup_change"] is not None
    launch_bound = rows["builtin/launch_bound"]  # each side's time change beside the speedup's: the paired medians
    assert launch_bound["eager_change"] == pytest.approx(
        launch_bound["new_eager_median"] / launch_bound["base_eager_median"] - 1
    )
    assert launch_bound["time_change"] == pytest.approx(
        launch_bound["new_compiled_median"] / launch_bound["base_compiled_median"] - 1
    )
    # one measurement: the compiled item's pytest-benchmark rounds are its paired compiled blocks
    assert launch_bound["new_compiled_median"] == pytest.approx(launch_bound["new_median"])
    assert "| compiled time | eager time | outcome |" in markdown


def test_merge_joins_shards_split_by_template_and_refuses_overlaps(runs, tmp_path: Path) -> None:
    """One CI job per template: every shard runs the eager row. merge keeps the first shard's, and each compiled
    entry keeps the speedup it measured, paired with eager in its own item."""
    out = tmp_path / "merged.json"
    merged = cli("merge", str(runs["shard1"]), str(runs["shard2"]), "-o", str(out))
    assert merged.returncode == 0, merged.stderr
    assert f"{runs['shard2']}: 2 eager item(s) already in an earlier shard: dropped" in merged.stdout
    data = json.loads(out.read_text())
    entries = {b["extra_info"]["template"]: b for b in data["benchmarks"]}
    assert len(data["benchmarks"]) == 3 and set(entries) == {"eager", "default", "aten"}
    assert [(r["template"], r["kind"]) for r in data["inductor_templates"]["items"]] == [
        (t, k) for t in ("eager", "default", "aten") for k in ("check", "bench")
    ]
    for template, shard in (("default", "shard1"), ("aten", "shard2")):
        own = next(
            b for b in json.loads(runs[shard].read_text())["benchmarks"] if b["extra_info"]["template"] == template
        )
        assert entries[template]["extra_info"]["speedup"] == pytest.approx(own["extra_info"]["speedup"])
    assert cli("compare", str(runs["base"]), str(out), "--fail-on", "correctness").returncode == 0
    overlap = cli("merge", str(runs["shard1"]), str(runs["shard1"]), "-o", str(tmp_path / "x.json"))
    assert overlap.returncode == 2
    assert overlap.stderr.startswith(
        "pytest-inductor-templates merge: error: inductor-samples::builtin/launch_bound::check[default-cpu] is in both"
    )


def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(runs, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    nowhere = tmp_path / "missing-folder"
    for args in (
        ["merge", str(runs["shard1"]), "-o", str(nowhere / "m.json")],
        ["plot", str(runs["base"]), "-o", str(nowhere / "p.png")],
    ):
        result = cli(*args)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert (
            result.stderr
            == f"pytest-inductor-templates {args[0]}: error: {args[-1]}: cannot write: No such file or directory\n"
        )


def test_a_shard_without_the_eager_row_keeps_its_own_speedups(runs, tmp_path: Path) -> None:
    """Each compiled entry was paired with eager in its own item: a shard of compiled entries alone merges with
    its speedups as they were measured."""
    data: dict[str, Any] = json.loads(runs["shard1"].read_text())
    eager_only, compiled_only = copy.deepcopy(data), copy.deepcopy(data)
    for shard, wanted in ((eager_only, True), (compiled_only, False)):
        shard["benchmarks"] = [b for b in shard["benchmarks"] if (b["extra_info"]["template"] == "eager") == wanted]
        items = shard["inductor_templates"]["items"]
        shard["inductor_templates"]["items"] = [r for r in items if (r["template"] == "eager") == wanted]
    (tmp_path / "a.json").write_text(json.dumps(eager_only))
    (tmp_path / "b.json").write_text(json.dumps(compiled_only))
    merging = cli("merge", str(tmp_path / "b.json"), str(tmp_path / "a.json"), "-o", str(tmp_path / "m.json"))
    assert merging.returncode == 0, merging.stderr
    merged = json.loads((tmp_path / "m.json").read_text())
    compiled = next(b for b in merged["benchmarks"] if b["extra_info"]["template"] == "default")
    measured = next(b for b in compiled_only["benchmarks"] if b["extra_info"]["template"] == "default")
    assert compiled["extra_info"]["speedup"] == measured["extra_info"]["speedup"] > 0
    assert compiled["extra_info"]["speedup_low"] == measured["extra_info"]["speedup_low"]


def test_plot_labels_do_not_overlap_when_speedups_span_decades(runs) -> None:
    """Speedups of 0.01x and 300x: decades are labelled, the ticks between them are not (they would smear into one
    another); over a narrow span the ticks between decades are labelled."""
    pytest.importorskip("matplotlib")
    from pytest_inductor_templates.runs.files import load
    from pytest_inductor_templates.runs.plot import speedup_figure

    for factors, wanted in (((100.0, 1 / 300), {"0.01x", "0.1x", "1x", "10x", "100x"}), ((1.1, 0.9), {"1x"})):
        data = json.loads(runs["base"].read_text())
        eager = {
            r["sample"]: r["median"]
            for r in data["inductor_templates"]["items"]
            if r["template"] == "eager" and r["kind"] == "bench"
        }
        compiled = [
            r for r in data["inductor_templates"]["items"] if r["template"] == "default" and r["kind"] == "bench"
        ]
        for record, factor in zip(compiled, factors, strict=True):  # the speedup becomes 1 / factor
            record["median"], record["speedup"] = eager[record["sample"]] * factor, 1 / factor
            record.pop("speedup_low"), record.pop("speedup_high")
        path = runs["base"].with_name(f"span-{factors[0]}.json")
        path.write_text(json.dumps(data))
        figure = speedup_figure(load(str(path)))
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        labels = [t for t in figure.axes[0].yaxis.get_ticklabels(which="both") if t.get_visible() and t.get_text()]
        boxes = [
            t.get_window_extent(renderer)
            for t in labels
            if figure.axes[0].get_ylim()[0] <= t.get_position()[1] <= figure.axes[0].get_ylim()[1]
        ]
        assert wanted <= {t.get_text() for t in labels}
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
        if factors == (1.1, 0.9):
            assert len(boxes) >= 3  # between the decades, ticks are labelled too


def test_plot_writes_a_png(runs, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "speedups.png"
    result = cli("plot", str(runs["failing"]), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


GATES_EXPECTED = (
    "expected speedup:N% (e.g. speedup:5%), compile-time:N% (e.g. compile-time:20%), memory:N% (e.g. memory:10%), "
    "graph-breaks or correctness"
)


def test_the_command_says_its_version() -> None:
    """The installed package's version."""
    from importlib import metadata

    result = cli("--version")
    assert (
        result.returncode == 0
        and result.stdout == f"pytest-inductor-templates {metadata.version('pytest-inductor-templates')}\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["compare", "missing.json", "missing.json"],
            "pytest-inductor-templates compare: error: missing.json: cannot read",
        ),
        *(
            (["compare", "a.json", "b.json", "--fail-on", gate], f"'{gate}': {GATES_EXPECTED}")
            for gate in ("speed:5", "compile-time", "compile-time:fast", "compile-time:-5%", "graph-breaks:1")
        ),
        (["compare", "plain.json", "plain.json"], "plain.json: no 'inductor_templates' section: not a run saved by"),
        (["compare", "notjson.json", "notjson.json"], "notjson.json: not JSON"),
        (
            ["compare", "corrupt.json", "corrupt.json"],
            "corrupt.json: a malformed item record in inductor_templates.items (TypeError: speedup: 'fast' is not "
            "float | None)",
        ),
        (["report", "listless.json"], "listless.json: 'items' is not a list of objects"),
        (["compare", "number.jsonl", "number.jsonl"], "number.jsonl: a malformed results file: line 2 is not a record"),
        (["report", "end.jsonl"], "end.jsonl: a malformed results file: line 2 is not a record or end line"),
        (
            ["merge", "reasonless.json", "reasonless.json", "-o", "m.json"],
            "reasonless.json: an entry of inductor_templates.left_out lacks its 'template' or 'reason'",
        ),
        (["merge", "a.json"], "the following arguments are required: -o/--output (--help for usage)"),
        (["bogus"], "argument command: invalid choice: 'bogus'"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args, message) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain.json").write_text(json.dumps({"benchmarks": [{"fullname": "t", "extra_info": {}}]}))
    (tmp_path / "notjson.json").write_text("{")
    record = {"sample": "s", "template": "default", "device": "cpu", "kind": "bench", "outcome": "pass"}
    section = {"format": FORMAT, "items": [{**record, "speedup": "fast"}]}
    (tmp_path / "corrupt.json").write_text(json.dumps({"benchmarks": [], "inductor_templates": section}))
    (tmp_path / "listless.json").write_text(json.dumps({"inductor_templates": {"format": FORMAT, "items": {}}}))
    header = json.dumps({"inductor_templates_results": 1, "format": FORMAT, "machine_info": {}})
    (tmp_path / "number.jsonl").write_text(f'{header}\n5\n{{"end": {{"complete": true}}}}\n')
    (tmp_path / "end.jsonl").write_text(f'{header}\n{{"end": 5}}\n')
    reasonless = {"format": FORMAT, "items": [], "left_out": [{"template": "max_autotune"}]}
    (tmp_path / "reasonless.json").write_text(json.dumps({"benchmarks": [], "inductor_templates": reasonless}))
    result = cli(*args)
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr  # argparse's own errors too: no usage block
    assert "Traceback" not in result.stderr


def test_report_renders_outcome_effect_and_speedup_as_markdown(runs) -> None:
    result = cli("report", str(runs["failing"]))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "| sample [device] | `default` |"
    data = json.loads(runs["failing"].read_text())
    launch, eager = (
        ItemRecord.from_dict(next(b for b in data["benchmarks"] if b["fullname"].endswith(end))["extra_info"])
        for end in ("launch_bound::bench[default-cpu]", "launch_bound::bench[eager-cpu]")
    )
    speedup = speedup_text(launch, eager)  # as the report reads the cell: with eager's pytest-benchmark median
    assert f"| builtin/launch_bound [cpu] | pass / {speedup} |" in lines
    assert (
        "| builtin/embedding [cpu] | accuracy_fail (second opinion: RMSE) |" in lines
    )  # its outcome and rule, no speedup
    failed = "- builtin/embedding/default/cpu: accuracy_fail (second opinion: RMSE): call 1 of 2: out[0][0]"
    assert any(line.startswith(failed) for line in lines), result.stdout


def test_templates_that_all_leaves_out_are_named_with_the_reason(runs, tmp_path: Path) -> None:
    """--inductor-template=all runs what this machine can run; the header, the JSON and the report say what
    it left out and why (the eager row alone runs here: nothing compiles, so compare has no speedup to gate)."""
    import torch

    from pytest_inductor_templates.machine import visible_devices
    from pytest_inductor_templates.templates.registry import TemplateRegistry

    expected = [
        (t.name, problem)
        for t in TemplateRegistry()
        if t.compiles and (problem := t.machine_problem(visible_devices())) is not None
    ]
    if not torch.cuda.is_available():
        assert [name for name, _ in expected] == ["triton", "cudagraphs", "tma", "cutlass"]
    args = ("--inductor-samples", "--inductor-template=all", "--inductor-devices=cpu", "--inductor-isolation=none")
    args = (*args, "-W", "ignore")
    result = run_pytest_warm(
        tmp_path, *args, "-k", "launch_bound and eager", "--benchmark-json=run.json", *FAST, *QUIET
    )
    header = [line for line in result.stdout.splitlines() if line.startswith("inductor-templates: all: left out")]
    assert header == [f"inductor-templates: all: left out {name}: {why}" for name, why in expected]
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["inductor_templates"]["left_out"] == [{"template": n, "reason": why} for n, why in expected]
    report = cli("report", str(tmp_path / "run.json")).stdout
    assert all(f"- `{name}`: {why}" in report for name, why in expected)
    untimed = cli("compare", str(tmp_path / "run.json"), str(runs["base"]), "--fail-on", "speedup:10%")
    assert untimed.returncode == 2, untimed.stdout  # the eager row alone ran: no speedup to compare
    assert "nothing to compare: no compiled entry has a speedup in both runs (base has 0, new has 2" in untimed.stderr
    assert cli("compare", str(tmp_path / "run.json"), str(runs["base"]), "--fail-on", "correctness").returncode == 0


USER_TESTS = """
import torch


def test_checked(inductor_check):
    inductor_check(torch.nn.Linear(8, 8), torch.randn(4, 8))


def test_timed(inductor_benchmark):
    inductor_benchmark(torch.nn.Linear(8, 8), torch.randn(4, 8))
"""


def test_compare_counts_its_rows_and_leaves_out_entries_that_only_check(tmp_path: Path) -> None:
    """A test that only checks has no speedup in either run: it is counted above the table, not a row of n/a;
    the geomean says how many rows it is over."""
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    args = ("--inductor-template=default", "--inductor-devices=cpu", "-W", "ignore", *FAST)
    assert run_pytest_warm(tmp_path, *args, "--benchmark-json=run.json").returncode == 0
    result = cli("compare", str(tmp_path / "run.json"), str(tmp_path / "run.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    title = next(line for line in lines if line.startswith("template default:"))
    assert title.endswith("over 1 sample timed in both runs; 1 check-only entry (no timing) not listed"), title
    rows = lines[lines.index(title) + 2 :]
    rows = rows[: rows.index("")]  # the compile times follow, after a blank line
    assert len(rows) == 1 and "test_timed" in rows[0] and "test_checked" not in result.stdout
    data = json.loads(cli("compare", str(tmp_path / "run.json"), str(tmp_path / "run.json"), "--format", "json").stdout)
    assert data["templates"]["default"]["check_only"] == 1 and len(data["templates"]["default"]["rows"]) == 1
    base = json.loads((tmp_path / "run.json").read_text())  # the timed test's speedup lost in the new run
    for record in base["inductor_templates"]["items"]:
        record.pop("speedup", None)
    (tmp_path / "untimed.json").write_text(json.dumps(base))
    half = cli("compare", str(tmp_path / "run.json"), str(tmp_path / "untimed.json"), "--fail-on", "correctness")
    assert "over 0 samples timed in both runs (of the 1 row below); 1 check-only entry" in half.stdout, half.stdout


def test_report_names_the_samples_of_each_effect_evidence_line(runs) -> None:
    result = cli("report", str(runs["shard2"]))
    assert result.returncode == 0, result.stderr
    assert "- `aten` on builtin/launch_bound [cpu]: aten: no GEMM in the graph" in result.stdout.splitlines()


def test_plot_gives_each_geomean_its_sample_count(runs, tmp_path: Path) -> None:
    """Templates timed on different samples: each geomean bar and legend entry says how many samples it is over."""
    pytest.importorskip("matplotlib")
    from pytest_inductor_templates.runs.files import load
    from pytest_inductor_templates.runs.plot import speedup_figure

    data = json.loads(runs["base"].read_text())
    items = data["inductor_templates"]["items"]
    one = next(r for r in items if r["template"] == "default" and r["kind"] == "bench")
    items.append({**copy.deepcopy(one), "template": "other", "nodeid": one["nodeid"].replace("default", "other")})
    (tmp_path / "two.json").write_text(json.dumps(data))
    axes = speedup_figure(load(str(tmp_path / "two.json"))).axes[0]
    legend = [t.get_text() for t in axes.get_legend().get_texts()]
    assert legend == ["default (geomean over 2 samples)", "other (geomean over 1 sample)"]
    labels = [t.get_text() for t in axes.texts if "n=" in t.get_text()]
    assert len(labels) == 2 and labels[0].endswith("\nn=2") and labels[1].endswith("\nn=1")


def test_runs_in_different_tf32_modes_are_kept_apart(runs, tmp_path: Path) -> None:
    """Speedups of runs in different TF32 modes do not compare: refused, exit 2; outcomes compare, with a note."""
    strict = json.loads(runs["base"].read_text())
    strict["machine_info"]["tf32"] = "off"
    (tmp_path / "strict.json").write_text(json.dumps(strict))
    speed = cli("compare", str(runs["base"]), str(tmp_path / "strict.json"), *GATE)
    assert speed.returncode == 2, speed.stdout
    assert (
        "the runs are in different TF32 modes (base torch's default, new off; --inductor-tf32): their speedups do "
        "not compare" in speed.stderr
    )
    outcomes = cli("compare", str(runs["base"]), str(tmp_path / "strict.json"), "--fail-on", "correctness")
    assert outcomes.returncode == 0, outcomes.stdout + outcomes.stderr
    assert "note: TF32 torch's default in base, off in new (--inductor-tf32)" in outcomes.stdout
    assert next(line for line in outcomes.stdout.splitlines() if line.startswith("new: ")).endswith(", TF32 off)")
    same = cli("compare", str(tmp_path / "strict.json"), str(tmp_path / "strict.json"), *GATE)
    assert same.returncode == 0 and "TF32" not in same.stdout.replace(", TF32 off)", ")")


def test_runs_timed_in_different_processes_and_loads_say_so(runs, tmp_path: Path) -> None:
    """Entries timed once in base and in four processes of two loads in new (their bands made differently): the
    comparison says how many were timed which way; a run against itself says nothing of it."""
    data = json.loads(runs["base"].read_text())
    for record in data["inductor_templates"]["items"]:
        if record["template"] != "eager" and record.get("speedup") is not None:
            record.update(timing_processes=4, timing_loads=2)
    (tmp_path / "spread.json").write_text(json.dumps(data))
    result = cli("compare", str(runs["base"]), str(tmp_path / "spread.json"), *GATE)
    assert re.search(
        r"note: compiled entries timed differently \(\d+ timed once in base, in 4 processes of 2 loads in new; "
        r"--inductor-timing-processes, --inductor-timing-loads\): their bands are made differently",
        result.stdout,
    ), result.stdout
    assert "timed differently" not in cli("compare", str(runs["base"]), str(runs["base"]), *GATE).stdout


def test_a_band_over_processes_is_read_back_as_the_error_its_t_implies() -> None:
    """compare reads a record's band back as a standard error by the quantile it was made with (``band_quantile``):
    Student's t over four processes' means (3.182) for the CUDA default, t over eight loads of one process (2.365),
    the normal's for one timing and for a record saved without it (its band's rule unknown: read wide, never
    narrow); reading a t band by the normal's quantile widens a change's interval by up to 1.6x."""
    import dataclasses
    import math

    from pytest_inductor_templates.runs.compare import log_error

    band = ItemRecord("s", "default", "cuda:0", "bench", speedup=1.2, speedup_low=1.2 / 1.03, speedup_high=1.2 * 1.03)
    width = math.log(1.03**2)
    four = dataclasses.replace(band, timing_processes=4, timing_loads=2, band_quantile=3.182)
    eight = dataclasses.replace(band, timing_processes=1, timing_loads=8, band_quantile=2.365)
    older = dataclasses.replace(band, timing_processes=2, timing_loads=4)  # saved before band_quantile: read wide
    assert math.isclose(log_error(four), width / (2 * 3.182))  # type: ignore[arg-type]
    assert math.isclose(log_error(eight), width / (2 * 2.365))  # type: ignore[arg-type]
    assert math.isclose(log_error(band), width / (2 * 1.959964))  # type: ignore[arg-type]
    assert math.isclose(log_error(older), width / (2 * 1.959964))  # type: ignore[arg-type]


def test_a_row_timed_several_times_reads_its_sides_and_its_change_over_every_timing() -> None:
    """An entry timed in four processes whose first eager timing was an outlier (the first timing's medians are the
    record's ``eager_median``): the row's eager and compiled changes are over every timing's medians, as its speedup
    is, so they agree with the speedup's change; and the change's interval takes Student's t for the two bands'
    degrees of freedom together (three each, six together: 2.447), not the normal's 1.96."""
    import dataclasses
    import math

    from pytest_inductor_templates.runs.compare import Row

    base = ItemRecord("s", "default", "cuda:0", "bench", speedup=2.0, speedup_low=1.9, speedup_high=2.1,
                      eager_median=1.3e-3, compiled_median=0.5e-3, timing_processes=4, timing_loads=1,
                      process_eager_ms=[1.3, 1.0, 1.0, 1.0], process_compiled_ms=[0.5, 0.5, 0.5, 0.5],
                      band_quantile=3.182)  # fmt: skip
    new = dataclasses.replace(base, process_eager_ms=[1.0, 1.0, 1.0, 1.0], eager_median=1.0e-3)
    row = Row("s", "cuda:0", base, new, "pass", "pass")
    eager = row.eager_change
    assert eager is not None and math.isclose(eager, (1.0 / (1.3 * 1.0**3) ** 0.25) - 1)  # -6.3%, not -23%
    assert row.time_change == 0.0
    low, high = row.change_interval  # type: ignore[misc]
    error = math.log(2.1 / 1.9) / (2 * 3.182) * math.sqrt(2)
    assert math.isclose(math.log1p(high), 2.447 * error, rel_tol=1e-6) and math.isclose(math.log1p(low), -2.447 * error)


def test_a_changes_interval_takes_the_degrees_of_freedom_of_both_bands() -> None:
    """Two bands over six processes each (Student's t for five degrees of freedom, 2.571) give a change whose error
    has about ten (Welch and Satterthwaite: 2.228), so a 9% fall between two ±3.3% bands is flagged at 5% where the
    t of one band alone (2.571) read its interval back past -5%; a band ten times wider than the other lends the
    change its own degrees of freedom; a record saved without its quantile, or a band widened to the CUDA floor
    (±2% launch-bound: the runs' offset, not a spread), is read as before (the larger quantile)."""
    import dataclasses
    import math

    from pytest_inductor_templates.runs.compare import Row, regressed

    def entry(speedup: float, half: float, quantile: float | None = 2.571) -> ItemRecord:
        return ItemRecord("s", "default", "cuda:0", "bench", speedup=speedup, speedup_low=speedup / math.exp(half),
                          speedup_high=speedup * math.exp(half), band_quantile=quantile)  # fmt: skip

    row = Row("s", "cuda:0", entry(1.30, 0.033), entry(1.30 * 0.91, 0.033), "pass", "pass")
    low, high = row.change_interval  # type: ignore[misc]
    error = math.hypot(0.033 / 2.571, 0.033 / 2.571)
    assert math.isclose(math.log1p(high) - math.log(0.91), 2.228 * error, rel_tol=1e-6), (low, high)
    assert regressed(row.speedup_change, row.change_interval, 0.05)
    assert math.log(0.91) + 2.571 * error > math.log(0.95)  # one band's t alone would not have flagged it
    lopsided = Row("s", "cuda:0", entry(1.30, 0.033, 3.182), entry(1.2, 0.0033), "pass", "pass")
    low, high = lopsided.change_interval  # type: ignore[misc]
    error = math.hypot(0.033 / 3.182, 0.0033 / 2.571)
    assert math.isclose(math.log1p(high) - math.log(1.2 / 1.3), 3.182 * error, rel_tol=1e-6)  # the wide band's
    older = dataclasses.replace(entry(1.30, 0.033), band_quantile=None)
    low, high = Row("s", "cuda:0", older, entry(1.2, 0.033), "pass", "pass").change_interval  # type: ignore[misc]
    error = math.hypot(0.033 / 1.959964, 0.033 / 2.571)
    assert math.isclose(math.log1p(high) - math.log(1.2 / 1.3), 2.571 * error, rel_tol=1e-6)
    floored = [dataclasses.replace(entry(s, 0.02), launch_bound=True) for s in (1.30, 1.2)]
    low, high = Row("s", "cuda:0", *floored, "pass", "pass").change_interval  # type: ignore[misc]
    error = math.hypot(0.02 / 2.571, 0.02 / 2.571)
    assert math.isclose(math.log1p(high) - math.log(1.2 / 1.3), 2.571 * error, rel_tol=1e-6)


def test_a_rows_sides_leave_out_the_timings_its_band_left_out() -> None:
    """An entry whose band left out a timing on a slow CPU (``process_counted``): the row's compiled and eager
    changes are over the timings the band is over, so the slow timing's compiled 0.8 ms is not read as the compiled
    program slowing."""
    import dataclasses

    from pytest_inductor_templates.runs.compare import Row

    base = ItemRecord("s", "default", "cuda:0", "bench", speedup=2.0, speedup_low=1.96, speedup_high=2.04,
                      compiled_median=0.5e-3, eager_median=1.0e-3, timing_processes=4,
                      process_eager_ms=[1.0, 1.0, 1.0, 1.0], process_compiled_ms=[0.5, 0.5, 0.5, 0.5],
                      process_counted=[True] * 4)  # fmt: skip
    new = dataclasses.replace(base, process_compiled_ms=[0.8, 0.5, 0.5, 0.5], process_counted=[False, True, True, True])
    row = Row("s", "cuda:0", base, new, "pass", "pass")
    assert row.time_change == 0.0 and row.eager_change == 0.0
    counted_all = Row("s", "cuda:0", base, dataclasses.replace(new, process_counted=None), "pass", "pass")
    assert counted_all.time_change is not None and counted_all.time_change > 0.1  # every timing counted: it moved


def test_help_names_every_command() -> None:
    result = cli("--help")
    assert result.returncode == 0 and "Compare, merge, report and plot" in result.stdout
    assert "{compare,merge,report,plot}" in result.stdout
