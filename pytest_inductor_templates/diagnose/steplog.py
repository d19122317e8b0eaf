"""The child's step log: one JSON object a line, flushed as written, so a killed child leaves what it found."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


class StepLog:
    """Appends ``{"step": ..., ...}`` records to a file, each fsynced before the next step starts."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = time.monotonic()

    def write(self, step: str, **fields: Any) -> None:
        record = {"step": step, "at": round(time.monotonic() - self.start, 2), **fields}
        with open(self.path, "a", encoding="utf-8") as file:
            file.write(json.dumps(record, default=str) + "\n")
            file.flush()
            os.fsync(file.fileno())


def read_log(path: Path) -> list[dict[str, Any]]:
    """The records written so far; a line cut short by a kill is dropped."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
