"""Stopping a helper's check that the asking process no longer needs: a signal (``SIGNAL``) raises ``Cancelled`` in
the helper, but only inside a ``cancellable`` stretch (the compile and the calls), never while the check takes or
gives back the host's lock or waits for its compile pool; outside one the signal is blocked, and a signal left over
from the question before is dropped as the next begins (``begin``). The handler touches plain values only (a lock
taken by the code it interrupts would never be given back)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

SIGNAL = getattr(signal, "SIGUSR2", None) if hasattr(signal, "sigtimedwait") else None  # None: nothing is stopped
_state = {"armed": False, "open": False, "cancelled": False}


class Cancelled(BaseException):
    """Raised in a helper's check when the asking process no longer needs its answer (a BaseException, as an
    interrupt: no ``except Exception`` on the way takes it for the check's own error)."""


def arm() -> None:
    """Make this process (a helper) stoppable: the handler installed, the signal blocked outside ``cancellable``."""
    if SIGNAL is None:
        return
    signal.signal(SIGNAL, _handler)
    signal.pthread_sigmask(signal.SIG_BLOCK, {SIGNAL})
    _state["armed"] = True


def _handler(signum: int, frame: Any) -> None:
    if _state["open"]:
        _state["open"], _state["cancelled"] = False, True
        raise Cancelled("the asking process no longer needs this answer")


def begin() -> None:
    """A question begins: a signal meant for the one before (sent as it finished) is dropped, unanswered."""
    _state["cancelled"] = False
    if _state["armed"]:
        while signal.sigtimedwait({SIGNAL}, 0) is not None:  # type: ignore[arg-type]
            pass


def was_cancelled() -> bool:
    """Whether the question now ending was stopped."""
    return bool(_state["cancelled"])


@contextlib.contextmanager
def cancellable() -> Iterator[None]:
    """A stretch of a helper's check that may be stopped (in any other process: nothing changes)."""
    if not _state["armed"]:
        yield
        return
    _state["open"] = True
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {SIGNAL})  # type: ignore[arg-type]
    try:
        yield
    finally:
        _state["open"] = False
        signal.pthread_sigmask(signal.SIG_BLOCK, {SIGNAL})  # type: ignore[arg-type]
