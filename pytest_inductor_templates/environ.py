"""One environment variable set for a block and restored after, the rest of the environment left as the block
made it (``mock.patch.dict`` would undo every change the block made: an import that sets a variable, say)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def variable_set(name: str, value: str) -> Iterator[None]:
    """``name`` set to ``value`` in ``os.environ`` for the block, then restored (unset if it was)."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
