"""The corpus page's generator (``benchmarks/corpus_results.py doc``) and the resume rules of ``run``, on a small
committed run assembled from two real CPU runs of ``corpus_results.py run`` over copies of two GraphNet samples (GAT,
GraphSAGE) under two roots, renamed as the two shards of one run (tests/data/corpus_run): shard 1 (root tinycorpus2)
under default and freezing, passing and timed; shard 2 (root tinycorpus) under default with a strict tolerance
(``--inductor-tolerance=0,0 --inductor-second-opinion=off``), failing, diagnosed in the untimed pass
(``--diagnose 2``), its repros run on their own. The shards' manifests are written in the manifest's format from
those runs' passes. Each figure on the page is recomputed here from the records."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_inductor_templates.runs.files import load

DATA = Path(__file__).parent / "data" / "corpus_run"
SCRIPT = Path(__file__).parent.parent / "benchmarks" / "corpus_results.py"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A copy of the committed run, free to edit."""
    return Path(shutil.copytree(DATA, tmp_path / "run"))


def page(run_dir: Path, *results: str) -> str:
    """The page ``doc`` writes for ``results`` (default: both shards' timed files)."""
    names = results or ("corpus-1.jsonl", "corpus-2.jsonl")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "doc", *(str(run_dir / n) for n in names), "--doc", str(run_dir / "page.md")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return (run_dir / "page.md").read_text()


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, lines: list[dict]) -> None:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_pass_rates_and_the_common_geomean_are_the_records(run_dir: Path) -> None:
    """The pass-rate table counts each template's check items; the geomean speedup is over the samples that every
    compiled template passed and timed: with freezing's timing of one sample taken out (as a run where that cell
    was not timed), only the other sample is common, so default's common geomean is that sample's speedup alone,
    not default's own geomean over both."""
    lines = lines_of(run_dir / "corpus-1.jsonl")
    dropped = [x for x in lines if (x.get("record") or {}).get("sample", "").endswith("GAT")
               and x["record"]["template"] == "freezing" and x["record"]["kind"] == "bench"]  # fmt: skip
    assert len(dropped) == 1
    write_lines(run_dir / "corpus-1.jsonl", [x for x in lines if x not in dropped])
    text = page(run_dir)

    records = [r for n in ("corpus-1.jsonl", "corpus-2.jsonl") for r in load(str(run_dir / n)).records]
    for template in ("eager", "default", "freezing"):
        checks = [r for r in records if r.kind == "check" and r.template == template]
        passed = sum(r.outcome.value == "pass" for r in checks)
        failed = sum(r.outcome.value == "accuracy_fail" for r in checks)
        assert f"| {template} | {len(checks)} | {passed} | {failed} | {passed / len(checks):.0%} |" in text
    timed = {(r.template, r.sample): r.speedup for r in records if r.kind == "bench" and r.speedup is not None
             and r.template != "eager" and r.outcome.value == "pass"}  # fmt: skip
    common = {s for t, s in timed if t == "default"} & {s for t, s in timed if t == "freezing"}
    assert len(common) == 1
    expected = {t: math.exp(sum(math.log(timed[t, s]) for s in common) / len(common)) for t in ("default", "freezing")}
    found = re.search(r"over the (\d+) samples every compiled template passed and timed: default ([\d.]+)x, "
                      r"freezing ([\d.]+)x", text)  # fmt: skip
    assert found, text
    assert int(found[1]) == 1
    assert float(found[2]) == pytest.approx(expected["default"], rel=1e-2)
    assert float(found[3]) == pytest.approx(expected["freezing"], rel=1e-2)
    own = math.exp(sum(math.log(v) for (t, _), v in timed.items() if t == "default") / 2)
    assert abs(own / expected["default"] - 1) > 0.01  # the common figure is not default's own geomean


