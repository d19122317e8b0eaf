"""With a run budget, failed sample items are diagnosed after the run's items, cheapest (smallest graph) first, and
their records amended: in the results file, the JSON and the terminal, and in pytest-xdist's controller."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from diagnose_plants import planted_env
from graphnet_tree import write_sample
from inner_runs import run_pytest_warm
from test_diagnose import SIGMOID_META, SIGMOID_MODEL

from conftest import FAST, QUIET
from pytest_inductor_templates.check.result import CheckResult
from pytest_inductor_templates.diagnose import Diagnosis
from pytest_inductor_templates.engine.cell import Verdict
from pytest_inductor_templates.engine.diagnosis import DiagnosisPlan
from pytest_inductor_templates.items.deferred import Deferred
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.report.book import AMENDED, RecordBook
from pytest_inductor_templates.runs.files import load
from pytest_inductor_templates.runs.results_file import ResultsWriter

# the same failure in a larger graph: two sigmoid gates where the small sample has one
LARGER_MODEL = SIGMOID_MODEL.replace(
    "        return (gate * linear,)\n",
    "        gated = gate * linear\n        again = torch.sigmoid(gated)\n        return (again * gated,)\n",
)


def test_a_run_budget_diagnoses_after_the_items_the_smallest_graph_first_and_amends_the_records(
    tmp_path: Path,
) -> None:
    """Two samples fail under a planted sigmoid lowering; the larger one's items run first, yet with a cap of one
    diagnosis the smaller is the one diagnosed (within its 2 s budget or stopped at it: the wiring is tested), after
    both samples' items, and the larger is refused by the cap. The records of both items of each sample say so in
    the results file, the JSON (written after the diagnoses) and the terminal."""
    assert LARGER_MODEL != SIGMOID_MODEL
    write_sample(tmp_path / "corpus" / "small", {"model.py": SIGMOID_MODEL, "weight_meta.py": SIGMOID_META})
    write_sample(tmp_path / "corpus" / "large", {"model.py": LARGER_MODEL, "weight_meta.py": SIGMOID_META})
    args = [
        "--inductor-samples=corpus", "--inductor-template=default",
        "--inductor-devices=cpu", "--inductor-diagnose", "--inductor-diagnose-budget=2",
        "--inductor-diagnose-processes=1", "--inductor-diagnose-max=1", "--inductor-diagnose-run-budget=600",
        "--inductor-repro-dir=repros",
        "--inductor-results=run.jsonl", "--benchmark-json=run.json", "-p", "no:randomly", "-v", *FAST, *QUIET,
    ]  # fmt: skip
    done = run_pytest_warm(tmp_path, *args, env=planted_env(tmp_path, "sigmoid"))
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    order = [line.split("::")[1] for line in done.stdout.splitlines() if " FAILED" in line and "::" in line]
    assert order[0] == "corpus/large", done.stdout[-3000:]  # the larger graph's items ran first
    results = {(r.sample, r.kind): r for r in load(str(tmp_path / "run.jsonl")).records if r.template == "default"}
    small = [results[("corpus/small", kind)] for kind in ("check", "bench")]
    large = [results[("corpus/large", kind)] for kind in ("check", "bench")]
    for record in small + large:
        assert record.outcome is Outcome.ACCURACY_FAIL and record.diagnosis_deferred, (record.nodeid, record.diagnosis)
    answers = ("stopped at the budget of 2s", "inductor / lowerings: sigmoid")  # a warm child may finish within it
    assert all(any(a in (r.diagnosis or "") for a in answers) for r in small), small[0].diagnosis
    assert all(r.diagnosis == "not diagnosed: --inductor-diagnose-max (1) reached in this run" for r in large)
    lines = (tmp_path / "run.jsonl").read_text().splitlines()
    assert sum(small[0].nodeid in line for line in lines) == 2  # the item's record, then the amended one
    section = json.loads((tmp_path / "run.json").read_text())["inductor_templates"]
    in_json = {(r["sample"], r["kind"]): r for r in section["items"] if r["template"] == "default"}
    assert in_json[("corpus/small", "check")]["diagnosis"] == small[0].diagnosis
    assert in_json[("corpus/small", "check")]["diagnosis_deferred"] is True
    assert f"{small[0].nodeid}: {small[0].diagnosis}" in done.stdout.split("diagnoses (where and why")[1]


def test_an_amended_record_is_written_to_the_results_file_again_and_read_in_place_of_the_first(tmp_path: Path) -> None:
    """The book amends its records and writes each amended one again; a reader of the file takes an item's last
    line, in the item's place. In pytest-xdist's controller the book takes a worker's amended records from the
    worker's output (the worker's own book amended them) in place of the ones its reports carried."""
    path = tmp_path / "run.jsonl"
    writer = ResultsWriter(path)
    writer.start({})
    book = RecordBook(writer)
    failed = ItemRecord("corpus/a", "default", "cpu", "check", outcome=Outcome.ACCURACY_FAIL, nodeid="a::check")
    passed = ItemRecord("corpus/b", "default", "cpu", "check", outcome=Outcome.PASS, nodeid="b::check")
    other = ItemRecord("corpus/a", "freezing", "cpu", "check", outcome=Outcome.ACCURACY_FAIL, nodeid="a::freezing")
    for record in (failed, passed, other):
        book.records.append(record)
        writer.add(record)
    amended = book.amend(["a::check"], Diagnosis("inductor / lowerings: sigmoid", seconds=1.25))
    assert amended == [failed] and failed.diagnosis_deferred and failed.diagnosis_seconds == 1.2
    assert other.diagnosis is None  # the same sample's failure under another template waits for its own
    from_worker = {**passed.to_dict(), "diagnosis": "not diagnosed: cap", "diagnosis_deferred": True}
    book.pytest_testnodedown(SimpleNamespace(workeroutput={AMENDED: [from_worker]}), None)
    assert book.records[1].diagnosis == "not diagnosed: cap" and book.records[1] is not passed
    writer.end(1, True, [])
    assert len(path.read_text().splitlines()) == 7  # header, three records, the two amended ones, the end
    read = load(str(path)).records
    assert [r.nodeid for r in read] == ["a::check", "b::check", "a::freezing"]
    assert read[0].diagnosis == "inductor / lowerings: sigmoid" and read[0].diagnosis_deferred
    assert read[1].diagnosis == "not diagnosed: cap" and read[1].diagnosis_deferred


def test_the_diagnoses_after_the_items_go_cheapest_first_survive_a_failing_one_and_keep_what_a_ctrl_c_leaves() -> None:
    """The pending failures are taken by graph size (a built-in's, unknown, as the smallest); a diagnosis that raises
    is a failed one and the next goes on; a Ctrl-C keeps the records amended before it."""
    deferred = Deferred()
    for name, size in (("large", 900), ("builtin", None), ("small", 100)):
        case = SimpleNamespace(key=(name, "default"), sample=SimpleNamespace(graph_size=size))
        failed = Verdict(CheckResult(Outcome.ACCURACY_FAIL, "far", error=RuntimeError("holds the model")))
        deferred.add(SimpleNamespace(nodeid=f"{name}::check"), case, failed)  # type: ignore[arg-type]
    assert deferred.pending[("large", "default")].verdict.result.error is None  # no traceback kept to the end
    plan = DiagnosisPlan(10.0, Path("repros"), "item")
    order: list[str] = []

    def diagnose(case: Any, plan: DiagnosisPlan, verdict: Verdict, limit: Any) -> Diagnosis:
        order.append(case.key[0])
        if case.key[0] == "small":
            raise RuntimeError("the worker raised")
        return Diagnosis(f"{case.key[0]}: found")

    amended: list[Any] = []
    deferred.run(lambda item, verdict: plan, diagnose, lambda ids, d: [(ids, d.summary)], 0.0, amended)
    assert order == ["builtin", "small", "large"]
    assert amended == [
        (["builtin::check"], "builtin: found"),
        (["small::check"], "diagnosis failed: RuntimeError: the worker raised"),
        (["large::check"], "large: found"),
    ]

    def interrupted(case: Any, plan: DiagnosisPlan, verdict: Verdict, limit: Any) -> Diagnosis:
        if case.key[0] == "large":
            raise KeyboardInterrupt
        return Diagnosis("found")

    for name in ("small", "large"):
        case = SimpleNamespace(key=(name, "default"), sample=SimpleNamespace(graph_size=len(name)))
        deferred.add(SimpleNamespace(nodeid=f"{name}::check"), case, failed)  # type: ignore[arg-type]
    kept: list[Any] = []
    with pytest.raises(KeyboardInterrupt):
        deferred.run(lambda item, verdict: plan, interrupted, lambda ids, d: [ids], 0.0, kept)
    assert kept == [["small::check"]]
