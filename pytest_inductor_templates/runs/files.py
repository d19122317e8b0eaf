"""Saved runs: the plugin's records read back from pytest-benchmark JSON, by matrix cell, and merged."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..outcomes import Outcome
from ..record import EAGER, FORMAT, READS, SECTION, ItemRecord
from . import results_file


class RunError(Exception):
    """A run file that cannot be used, with the reason in one line."""


Key = tuple[str, str, str]  # sample, template, device
TF32_DEFAULT = "torch's default"  # a run's TF32 mode without --inductor-tf32


@dataclass
class Cell:
    """One (sample, template, device) of a run: its check item's record and its bench item's."""

    check: ItemRecord | None = None
    bench: ItemRecord | None = None

    @property
    def verdict(self) -> ItemRecord:
        """The record that carries the cell's correctness verdict."""
        found = self.check or self.bench
        assert found is not None
        return found

    @property
    def outcome(self) -> Outcome | None:
        return self.verdict.outcome

    @property
    def speedup(self) -> float | None:
        return self.bench.speedup if self.bench else None

    @property
    def median(self) -> float | None:
        return self.bench.median if self.bench else None


@dataclass
class Run:
    """One saved run: every item's record, and the records by matrix cell."""

    path: str
    data: dict[str, Any]
    records: list[ItemRecord]
    cells: dict[Key, Cell] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for record in self.records:
            cell = self.cells.setdefault(record.key, Cell())
            setattr(cell, "bench" if record.kind == "bench" else "check", record)

    @property
    def gpu(self) -> str | None:
        return self.data.get("machine_info", {}).get("gpu")

    @property
    def tf32(self) -> str:
        """The run's TF32 mode (--inductor-tf32): ``on``, ``off``, or ``torch's default`` where the flags were left as
        they were; from machine_info, else from the records (a run saved before the option: torch's default)."""
        info = self.data.get("machine_info", {})
        modes = {info.get("tf32")} if "tf32" in info else {r.tf32 for r in self.records} or {None}
        return ", ".join(sorted(m or TF32_DEFAULT for m in modes))

    @property
    def xdist_workers(self) -> int | None:
        """How many pytest-xdist workers the run had (0: none), from machine_info; None for a run saved before the
        plugin recorded it."""
        workers = self.data.get("machine_info", {}).get("xdist_workers")
        return workers if isinstance(workers, int) and not isinstance(workers, bool) else None

    @property
    def machine(self) -> str:
        tf32 = f", TF32 {self.tf32}" if self.tf32 != TF32_DEFAULT else ""
        return f"{self.gpu or 'no GPU'}, torch {self.data.get('machine_info', {}).get('torch', '?')}{tf32}"

    @property
    def partial(self) -> str | None:
        """Why the run is incomplete (cut short while its results were written), or None."""
        return self.data[SECTION].get("partial")

    @property
    def left_out(self) -> list[dict[str, str]]:
        """The templates ``--inductor-template=all`` left out, each with the reason."""
        return list(self.data[SECTION].get("left_out", []))


def from_data(path: str, data: Any) -> Run:
    """A run from a loaded JSON document, or a RunError saying why it is not one."""
    if not isinstance(data, dict) or not isinstance(data.get(SECTION), dict):
        raise RunError(f"{path}: no {SECTION!r} section: not a run saved by pytest-inductor-templates")
    version = data[SECTION].get("format")
    if version not in READS:
        readable = f"{', '.join(map(str, READS[:-1]))} and {READS[-1]}"
        raise RunError(f"{path}: {SECTION} format {version!r}; this version of the plugin reads formats {readable}")
    for name, kind, where in (
        ("items", list, data[SECTION]),
        ("left_out", list, data[SECTION]),
        ("benchmarks", list, data),
        ("machine_info", dict, data),
    ):
        value = where.get(name, kind())
        if not isinstance(value, kind) or (kind is list and not all(isinstance(v, dict) for v in value)):
            raise RunError(f"{path}: {name!r} is not a {'list of objects' if kind is list else 'JSON object'}")
    if not all(
        isinstance(r.get("template"), str) and isinstance(r.get("reason"), str)
        for r in data[SECTION].get("left_out", [])
    ):
        raise RunError(f"{path}: an entry of {SECTION}.left_out lacks its 'template' or 'reason'")
    try:
        records = [ItemRecord.from_dict(item) for item in data[SECTION].get("items", [])]
    except (KeyError, TypeError, ValueError) as error:
        raise RunError(
            f"{path}: a malformed item record in {SECTION}.items ({type(error).__name__}: {error})"
        ) from None
    return Run(path, data, records)


