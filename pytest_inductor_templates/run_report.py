"""One run as markdown: samples x templates with outcome, effect and speedup, then the evidence."""

from __future__ import annotations

from .results import EAGER, Entry, fill_speedups, geomean
from .runs import SECTION, Run

MARK = {"effect": "effect", "no effect": "**no effect**", "not observed": "not observed"}


def _cell(entry: Entry | None, outcome: str | None) -> str:
    if entry is None:
        return outcome or "-"
    parts = [entry.outcome or "pass"]
    if entry.effect:
        parts.append(MARK.get(entry.effect, entry.effect))
    if entry.speedup is not None:
        parts.append(f"{entry.speedup:.2f}x")
    return " / ".join(parts)


def as_markdown(run: Run) -> str:
    """The run's samples x templates table (outcome / effect / speedup over eager), geomeans, evidence."""
    entries = fill_speedups(run.entries.values())
    keys = list(dict.fromkeys([*(e.key for e in entries), *run.outcomes]))
    templates = list(dict.fromkeys(t for _, t, _ in keys if t != EAGER))
    rows = list(dict.fromkeys((s, d) for s, _, d in keys))
    cells = {e.key: e for e in entries}
    lines = ["| sample [device] | " + " | ".join(f"`{t}`" for t in templates) + " |"]
    lines.append("| --- |" + " --- |" * len(templates))
    for sample, device in rows:
        row = [_cell(cells.get((sample, t, device)), run.outcome((sample, t, device))) for t in templates]
        lines.append(f"| {sample} [{device}] | " + " | ".join(row) + " |")
    means = []
    for template in templates:
        speedups = [e.speedup for e in entries if e.template == template and e.speedup is not None]
        mean = geomean(speedups)
        means.append(f"{mean:.2f}x over {len(speedups)}" if mean is not None else "n/a")
    lines.append("| geomean speedup | " + " | ".join(means) + " |")
    evidence = sorted({(e.template, e.effect_evidence) for e in entries if e.effect_evidence})
    if evidence:
        lines += ["", "Effect evidence (distinct lines per template):", ""]
        lines += [f"- `{template}`: {text}" for template, text in evidence]
    left_out = run.data.get(SECTION, {}).get("left_out", [])
    if left_out:
        lines += ["", "Templates not run on this machine (left out of `all`):", ""]
        lines += [f"- `{r['template']}`: {r['reason']}" for r in left_out]
    failures = [(k, o) for k, (o, r) in run.outcomes.items() if o not in ("pass", "skipped")]
    if failures:
        lines += ["", "Failed items:", ""]
        lines += [f"- {'/'.join(key)}: {outcome}: {run.outcomes[key][1]}" for key, outcome in failures]
    return "\n".join(lines)
