"""How long a sample item's work may take: ``--inductor-timeout`` per request, and a deadline a little before
pytest-timeout's limit for the item (``integrations.timeout`` reads that limit). Neither torch nor pytest here."""

from __future__ import annotations

from dataclasses import dataclass

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


def ours_before(theirs: float) -> float:
    """How long the plugin waits when pytest-timeout gives an item ``theirs`` seconds: enough less to stop the
    worker (and let it print where it hung) first."""
    margin = max(BEFORE_PYTEST_TIMEOUT, 0.1 * theirs)
    return round(theirs - margin, 1) if theirs > 2 * margin else round(theirs / 2, 1)
