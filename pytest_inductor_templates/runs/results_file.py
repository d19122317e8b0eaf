"""The results file (``--inductor-results FILE``): each item's record, appended as JSON lines as the item ends.

    {"inductor_templates_results": 1, "format": 5, "started": "...", "argv": [...], "machine_info": {...}}
    {"record": {...}}                      one line per item, written and flushed when its report arrives
    {"record": {...}}                      an item's record again, amended (a diagnosis after the run's items):
                                           the last line of a node id is its record
    {"end": {"exitstatus": 0, "complete": true, "finished": "...", "left_out": [...], "diagnosis_seconds": 61.2}}

A run cut short (a crash of pytest itself, a kill, SIGTERM, SIGINT) leaves every line written so far, and
no end line or one with ``complete`` false: readers call that run partial. Unlike pytest-benchmark's JSON,
the file is written under pytest-xdist and ``--benchmark-skip`` too. Neither torch nor pytest is imported.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from ..record import FORMAT, ItemRecord

MARK = "inductor_templates_results"  # the header's key: what tells a results file from pytest-benchmark JSON
VERSION = 1  # of the line layout above; the records themselves are ``FORMAT``


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class ResultsWriter:
    """Appends a run's lines to the results file, flushing each, so that a killed run keeps them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stream: IO[str] | None = None

    def start(self, machine_info: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._stream = open(self.path, "w", encoding="utf-8")
        header = {
            MARK: VERSION,
            "format": FORMAT,
            "started": _now(),
            "argv": sys.argv[1:],
            "machine_info": machine_info,
        }
        self._write(header)

    def add(self, record: ItemRecord) -> None:
        self._write({"record": record.to_dict()})

    def end(
        self,
        exitstatus: int,
        complete: bool,
        left_out: list[tuple[str, str]],
        why: str | None = None,
        diagnosis_seconds: float | None = None,
        machine_info: dict[str, Any] | None = None,
    ) -> None:
        """The last line; ``complete`` False (with ``why``) for a run that was interrupted; the seconds the run's
        diagnoses took in all, where it diagnosed any; ``machine_info``: what the run learnt of the machine after the
        first line was written (the CPU-speed probe's verdict), read over the first line's."""
        end: dict[str, Any] = {"exitstatus": exitstatus, "complete": complete, "finished": _now()}
        if machine_info:
            end["machine_info"] = machine_info
        if diagnosis_seconds is not None:
            end["diagnosis_seconds"] = diagnosis_seconds
        if why:
            end["interrupted"] = why
        if left_out:
            end["left_out"] = [{"template": name, "reason": reason} for name, reason in left_out]
        self._write({"end": end})
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _write(self, line: dict[str, Any]) -> None:
        if self._stream is not None:
            self._stream.write(json.dumps(line) + "\n")
            self._stream.flush()


def is_results_file(text: str) -> bool:
    """Whether ``text`` starts like a results file (and not like a JSON document)."""
    first = text.lstrip().split("\n", 1)[0]
    try:
        header = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(header, dict) and MARK in header


def read(text: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """(header, record dicts, end or None) of a results file, each item's last record (an amended one in place of
    the first). A last line cut off mid-write is dropped; any other line that is not JSON raises ValueError."""
    lines = [line for line in text.splitlines() if line.strip()]
    header, records, end = json.loads(lines[0]), [], None
    where: dict[str, int] = {}  # node id -> its record's index
    if not isinstance(header, dict):
        raise ValueError("line 1 is not a JSON object")
    for number, line in enumerate(lines[1:], start=2):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # the run died while writing it
                break
            raise ValueError(f"line {number} is not JSON") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("record", entry.get("end", {})), dict):
            raise ValueError(f"line {number} is not a record or end line (a JSON object holding one)")
        if "record" in entry:
            nodeid = entry["record"].get("nodeid")
            if nodeid is not None and nodeid in where:
                records[where[nodeid]] = entry["record"]
                continue
            if nodeid is not None:
                where[nodeid] = len(records)
            records.append(entry["record"])
        elif "end" in entry:
            end = entry["end"]
    return header, records, end


def as_run_data(header: dict[str, Any], records: list[dict[str, Any]], end: dict[str, Any] | None) -> dict[str, Any]:
    """The results file's content laid out as the plugin's section of pytest-benchmark JSON (no timed
    entries): what ``compare``, ``merge`` and ``report`` read."""
    complete = bool(end and end.get("complete"))
    section: dict[str, Any] = {"format": header.get("format"), "items": records}
    if end and end.get("left_out"):
        section["left_out"] = end["left_out"]
    if not complete:
        section["partial"] = (end or {}).get("interrupted") or "the results file has no end line: the run was cut off"
    if header.get("argv") is not None:
        section["argv"] = header["argv"]
    machine_info = {**header.get("machine_info", {}), **(end or {}).get("machine_info", {})}
    data = {"machine_info": machine_info, "benchmarks": [], "inductor_templates": section}
    return {**data, "datetime": header["started"]} if header.get("started") else data
