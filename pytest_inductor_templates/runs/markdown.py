"""One run as markdown: samples x templates with outcome, effect, speedup and memory ratio, the summary per template,
then the evidence."""

from __future__ import annotations

from collections import Counter

from ..cpu_speed import unsteady_note
from ..dashboard import summary_table
from ..outcomes import FAILURES, FIRST_COMPARISON
from ..record import EAGER, ItemRecord, geomean
from ..tables import processes_text, render, speedup_text, times
from .files import Cell, Run

MARK = {"effect": "effect", "no effect": "**no effect**", "not observed": "not observed"}
MEMORY_LINE = (
    "Memory: eager's peak CUDA memory in a steady call / the compiled model's (`memory 1.25x`: the compiled model "
    "needs less; the weights, inputs and frozen copies resident on the device count in both)."
)


def _outcome(record: ItemRecord) -> str:
    """The outcome, with the rule that decided it where that is not the first comparison, and a warning where
    some output had nothing to compare."""
    outcome = record.outcome.value if record.outcome else "?"
    if record.check_rule not in (None, FIRST_COMPARISON):
        outcome = f"{outcome} ({record.check_rule})"
    return f"{outcome}, **NaN output**" if record.uncompared else outcome


def _cell(cell: Cell | None, eager: Cell | None = None) -> str:
    if cell is None:
        return "-"
    verdict = cell.verdict
    parts = [_outcome(verdict)]
    if verdict.effect:
        parts.append(MARK.get(verdict.effect, verdict.effect))
    if cell.bench is not None and cell.speedup is not None:
        parts.append(speedup_text(cell.bench, eager.bench if eager else None))
        if (processes := processes_text(cell.bench)) is not None:
            parts.append(processes)
    if cell.bench is not None and cell.bench.memory_ratio is not None:
        parts.append(f"memory {times(cell.bench.memory_ratio)}")
    return " / ".join(parts)


def weights_line(run: Run) -> str | None:
    """How the run's GraphNet samples passed their weights (``sample_weights``), or None without any: from runs
    saved before the record said, nothing."""
    counts = Counter(r.sample_weights for r in run.records if r.sample_weights is not None)
    if not counts:
        return None
    how = {
        "parameters": "the module's parameters and buffers, as deployed",
        "inputs": "forward inputs, as GraphNet runs them",
    }
    parts = [f"`{mode}` ({how.get(mode, mode)})" for mode in sorted(counts)]
    if len(counts) > 1:
        parts = [f"{part}: {counts[mode]} item(s)" for part, mode in zip(parts, sorted(counts), strict=True)]
    return "GraphNet sample weights: " + "; ".join(parts) + "."


def memory_ratios(run: Run, template: str) -> list[float]:
    """The memory ratios of a template's bench items in ``run`` (measured on CUDA only)."""
    benches = [c.bench for (_, t, _), c in run.cells.items() if t == template and c.bench is not None]
    return [b.memory_ratio for b in benches if b.memory_ratio is not None]


def as_markdown(run: Run) -> str:
    """The run's samples x templates table (outcome / effect / speedup over eager / memory ratio), geomeans,
    evidence."""
    templates = list(dict.fromkeys(t for _, t, _ in run.cells if t != EAGER))
    rows = list(dict.fromkeys((s, d) for s, _, d in run.cells))
    body = [
        [f"{s} [{d}]", *(_cell(run.cells.get((s, t, d)), run.cells.get((s, EAGER, d))) for t in templates)]
        for s, d in rows
    ]
    means = []
    for template in templates:
        speedups = [c.speedup for (_, t, _), c in run.cells.items() if t == template and c.speedup is not None]
        mean = geomean(speedups)
        means.append(f"{times(mean)} over {len(speedups)}" if mean is not None else "n/a")
    body.append(["geomean speedup", *means])
    ratios = {t: memory_ratios(run, t) for t in templates}
    if any(ratios.values()):
        memory = [(geomean(found), len(found)) for found in ratios.values()]
        body.append(["geomean memory ratio", *(f"{times(m)} over {n}" if m else "n/a" for m, n in memory)])
    lines = render(["sample [device]", *(f"`{t}`" for t in templates)], body, markdown=True)
    if any(ratios.values()):
        lines += ["", MEMORY_LINE]
    if (weights := weights_line(run)) is not None:
        lines = [weights, "", *lines]
    if (moved := unsteady_note(run.data.get("machine_info", {}))) is not None:
        lines = [f"Note: {moved}.", "", *lines]
    if run.partial:
        lines = [f"**Partial run** ({run.partial}): the items that had not ended are missing.", "", *lines]
    if summary := summary_table(run.records, markdown=True):
        lines += ["", "Summary per template (as PyTorch's compiler dashboard):", "", *summary]
    evidence: dict[tuple[str, str], list[str]] = {}  # (template, evidence) -> the samples it was seen on
    for (sample, template, device), c in run.cells.items():
        if c.verdict.effect_evidence:
            evidence.setdefault((template, c.verdict.effect_evidence), []).append(f"{sample} [{device}]")
    if evidence:
        lines += ["", "Effect evidence (each distinct line once per template, with the samples it was seen on):", ""]
        lines += [f"- `{t}` on {', '.join(samples)}: {text}" for (t, text), samples in sorted(evidence.items())]
    if run.left_out:
        lines += ["", "Templates not run on this machine (left out of `all`):", ""]
        lines += [f"- `{r['template']}`: {r['reason']}" for r in run.left_out]
    failures = [(key, c.verdict) for key, c in run.cells.items() if c.outcome in FAILURES]
    if failures:
        lines += ["", "Failed items:", ""]
        lines += [f"- {'/'.join(key)}: {_outcome(r)}: {r.reason}" for key, r in failures]
    diagnosed = [(key, c.verdict) for key, c in run.cells.items() if c.verdict.diagnosis]
    if diagnosed:
        lines += ["", "Diagnoses (where and why each failing check fails):", ""]
        lines += [
            f"- {'/'.join(key)}: {r.diagnosis}" + (f" (repro: `{r.repro}`)" if r.repro else "") for key, r in diagnosed
        ]
    uncompared = [(key, c.verdict.uncompared) for key, c in run.cells.items() if c.verdict.uncompared]
    if uncompared:
        why = "eager is NaN or Inf everywhere there: only that compiled matches it was checked"
        lines += ["", f"Passed with nothing compared in some output ({why}):", ""]
        lines += [f"- {'/'.join(key)}: {what}" for key, what in uncompared]
    cleared = [(key, c.verdict.fp64_second_opinion) for key, c in run.cells.items() if c.verdict.fp64_second_opinion]
    if cleared:
        lines += ["", "Passed on the float64 second opinion:", ""]
        lines += [f"- {'/'.join(key)}: {evidence}" for key, evidence in cleared]
    return "\n".join(lines)
