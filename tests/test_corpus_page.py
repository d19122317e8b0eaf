"""The corpus page's generator (``benchmarks/corpus_results.py doc``) on a small committed run: two shards of real
results files made on the CPU by ``corpus_results.py run`` (tests/data/corpus_run: shard 1, two GraphNet-format
samples under default and freezing, passing and timed; shard 2, two others under default with a strict tolerance,
failing, diagnosed in the untimed pass, their repros run on their own). Each figure on the page is recomputed here
from the records."""

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
        assert f"| {template} | {len(checks)} | {passed} |" in text and f"| {passed / len(checks):.0%} |" in text
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
    assert undiagnosed.count("  - not diagnosed") == 2 and "### accuracy_fail: call 1 of 2 (2)" in undiagnosed


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


def test_the_shards_say_their_commit_machine_and_date(run_dir: Path) -> None:
    """Each shard's manifest (shard-I.json) is a row; shards of different commits are flagged."""
    manifests = [json.loads((run_dir / f"shard-{i}.json").read_text()) for i in (1, 2)]
    text = page(run_dir)
    for m in manifests:
        assert f"| {m['shard']} | {m['commit']} | {m['machine']} | {m['date']} |" in text
    assert "Every shard ran the same commit." in text
    manifests[1]["commit"] = "0000000"
    (run_dir / "shard-2.json").write_text(json.dumps(manifests[1]))
    assert "**The shards ran 2 different commits**" in page(run_dir)
