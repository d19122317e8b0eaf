"""How long a sample item's work may take: ``--inductor-timeout``, and pytest-timeout's limit when it is active.

Under pytest-timeout, the plugin's own limit is set a little shorter than pytest-timeout's, so that the
worker is stopped first and the item's outcome is ``timeout`` with the phase it hung in, rather than
pytest-timeout's failure (or, with its thread method, the end of the whole session).
"""

from __future__ import annotations

import os

import pytest

BEFORE_PYTEST_TIMEOUT = 0.9  # the share of pytest-timeout's limit the plugin waits for a sample item


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


def item_limit(item: pytest.Item, timeout: float | None) -> float | None:
    """Seconds ``item``'s work may take: the shorter of ``timeout`` and pytest-timeout's (shortened) limit."""
    theirs = pytest_timeout_limit(item)
    limits = [t for t in (timeout, theirs * BEFORE_PYTEST_TIMEOUT if theirs else None) if t is not None]
    return min(limits) if limits else None
