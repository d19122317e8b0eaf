"""pytest-timeout: the limit it resolved for an item, read from its own hook, so that the sample worker is stopped
a little before it (the item then ends ``timeout`` with the phase it hung in, rather than pytest-timeout's failure
or, with its thread method, the end of the whole session).

Registered only when pytest-timeout is installed. Its ``pytest_timeout_set_timer`` hook fires when it starts an
item's timer (a limit above 0, no debugger attached): at the item's start, or at its call with ``func_only``.
"""

from __future__ import annotations

import time

import pytest

from ..limits import Limit, ours_before

STARTED_KEY = pytest.StashKey[tuple[float, float]]()  # (pytest-timeout's seconds, time.monotonic() at its start)


class TimeoutWatch:
    """Notes the limit and the start of pytest-timeout's timer on each item."""

    @pytest.hookimpl(tryfirst=True, optionalhook=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: object) -> None:
        seconds = getattr(settings, "timeout", None)
        if seconds:
            item.stash[STARTED_KEY] = (float(seconds), time.monotonic())


def item_limit(item: pytest.Item, seconds: float | None) -> Limit:
    """``item``'s limits: ``seconds`` per request (--inductor-timeout), and a deadline before pytest-timeout's."""
    started = item.stash.get(STARTED_KEY, None)
    if started is None:
        return Limit(seconds)
    theirs, since = started
    return Limit(seconds, since + ours_before(theirs), theirs)
