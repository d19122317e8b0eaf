"""Did a change alter what a run records? Compare two runs' fields: the benchmark JSON (each entry's ``extra_info``
and the ``inductor_templates`` items), the JUnit XML properties and the results file, item by item.

    python benchmarks/fields_diff.py BEFORE_DIR AFTER_DIR

Each folder holds ``run.json``, ``junit.xml`` and ``results.jsonl`` of the same selection. Prints, per source, the
fields only one side has and the items whose non-timing values differ (figures measured in time or memory differ
from run to run and are compared by presence only). Exit code 0 always: the output is for a person to read.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

MEASURED = {  # fields whose values are measurements: compared by presence only
    "median", "eager_median", "compiled_median", "speedup", "speedup_low", "speedup_high", "device_speedup",
    "compile_seconds", "warmup_calls", "paired_rounds", "unstable", "pid", "rss_mib", "cuda_mib", "device_time_ms",
    "eager_device_time_ms", "threads", "reason", "effect_evidence", "fp64_second_opinion", "tolerance_level",
}  # fmt: skip


def by_item(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{r['sample']}|{r['template']}|{r['device']}|{r['kind']}": r for r in records}


def json_items(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
    data = json.loads((folder / "run.json").read_text())
    extra = {b["fullname"]: b.get("extra_info", {}) for b in data["benchmarks"]}
    entries = {  # pytest-benchmark's own fields: its options by value, its statistics by presence
        b["fullname"]: {
            "group": b["group"], "name": b["name"], "params": b["params"],
            **{f"options.{k}": v for k, v in b["options"].items()}, **{f"stats.{k}": None for k in b["stats"]},
        }
        for b in data["benchmarks"]
    }  # fmt: skip
    return {
        "json items": by_item(data["inductor_templates"]["items"]),
        "json extra_info": extra,
        "json entries": entries,
    }


def junit_items(folder: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for case in ElementTree.parse(folder / "junit.xml").iter("testcase"):
        fields = {p.get("name"): p.get("value") for p in case.iter("property")}
        found[f"{case.get('classname')}::{case.get('name')}"] = fields
    return found


def results_items(folder: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines() if line.strip()]
    return by_item([line["record"] for line in lines if "record" in line])


def differences(name: str, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[str]:
    """One line per kind of difference, with the items it was seen on (the first named, the rest counted)."""
    seen: dict[str, list[str]] = {}
    for key in sorted(set(before) ^ set(after)):
        seen.setdefault(f"item only {'before' if key in before else 'after'}", []).append(key)
    for key in sorted(set(before) & set(after)):
        old, new = before[key], after[key]
        for field in sorted(set(old) ^ set(new)):
            seen.setdefault(f"field {field} only {'before' if field in old else 'after'}", []).append(key)
        for field in sorted(set(old) & set(new)):
            bare = field.removeprefix("inductor_")
            if bare not in MEASURED and old[field] != new[field]:
                seen.setdefault(f"{field}: {old[field]!r} -> {new[field]!r}", []).append(key)
    return [f"{name}: {what}: {len(keys)} item(s), e.g. {keys[0]}" for what, keys in seen.items()]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    before, after = Path(argv[0]), Path(argv[1])
    sources = {**json_items(before), "junit": junit_items(before), "results": results_items(before)}
    later = {**json_items(after), "junit": junit_items(after), "results": results_items(after)}
    lines = [line for name in sources for line in differences(name, sources[name], later[name])]
    counts = ", ".join(f"{name} {len(items)} items" for name, items in later.items())
    print(f"compared: {counts}")
    print("\n".join(lines) if lines else "no difference but measured values")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
