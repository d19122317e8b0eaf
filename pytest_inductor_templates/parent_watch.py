"""A child process that ends when the process that started it ends: a sample worker, a diagnosis child."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

PARENT_ENV = "PYTEST_INDUCTOR_PARENT"  # the starting process's pid, set in the child's environment


def started_by() -> int:
    """The process that started this one: ``PARENT_ENV`` where the starter set it (a starter killed while this
    process still imported torch would be one ``getppid`` never saw), else the parent now."""
    return int(os.environ.get(PARENT_ENV) or os.getppid())


def end_with_parent(parent: int, end: Callable[[], None], poll: float = 1.0) -> None:
    """Call ``end`` (which should not return) from a daemon thread once this process's parent is no longer
    ``parent``: the parent was killed outright, and this process was handed to another (init, a subreaper). A
    ``parent`` already gone ends it at the first look."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        end()

    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def end_group() -> None:
    """Kill this process's group where this process leads it (a session of its own: its helpers and their pools
    with it), else this process alone."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(1)
