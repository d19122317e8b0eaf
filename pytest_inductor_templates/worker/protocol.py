"""What the pytest process and its sample worker say to each other: length-prefixed pickles over pipes.

The pytest process sends a request and reads messages until the reply: the worker reports each phase it
enters first, so that a timeout or a crash can name where it happened. Both sides are this package, so
pickle is safe here. Neither torch nor pytest is imported.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO

_LENGTH = struct.Struct("!Q")


def write_message(stream: BinaryIO, message: object) -> None:
    """Send one message and flush it."""
    payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(payload)) + payload)
    stream.flush()


def read_message(stream: BinaryIO) -> object:
    """The next message (blocking); EOFError when the other side has gone."""
    header = stream.read(_LENGTH.size)
    if len(header) < _LENGTH.size:
        raise EOFError("the other side closed the pipe")
    (length,) = _LENGTH.unpack(header)
    payload = stream.read(length)
    if len(payload) < length:
        raise EOFError("the other side closed the pipe mid-message")
    return pickle.loads(payload)


class MessageReader:
    """Reads messages from a pipe without blocking past a deadline."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()

    def _message(self) -> tuple[bool, object]:
        if len(self._buffer) < _LENGTH.size:
            return False, None
        (length,) = _LENGTH.unpack_from(self._buffer)
        end = _LENGTH.size + length
        if len(self._buffer) < end:
            return False, None
        payload = bytes(self._buffer[_LENGTH.size : end])
        del self._buffer[:end]
        return True, pickle.loads(payload)

    def next(self, deadline: float | None) -> tuple[bool, object]:
        """(True, message), or (False, None) when ``deadline`` (a ``time.monotonic()`` value) passed first.
        EOFError when the pipe closed (the worker died)."""
        while True:
            ready, message = self._message()
            if ready:
                return True, message
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            readable, _, _ = select.select([self.fd], [], [], wait)
            if not readable:
                return False, None
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EOFError("the worker closed its pipe")
            self._buffer += chunk


class RemoteError(Exception):
    """An exception raised in the worker, carried back as its formatted traceback."""


# requests (pytest process -> worker)


@dataclass
class Hello:
    """The first message: how to set the worker up like the pytest process."""

    sys_path: list[str]
    conftests: list[tuple[str, str]]  # (module name, file) of each conftest.py the session loaded, in order
    tolerance: Any = None
    policy: Any = None  # engine.cell.CheckPolicy
    memory_budget: int | None = None
    threads: int | None = None  # torch's intra-op threads (--inductor-timing-threads)
    host_lock: Any = None  # timing.host_lock.Sharing: how it shares the host with the session's others, if it does
    diagnose: bool = False  # whether it keeps a diagnosis process ready (``diagnose.standby``)


@dataclass
class Run:
    """Build the triple (unless it is the current one), check it (unless checked), time it under ``plan``; a
    ``repeat`` of another process's timing only compiles the triple before timing it (that process checked it)."""

    case: Any  # engine.triples.SampleCase
    plan: Any = None  # timing.measure.TimingPlan, or None: check only
    repeat: bool = False


@dataclass
class Diagnose:
    """Diagnose the triple's failed check (``engine.diagnosis.DiagnosisPlan``): the current triple's, or one
    released since, whose check gave ``verdict`` (``engine.cell.Verdict``)."""

    case: Any
    plan: Any
    verdict: Any = None


@dataclass
class Release:
    """Release the current triple."""


@dataclass
class Stop:
    """Exit."""


# replies (worker -> pytest process)


@dataclass
class Ready:
    pid: int
    warnings: list[str] = field(default_factory=list)  # conftest files that could not be imported


@dataclass
class Phase:
    name: str


@dataclass
class Ran:
    cell: Any  # engine.cell.CellResult, its exceptions replaced by RemoteErrors


@dataclass
class Diagnosed:
    diagnosis: Any  # diagnose.Diagnosis


@dataclass
class Released:
    retained: int = 0  # bytes of the released model's tensors still alive (``TripleCache.release``)


@dataclass
class Faulted:
    """A CUDA fault: the worker's CUDA context is unusable; it exits after sending this."""

    reason: str


@dataclass
class Raised:
    """The request raised (the model under timing, or a bug of the worker): raised again in the pytest process."""

    error: RemoteError | None
