"""How long a sample item's work may take: ``--inductor-timeout``, and pytest-timeout's limit when it is active.

Under pytest-timeout the plugin stops the worker a little before pytest-timeout's limit for the item (counted,
as pytest-timeout counts it, from the item's start), so that the item's outcome is ``timeout`` with the phase it
hung in, rather than pytest-timeout's failure (or, with its thread method, the end of the whole session).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pytest

BEFORE_PYTEST_TIMEOUT = 3.0  # seconds (or 10% of a longer limit) the plugin stops the worker before pytest-timeout


@dataclass(frozen=True)
class Limit:
    """An item's limits: ``seconds`` per request (--inductor-timeout), and a ``deadline`` (``time.monotonic()``)
    before pytest-timeout's ``pytest_timeout`` seconds run out."""

    seconds: float | None = None
    deadline: float | None = None
    pytest_timeout: float | None = None

    def for_request(self, start: float) -> tuple[float | None, str]:
        """The deadline of a request sent at ``start``, and what set it (for the timeout's reason)."""
        ends = []
        if self.seconds is not None:
            ends.append((start + self.seconds, f"--inductor-timeout={self.seconds:g} s"))
        if self.deadline is not None and self.pytest_timeout is not None:
            ours = ours_before(self.pytest_timeout)
            ends.append((self.deadline, f"{ours:g} s (before pytest-timeout's {self.pytest_timeout:g} s)"))
        return min(ends) if ends else (None, "")


def pytest_timeout_limit(item: pytest.Item) -> float | None:
    """pytest-timeout's limit for ``item`` in seconds (its marker, else --timeout, else its ini key or
    PYTEST_TIMEOUT), or None when that plugin is not active or sets none."""
    if not item.config.pluginmanager.hasplugin("timeout"):
        return None
    marker = item.get_closest_marker("timeout")
    value: object = None
    if marker is not None:
        value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if value is None:
        value = item.config.getoption("timeout", None)
    if value is None:
        try:
            value = item.config.getini("timeout") or None
        except ValueError:
            value = None
    if value is None:
        value = os.environ.get("PYTEST_TIMEOUT")
    try:
        seconds = float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 else None


def ours_before(theirs: float) -> float:
    """How long the plugin waits when pytest-timeout gives an item ``theirs`` seconds: enough less to stop the
    worker (and let it print where it hung) first."""
    margin = max(BEFORE_PYTEST_TIMEOUT, 0.1 * theirs)
    return round(theirs - margin, 1) if theirs > 2 * margin else round(theirs / 2, 1)


def item_limit(item: pytest.Item, timeout: float | None) -> Limit:
    """``item``'s limits, taken as it is set up (pytest-timeout's clock started just before)."""
    theirs = pytest_timeout_limit(item)
    deadline = time.monotonic() + ours_before(theirs) if theirs else None
    return Limit(timeout, deadline, theirs)
