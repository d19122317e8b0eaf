"""Per-test isolation of compile state, and the log records Inductor and Dynamo leave."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import cache
from .phase_times import reset_dynamo

CUDAGRAPH_LOGGER = "torch._inductor.cudagraph_utils.__cudagraphs"
TRACE_LOGGER = "torch.__trace"  # structured trace records, written only with TORCH_TRACE set
CONVERT_FRAME_LOGGER = "torch._dynamo.convert_frame"
_LIMIT_HIT = re.compile(r"hit config\.(\w+) \((\d+)\)")


class CompileWatcher(logging.Handler):
    """Collects CUDA-graph skip reasons and recompile-limit hits while attached."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.cudagraph_skips: list[str] = []
        self.recompile_limit_hits: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.name == CUDAGRAPH_LOGGER:
            self.cudagraph_skips.append(message.strip())
        elif _LIMIT_HIT.search(message):
            self.recompile_limit_hits.append(_summarize_limit_hit(message))

    @contextmanager
    def attached(self) -> Iterator[CompileWatcher]:
        loggers = [logging.getLogger(CUDAGRAPH_LOGGER), logging.getLogger(CONVERT_FRAME_LOGGER)]
        for logger in loggers:
            logger.addHandler(self)
        try:
            yield self
        finally:
            for logger in loggers:
                logger.removeHandler(self)


class _DropRecords(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


def _summarize_limit_hit(message: str) -> str:
    lines = [line.strip() for line in message.splitlines()]
    match = _LIMIT_HIT.search(message)
    assert match is not None
    function = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("function:")), "?")
    reason = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("last reason:")), "?")
    return (
        f"Dynamo hit torch._dynamo.config.{match[1]} ({match[2]}) for {function} and now runs it "
        f"eagerly, uncompiled; last recompile reason: {reason}"
    )


def _restore(config: Any, before: dict[str, Any]) -> None:
    for key, value in config.get_config_copy().items():
        if key in before and value is not before[key] and value != before[key]:
            setattr(config, key, before[key])


@contextmanager
def isolated_compile_state(fresh_cache: bool = False) -> Iterator[CompileWatcher]:
    """Reset Dynamo before and after; restore the Inductor and Dynamo configs after; with ``fresh_cache``, compile
    inside with empty compile caches of the block's own (``cache.fresh``)."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    inductor_before = inductor_config.get_config_copy()
    dynamo_before = dynamo_config.get_config_copy()
    # pytest >= 9 also captures non-propagating loggers, so every failing test would show hundreds of
    # empty torch.__trace DEBUG records; drop them while compiling, unless the user asked for a trace.
    trace_log = logging.getLogger(TRACE_LOGGER)
    quiet = _DropRecords() if not (os.environ.get("TORCH_TRACE") or os.environ.get("TORCH_COMPILE_DEBUG")) else None
    reset_dynamo()
    watcher = CompileWatcher()
    try:
        if quiet:
            trace_log.addFilter(quiet)
        with watcher.attached(), cache.fresh(fresh_cache):
            yield watcher
    finally:
        if quiet:
            trace_log.removeFilter(quiet)
        reset_dynamo()
        _restore(inductor_config, inductor_before)
        _restore(dynamo_config, dynamo_before)
