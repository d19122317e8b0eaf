"""Saved runs: pytest-benchmark JSON files the plugin enriched, loaded, keyed and merged."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .results import Entry, add_speedups_to_json, entry_from_json

SECTION = "inductor_templates"  # the plugin's own top-level key: every checked item's outcome


class RunError(Exception):
    """A run file that cannot be used, with the reason in one line."""


Key = tuple[str, str, str]  # sample, template, device


@dataclass
class Run:
    """One saved run: its timed entries and every recorded outcome, by (sample, template, device)."""

    path: str
    data: dict[str, Any]
    entries: dict[Key, Entry] = field(default_factory=dict)
    outcomes: dict[Key, tuple[str, str]] = field(default_factory=dict)  # outcome, reason

    @property
    def machine(self) -> str:
        info = self.data.get("machine_info", {})
        gpu = info.get("gpu") or "no GPU"
        return f"{gpu}, torch {info.get('torch', '?')}"

    def outcome(self, key: Key) -> str | None:
        entry = self.entries.get(key)
        if entry is not None and entry.outcome is not None:
            return entry.outcome
        recorded = self.outcomes.get(key)
        return recorded[0] if recorded else None


def outcome_records(data: dict[str, Any]) -> list[dict[str, Any]]:
    return list(data.get(SECTION, {}).get("outcomes", []))


def from_data(path: str, data: dict[str, Any]) -> Run:
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise RunError(f"{path}: not a pytest-benchmark JSON file (no 'benchmarks' list)")
    run = Run(path, data)
    for benchmark in data["benchmarks"]:
        entry = entry_from_json(benchmark)
        if entry is not None:
            run.entries[entry.key] = entry
    for record in outcome_records(data):
        key = (str(record["sample"]), str(record["template"]), str(record["device"]))
        run.outcomes[key] = (str(record["outcome"]), str(record.get("reason", "")))
    if not run.entries and not run.outcomes:
        raise RunError(f"{path}: no entries written by pytest-inductor-templates (no sample/template extra_info)")
    return run


def load(path: str) -> Run:
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise RunError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise RunError(f"{path}: not JSON: {error}") from None
    return from_data(path, data)


def merge(runs: list[Run]) -> dict[str, Any]:
    """One run from shards: benchmarks and outcomes concatenated, speedups recomputed across shards.

    machine_info and commit_info come from the first shard; shards on other GPUs keep theirs in each
    entry's extra_info (``gpu``). The same item in two shards is an error.
    """
    merged = json.loads(json.dumps(runs[0].data))
    merged["benchmarks"], outcomes = [], []
    seen_benchmarks: dict[str, str] = {}
    seen_outcomes: dict[Key, str] = {}
    for run in runs:
        for benchmark in run.data["benchmarks"]:
            fullname = str(benchmark.get("fullname"))
            if fullname in seen_benchmarks:
                raise RunError(f"{fullname} is in both {seen_benchmarks[fullname]} and {run.path}")
            seen_benchmarks[fullname] = run.path
            merged["benchmarks"].append(benchmark)
        for record in outcome_records(run.data):
            key = (str(record["sample"]), str(record["template"]), str(record["device"]))
            if key in seen_outcomes:
                raise RunError(f"{'/'.join(key)} was checked in both {seen_outcomes[key]} and {run.path}")
            seen_outcomes[key] = run.path
            outcomes.append(record)
    add_speedups_to_json(merged["benchmarks"])
    merged.setdefault(SECTION, {})["outcomes"] = outcomes
    left_out = {r["template"]: r for run in runs for r in run.data.get(SECTION, {}).get("left_out", [])}
    if left_out:
        merged[SECTION]["left_out"] = list(left_out.values())
    merged[SECTION]["merged_from"] = [run.path for run in runs]
    return merged
