"""The parts of docs/results/corpus-results.md that a corpus run's cells give beyond ``report``'s table: geomean
speedups over the samples every template passed, the failing items grouped by cause with their diagnoses, the items
that ended early or were skipped with their reasons, and the shards (commit, machine, date, time). Plain functions of
the merged run's cells (``runs.files.Cell``: each cell's verdict and timing) and of the files ``corpus_results.py
run`` writes beside them; no torch."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from pytest_inductor_templates.diagnose.request import DIAGNOSED
from pytest_inductor_templates.outcomes import ENDED_EARLY, FAILURES, Outcome
from pytest_inductor_templates.record import EAGER, ItemRecord, geomean
from pytest_inductor_templates.runs.files import Cell, Key
from pytest_inductor_templates.tables import render

COMPILER_FAULT = "the compiler's (its torch-only repro exits 1 on its own)"
MANIFEST = "shard-{index}.json"  # what ``run`` writes per shard: commit, machine, date, each pass's wall time
REPRO_EXITS = "repro-exits-{index}.json"  # repro.py path -> exit code, written by ``run --diagnose``


def common_geomeans(cells: dict[Key, Cell]) -> tuple[dict[str, float], int]:
    """Each compiled template's geomean speedup over the samples (sample, device) that every compiled template
    passed and timed, and how many such samples there are (0: none, and no geomeans)."""
    speedups: dict[str, dict[tuple[str, str], float]] = {t: {} for _, t, _ in cells if t != EAGER}
    for (sample, template, device), cell in cells.items():
        if template != EAGER and cell.outcome is Outcome.PASS and cell.speedup is not None:
            speedups[template][(sample, device)] = cell.speedup
    if not speedups:
        return {}, 0
    common = set.intersection(*(set(by_sample) for by_sample in speedups.values()))
    means = {t: geomean([by_sample[s] for s in sorted(common)]) for t, by_sample in speedups.items()}
    return {t: m for t, m in means.items() if m is not None}, len(common)


def cause(record: ItemRecord) -> str:
    """What a failing item's failure is grouped by: the diagnosis's stage (and kind) where it has one, else its
    outcome and the first clause of its reason."""
    if record.diagnosis_stage:  # "inductor / lowerings: relu_3": the stage and subsystem, not the node
        stage = record.diagnosis_stage.split(":")[0].strip()
        return f"{record.outcome.value if record.outcome else '?'}: {stage}" + (
            f" ({record.diagnosis_kind})" if record.diagnosis_kind else ""
        )
    reason = re.sub(r"^call \d+ of \d+: ", "", record.reason or "no reason recorded")
    # "out[0]: float32 [1000, 10]: 43 of 10000 elements ...": "out[0]: float32"; "compile raised X: ...": as is
    reason = ": ".join(re.sub(r"\s+\[.*", "", reason.split(";")[0]).strip().split(": ")[:2])
    return f"{record.outcome.value if record.outcome else '?'}: {reason}"


def whose(record: ItemRecord, repro_exits: dict[str, int | str]) -> str:
    """Whether a failure is shown to be the compiler's: only where the item's repro ran on its own and exited 1."""
    if not record.repro:
        return "no repro (not diagnosed, or the diagnosis made none)"
    code = repro_exits.get(record.repro)
    if code is None:
        return "its repro was not run"
    if code == "timeout":
        return "not shown to be the compiler's (its repro ran past its time limit)"
    return COMPILER_FAULT if code == 1 else f"not shown to be the compiler's (its repro exits {code} on its own)"


def failures_by_cause(cells: dict[Key, Cell], repro_exits: dict[str, int | str]) -> list[str]:
    """The failing cells' verdicts (a cell's check item, or its bench item where it has no check), grouped by
    cause, each with its reason, diagnosis and whose fault it is shown to be."""
    failing = [c.verdict for c in cells.values() if c.outcome in FAILURES and c.outcome not in ENDED_EARLY]
    if not failing:
        return ["No check failed."]
    groups: dict[str, list[ItemRecord]] = defaultdict(list)
    for r in failing:
        groups[cause(r)].append(r)
    lines: list[str] = []
    for name, members in sorted(groups.items(), key=lambda group: (-len(group[1]), group[0])):
        lines += [f"### {name} ({len(members)})", ""]
        for r in sorted(members, key=lambda r: (r.sample, r.template)):
            lines.append(f"- `{r.sample}` [{r.template}, {r.device}]: {r.reason or 'no reason recorded'}")
            if r.diagnosis:
                lines.append(f"  - diagnosis: {r.diagnosis}")
            elif r.outcome is not None and r.outcome.value in DIAGNOSED:
                lines.append("  - not diagnosed")
            lines.append(f"  - fault: {whose(r, repro_exits)}")
        lines.append("")
    return lines[:-1]


def ended_early_and_skipped(cells: dict[Key, Cell]) -> list[str]:
    """The cells that timed out, crashed or were skipped, with their reasons."""
    rows = [
        [f"`{r.sample}`", r.template, r.outcome.value, (r.reason or "-").replace("|", "/")]
        for r in (c.verdict for c in cells.values())
        if r.outcome in ENDED_EARLY or r.outcome is Outcome.SKIPPED
    ]
    return render(["sample", "template", "outcome", "reason"], sorted(rows), markdown=True) if rows else ["None."]


def shards_table(manifests: dict[str, dict[str, Any] | None]) -> list[str]:
    """One row per pass of each shard (its manifest file name to its contents; None: the shard has none), then
    whether every pass ran one commit: a published run is one commit's, and a tree with local changes (``+``) is
    not a commit."""
    rows = [
        [str(m.get("shard", "?")), p["pass"], p["commit"], p["machine"], p["date"], f"{p['seconds']:.0f} s"]
        for m in manifests.values() if m is not None for p in m.get("passes", [])
    ]  # fmt: skip
    lines = render(["shard", "pass", "commit", "machine", "date", "wall time"], rows, markdown=True) if rows else []
    missing = sorted(name for name, m in manifests.items() if m is None)
    commits = {row[2] for row in rows}
    if not rows and len(missing) < len(manifests):
        lines += ["No pass recorded in the manifests."]
    if missing:
        lines += ["", f"No manifest for {', '.join(missing)}: which commit ran it is not known."]
    elif len(commits) > 1:
        different = ", ".join(sorted(commits))
        lines += ["", f"**The passes ran {len(commits)} different commits** ({different}): not one run."]
    elif commits:
        (one,) = commits
        local = one.endswith("+")
        lines += ["", f"Every pass ran {one}: a tree with local changes, not a commit." if local
                  else f"Every pass of every shard ran commit {one}."]  # fmt: skip
    return lines


def read_json(path: Path) -> Any:
    """A JSON file beside the results, or None where it is missing."""
    return json.loads(path.read_text()) if path.exists() else None
