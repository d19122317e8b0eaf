"""The phase a sample's triple is in, so that a timeout or a crash can say where it happened.

The code that runs a triple marks each step with ``enter``; a listener (the worker process reports
each phase to the pytest process) hears every change. Neither torch nor pytest is imported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

BUILDING = "building"  # the sample's model and inputs
EAGER_CALL = "eager call"
COMPILING = "compiling"  # Dynamo tracing and the backend's compile
COMPILED_CALL = "compiled call"
TIMING = "timing"
PEAK_MEMORY = "measuring peak memory"  # eager's and compiled's steady calls, after timing (CUDA)
WAITING = "waiting for another worker"  # to compile while it times, or to time while it compiles
RELEASING = "releasing"

_WORDED = {
    BUILDING: "while building the sample",
    EAGER_CALL: "during the eager call",
    COMPILING: "while compiling",
    COMPILED_CALL: "during the compiled call",
    TIMING: "while timing",
    PEAK_MEMORY: "while measuring peak memory",
    WAITING: "while waiting for another worker",
    RELEASING: "while releasing the sample",
}

_state: dict[str, object] = {"phase": None, "listener": None}


def describe(phase: str | None, before: str = "before it began") -> str:
    """When something happened, as a message says it: ``during the eager call``, ``while compiling``; ``before``
    when no phase was entered yet. Every message built from a phase words it here."""
    if phase is None:
        return before
    return _WORDED.get(phase, f"while {phase}")


def enter(phase: str) -> None:
    """The triple now runs ``phase``."""
    if phase == _state["phase"]:
        return
    _state["phase"] = phase
    listener = _state["listener"]
    if callable(listener):
        listener(phase)


def current() -> str | None:
    """The last phase entered, or None before any."""
    phase = _state["phase"]
    return phase if isinstance(phase, str) else None


@contextmanager
def listening(listener: Callable[[str], None]) -> Iterator[None]:
    """Call ``listener`` with each phase entered while the block runs."""
    before = _state["listener"]
    _state["listener"] = listener
    try:
        yield
    finally:
        _state["listener"] = before