def test_failures_are_grouped_by_cause_with_their_diagnosis_and_whose_fault(run_dir: Path) -> None:
    """Shard 2's failing checks carry the untimed pass's diagnoses (diag-2.jsonl), grouped by the stage and
    subsystem they name; a failure is the compiler's only where its repro exited 1 on its own
    (repro-exits-2.json); without that file it says so, and without the diagnosis pass it is not diagnosed."""
    diagnosed = {r.sample: r for r in load(str(run_dir / "diag-2.jsonl")).records if r.diagnosis}
    assert len(diagnosed) == 2
    text = page(run_dir)
    for sample, record in diagnosed.items():
        stage = record.diagnosis_stage.split(":")[0]
        assert f"### accuracy_fail: {stage} ({record.diagnosis_kind}) (1)" in text
        item = text.split(f"- `{sample}` [default, cpu]:")[1]
        assert item.split("\n  - diagnosis: ")[1].split("\n")[0] == record.diagnosis
        assert "fault: the compiler's (its torch-only repro exits 1 on its own)" in item.split("\n- ")[0]

    exits = json.loads((run_dir / "repro-exits-2.json").read_text())
    (run_dir / "repro-exits-2.json").write_text(json.dumps({path: 0 for path in exits}))
    assert text.count("the compiler's (its torch-only") == 2
    cleared = page(run_dir)
    assert "the compiler's (its torch-only" not in cleared
    assert cleared.count("not shown to be the compiler's (its repro exits 0 on its own)") == 2
    (run_dir / "repro-exits-2.json").unlink()
    assert page(run_dir).count("its repro was not run") == 2
    (run_dir / "diag-2.jsonl").unlink()
    undiagnosed = page(run_dir)
    assert undiagnosed.count("  - not diagnosed") == 2 and "### accuracy_fail: out[0]: float32 (2)" in undiagnosed


def test_a_resumed_shard_takes_each_sample_from_its_last_part(run_dir: Path) -> None:
    """A shard cut short (no end line: partial) and resumed into corpus-1-part2.jsonl: the sample the part ran
    again shows the part's figures, the other keeps the first file's, and the page is not partial."""
    lines = lines_of(run_dir / "corpus-1.jsonl")
    write_lines(run_dir / "corpus-1.jsonl", [x for x in lines if "end" not in x])  # cut off
    again = [x for x in lines if "record" not in x or x["record"]["sample"].endswith("GAT")]
    for x in again:
        if (x.get("record") or {}).get("speedup") is not None:
            x["record"]["speedup"] *= 2  # what the part measured
            x["record"]["speedup_low"] *= 2
            x["record"]["speedup_high"] *= 2
    write_lines(run_dir / "corpus-1-part2.jsonl", again)
    text = page(run_dir, "corpus-1.jsonl", "corpus-1-part2.jsonl", "corpus-2.jsonl")
    first = {(r.sample, r.template): r.speedup for r in load(str(run_dir / "corpus-1.jsonl")).records if r.speedup}
    for (sample, template), speedup in first.items():
        shown = 2 * speedup if sample.endswith("GAT") else speedup
        row = next(line for line in text.splitlines() if line.startswith(f"| {sample} [cpu] |"))
        assert f"{shown:.3g}x" in row, (template, row)
    assert "**Partial**" not in text
    assert "Partial" in page(run_dir, "corpus-1.jsonl", "corpus-2.jsonl")  # the cut-off file alone is partial


def test_the_shards_say_each_passs_commit_machine_and_date(run_dir: Path) -> None:
    """Each pass of each shard's manifest (shard-I.json) is a row; the page says whether one commit ran them all: a
    tree with local changes is no commit, two commits are flagged, and a shard without a manifest is named."""
    manifests = {i: json.loads((run_dir / f"shard-{i}.json").read_text()) for i in (1, 2)}
    text = page(run_dir)
    for m in manifests.values():
        for p in m["passes"]:
            assert f"| {m['shard']} | {p['pass']} | {p['commit']} | {p['machine']} | {p['date']} |" in text
    assert "Every pass ran f71036e+: a tree with local changes, not a commit." in text

    def set_commit(i: int, commit: str) -> None:
        for p in manifests[i]["passes"]:
            p["commit"] = commit
        (run_dir / f"shard-{i}.json").write_text(json.dumps(manifests[i]))

    set_commit(1, "f71036e"), set_commit(2, "f71036e")
    assert "Every pass of every shard ran commit f71036e." in page(run_dir)
    set_commit(2, "0000000")
    assert "**The passes ran 2 different commits** (0000000, f71036e)" in page(run_dir)
    (run_dir / "shard-2.json").unlink()
    assert "No manifest for shard-2.json: which commit ran it is not known." in page(run_dir)


