"""The printed summary: caught/applicable per fault, false alarms per harmless change, plain default's verdicts."""

from __future__ import annotations

from typing import Any

from .changes import FAULTS, HARMLESS
from .measures import LEGIT


def fault_rows(ok: list[dict[str, Any]]) -> list[str]:
    lines = [f"  {'fault':18s} {'caught/applicable':>17s} {'hidden':>6s}  missed on (rule, change in legit units)"]
    for name in FAULTS:
        results = [(e, e["faults"][name]) for e in ok]
        applicable = [(e, r) for e, r in results if r.get("applicable")]
        hidden = [r for _, r in results if r.get("change", 0) > 1 and not r.get("applicable")]
        missed = [(e, r) for e, r in applicable if r["outcome"] == "pass"]
        shown = "; ".join(f"{e['sample']} ({r['rule']}, {r['change']:.3g})" for e, r in missed[:5])
        caught = f"{len(applicable) - len(missed)}/{len(applicable)}"
        lines.append(f"  {name:18s} {caught:>17s} {len(hidden):>6d}  {shown}")
    return lines


def harmless_rows(ok: list[dict[str, Any]]) -> list[str]:
    lines = [f"  {'harmless change':18s} {'false alarms':>17s} {'max change':>10s}  on (rule)"]
    for name in HARMLESS:
        applicable = [e for e in ok if e["harmless"].get(name, {}).get("applicable")]
        alarms = [e for e in applicable if e["harmless"][name]["outcome"] != "pass"]
        largest = max((e["harmless"][name]["change"] for e in applicable), default=0.0)
        shown = "; ".join(f"{e['sample']} ({e['harmless'][name]['rule']})" for e in alarms[:5])
        lines.append(f"  {name:18s} {f'{len(alarms)}/{len(applicable)}':>17s} {largest:>10.3g}  {shown}")
    return lines


def plain_rows(ok: list[dict[str, Any]]) -> list[str]:
    rules: dict[str, int] = {}
    for e in ok:
        plain = e["harmless"]["plain_default"]
        if plain["outcome"] == "pass":
            rules[plain["rule"]] = rules.get(plain["rule"], 0) + 1
    by_rule = ", ".join(f"{rule}: {n}" for rule, n in rules.items())
    lines = [f"  plain default: {sum(rules.values())}/{len(ok)} pass ({by_rule})"]
    for e in ok:
        plain = e["harmless"]["plain_default"]
        if plain["outcome"] == "pass":
            continue
        lines.append(f"  FAIL {e['sample']}: {plain['rule']}: {plain['reason'][:300]}")
        for row in e["evidence"]:
            if "compiled_vs_float64_rmse" in row:
                lines.append(
                    f"    call {row['call']} {row['output']}: max|eager| {row['max_abs_eager']:.3g}; against float64, "
                    f"compiled vs eager: RMSE {row['compiled_vs_float64_rmse']:.3g} vs "
                    f"{row['eager_vs_float64_rmse']:.3g}, worst {row['compiled_vs_float64_worst']:.3g} vs "
                    f"{row['eager_vs_float64_worst']:.3g}"
                )
    return lines


def float64_rows(ok: list[dict[str, Any]]) -> list[str]:
    fine = sum(e["float64"] == "ok" for e in ok)
    lines = [f"  float64 run: a trusted second opinion on {fine}/{len(ok)}"]
    lines += [f"    {e['sample']}: {e['float64'][:200]}" for e in ok if e["float64"] != "ok"]
    return lines


def overview_rows(entries: list[dict[str, Any]]) -> list[str]:
    """One markdown row per dtype and device: the figures of the tables below, summed."""
    lines = [
        "| dtype on device | samples | compiled and ran | faults caught / applicable | hidden | false alarms "
        "| plain default passed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for dtype in dict.fromkeys(e["dtype"] for e in entries):
        rows = [e for e in entries if e["dtype"] == dtype]
        ok = [e for e in rows if e["status"] == "ok"]
        faults = [r for e in ok for r in e["faults"].values()]
        applicable = [r for r in faults if r.get("applicable")]
        caught = sum(1 for r in applicable if r["outcome"] != "pass")
        hidden = sum(1 for r in faults if r.get("change", 0) > 1 and not r.get("applicable"))
        changes = [c for e in ok for name, c in e["harmless"].items() if name != "plain_default"]
        alarms = sum(1 for c in changes if c.get("applicable") and c["outcome"] != "pass")
        passed = sum(1 for e in ok if e["harmless"]["plain_default"]["outcome"] == "pass")
        lines.append(
            f"| {dtype} on {rows[0]['device']} | {len(rows)} | {len(ok)} | {caught} / {len(applicable)} | {hidden} "
            f"| {alarms} | {passed} of {len(ok)} |"
        )
    return lines


def summarize(entries: list[dict[str, Any]], header: str) -> str:
    """An overview table, then per dtype: caught/applicable per fault, false alarms per harmless change, plain
    default's failures."""
    lines = [*overview_rows(entries), "", header, ""]
    lines += ["Legitimate reassociation error: a fault is applicable where it changes some element by more"]
    for dtype, (rtol, atol) in LEGIT.items():
        lines.append(
            f"  {dtype}: {rtol:g} x |eager| + {atol:g} x max|eager| of the output (at least its smallest normal)"
        )
    lines += [
        "and where the change stands out of eager's own error against float64 (more than 3x it, in the output's",
        "RMSE, its worst element or a slice); 'hidden' counts faults beyond the first bound but not the second.",
        "On CUDA, where the model runs a convolution or GEMM under its TF32 flag (cuDNN's is on by default),",
        "float32 is computed in TF32 there: eager's error then counts as at least TF32 rounding's (the float64 run",
        "from TF32-rounded inputs and weights), as in the second opinion, and faults within it are 'hidden'.",
        "'max change' is the largest distance from eager, in units of the legitimate error.",
    ]
    for dtype in dict.fromkeys(e["dtype"] for e in entries):
        rows = [e for e in entries if e["dtype"] == dtype]
        ok = [e for e in rows if e["status"] == "ok"]
        lines += ["", f"## {dtype} on {rows[0]['device']}: {len(rows)} samples, {len(ok)} compiled and ran", ""]
        lines += [f"  not run: {e['sample']}: {e['status']}: {e.get('reason', '')[:160]}" for e in rows if e not in ok]
        lines += ["", *fault_rows(ok), "", *harmless_rows(ok), "", *plain_rows(ok), "", *float64_rows(ok)]
    return "\n".join(lines)