def load(path: str) -> Run:
    """A run from pytest-benchmark JSON written with the plugin, or from a results file (--inductor-results)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise RunError(f"{path}: cannot read: {getattr(error, 'strerror', None) or error}") from None
    if results_file.is_results_file(text):
        try:
            data = results_file.as_run_data(*results_file.read(text))
        except (ValueError, IndexError) as error:
            raise RunError(f"{path}: a malformed results file: {error}") from None
        return from_data(path, data)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise RunError(f"{path}: not JSON: {error}") from None
    return from_data(path, data)


def write_text(path: str, text: str) -> None:
    """Write an output file; a path that cannot be written is a RunError."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as error:
        raise RunError(f"{path}: cannot write: {error.strerror or error}") from None


def merge(runs: list[Run]) -> tuple[dict[str, Any], list[str]]:
    """One run from shards, and notes on what was dropped: timed entries and records concatenated.

    Every shard of a split by template runs the ``eager`` reference row: the first shard's eager items are
    kept, the others' dropped (named in the notes). Each compiled entry keeps its own speedup, paired with
    eager in its own item. machine_info and commit_info come from the first shard; shards on other GPUs keep
    theirs in each record (``gpu``). Any other item in two shards is an error. A shard that
    was cut short makes the merged run partial.
    """
    merged = copy.deepcopy(runs[0].data)
    merged["benchmarks"], records, notes = [], [], []
    seen: dict[tuple[str, ...], str] = {}
    for run in runs:
        dropped = set()
        for record in run.records:
            identity = (*record.key, record.kind, record.source)
            if identity in seen and record.template == EAGER:
                dropped.add(record.nodeid)
                continue
            if identity in seen:
                raise RunError(f"{record.nodeid or '/'.join(record.key)} is in both {seen[identity]} and {run.path}")
            seen[identity] = run.path
            records.append(copy.deepcopy(record))
        entries = run.data.get("benchmarks", [])
        merged["benchmarks"] += [copy.deepcopy(e) for e in entries if e.get("fullname") not in dropped]
        if dropped:
            notes.append(f"{run.path}: {len(dropped)} eager item(s) already in an earlier shard: dropped")
    left_out = {r["template"]: (r["template"], r["reason"]) for run in runs for r in run.left_out}
    write_records(merged, records, list(left_out.values()))
    merged[SECTION]["merged_from"] = [run.path for run in runs]
    partial = [f"{run.path}: {run.partial}" for run in runs if run.partial]
    if partial:
        merged[SECTION]["partial"] = "; ".join(partial)
    return merged, notes


def write_records(data: dict[str, Any], records: list[ItemRecord], left_out: list[tuple[str, str]]) -> None:
    """Put the records into a pytest-benchmark JSON document: each timed entry's ``extra_info`` updated with
    its item's record, and the ``inductor_templates`` section (every record, the format version, the
    templates ``all`` left out)."""
    by_nodeid = {r.nodeid: r for r in records if r.kind == "bench"}
    for entry in data.get("benchmarks", []):
        if (record := by_nodeid.get(entry.get("fullname"))) is not None:
            entry.setdefault("extra_info", {}).update(record.to_dict())
    data[SECTION] = {"format": FORMAT, "items": [r.to_dict() for r in records]}
    if left_out:
        data[SECTION]["left_out"] = [{"template": name, "reason": why} for name, why in left_out]