def resume_rules():  # the run side's helpers, imported from the script
    sys.path.insert(0, str(SCRIPT.parent))
    import corpus_results

    return corpus_results


def test_a_sample_is_finished_only_with_every_cells_check_and_bench_or_left_to_the_warm_up(run_dir: Path) -> None:
    """``run --resume`` reruns a sample unless each of its cells has both its check and its bench record: a cut
    between a check and its bench leaves the sample to run again; a cell left to the warm-up pass counts as done."""
    rules = resume_rules()
    first = run_dir / "corpus-1.jsonl"
    templates = ["default", "freezing"]
    both = {"tinycorpus2/torchgeometric/GAT", "tinycorpus2/torchgeometric/GraphSAGE"}
    assert rules.finished_samples([first], templates) == both
    lines = lines_of(first)

    def gat_freezing_bench(x: dict) -> bool:
        record = x.get("record") or {}
        cell = (record.get("template"), record.get("kind"))
        return record.get("sample", "").endswith("GAT") and cell == ("freezing", "bench")

    cut = [x for x in lines if not gat_freezing_bench(x)]
    write_lines(first, cut)
    assert rules.finished_samples([first], templates) == both - {"tinycorpus2/torchgeometric/GAT"}
    (run_dir / "not-timed-1.txt").write_text("tinycorpus2/torchgeometric/GAT\tfreezing\n")
    assert rules.finished_samples([first], templates) == both


def test_parts_are_read_in_order_and_a_new_part_goes_past_the_highest(tmp_path: Path) -> None:
    """A shard's files in the order they ran, and the next part after the highest (not after the count: a part
    missing in the middle must not make the next overwrite the last)."""
    rules = resume_rules()
    for name in ("corpus-1.jsonl", "corpus-1-part3.jsonl", "corpus-1-part10.jsonl", "corpus-2.jsonl"):
        (tmp_path / name).write_text("")
    assert [p.name for p in rules.shard_parts(tmp_path, 1)] == [
        "corpus-1.jsonl", "corpus-1-part3.jsonl", "corpus-1-part10.jsonl",
    ]  # fmt: skip
    assert rules.next_part(tmp_path, 1).name == "corpus-1-part11.jsonl"
    assert rules.next_part(tmp_path, 2).name == "corpus-2-part2.jsonl"


def test_timeouts_crashes_and_skips_are_listed_with_their_reasons(run_dir: Path) -> None:
    """A cell that timed out and one that was skipped (shard 1's two default checks, marked so) are rows of their
    own with their reasons; a run without such cells says "None."."""
    assert "## Timed out, crashed or skipped\n\nNone." in page(run_dir)
    lines = lines_of(run_dir / "corpus-1.jsonl")
    marked = {"GAT": ("timeout", "the check ran past its 300 s"), "GraphSAGE": ("skipped", "needs a GPU")}
    for x in lines:
        record = x.get("record") or {}
        if (record.get("template"), record.get("kind")) == ("default", "check"):
            record["outcome"], record["reason"] = marked[record["sample"].rsplit("/", 1)[1]]
    write_lines(run_dir / "corpus-1.jsonl", lines)
    text = page(run_dir).split("## Timed out, crashed or skipped")[1].split("\n## ")[0]
    assert "| `tinycorpus2/torchgeometric/GAT` | default | timeout | the check ran past its 300 s |" in text
    assert "| `tinycorpus2/torchgeometric/GraphSAGE` | default | skipped | needs a GPU |" in text
