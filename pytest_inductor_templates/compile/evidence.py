"""Evidence gathered while a model compiles: Inductor's output code, autotuning, compile-cache lookups.

The output code is collected on a fresh compile and on an FX-graph-cache hit alike: both pass through
``GraphLowering.save_output_code`` (what ``torch._inductor.utils.run_and_get_code`` uses).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import cache


@dataclass
class CompileEvidence:
    """What Inductor produced while one model compiled (all its graphs and recompiles)."""

    codes: list[str] = field(default_factory=list)
    autotuned: int = 0  # selections (GEMMs, convolutions) benchmarked by autotuning
    choices: int = 0  # choices autotuning chose among (timed now or read from its cache), where this torch says
    cache_lookups: Counter[str] = field(default_factory=Counter)  # FX graph and AOTAutograd cache lookups (cache.py)

    @property
    def code(self) -> str:
        return "\n".join(self.codes)

    @property
    def cache_hits(self) -> int:
        """Graphs served from the FX graph cache."""
        return self.cache_lookups["fxgraph_cache_hit"]


@contextlib.contextmanager
def gather(evidence: CompileEvidence) -> Iterator[None]:
    """Collect the output code, autotuning and cache lookups of the compile inside (and pass the code on to
    any ``save_output_code`` already installed, such as ``run_and_get_code``'s)."""
    from torch._dynamo.utils import counters
    from torch._inductor.graph import GraphLowering

    previous = getattr(GraphLowering, "save_output_code", None)

    def save_output_code(code: str) -> None:
        evidence.codes.append(code)
        if previous is not None:
            previous(code)

    autotuned = counters["inductor"]["select_algorithm_autotune"]
    GraphLowering.save_output_code = save_output_code  # type: ignore[assignment]
    remove_saver = _count_choices(evidence)
    try:
        with cache.counting(evidence.cache_lookups):
            yield
    finally:
        GraphLowering.save_output_code = previous  # type: ignore[assignment]
        remove_saver()
        evidence.autotuned += counters["inductor"]["select_algorithm_autotune"] - autotuned


def _count_choices(evidence: CompileEvidence) -> Callable[[], None]:
    """Count the choices autotuning chose among, through Inductor's feedback savers where this torch has them
    (they are called with the timings whether just measured or read from the local autotune cache)."""
    try:
        from torch._inductor.select_algorithm import add_feedback_saver, get_algorithm_selector_cache
    except ImportError:
        return lambda: None

    def saver(timings: Any, *rest: Any) -> None:
        evidence.choices += len(timings)

    add_feedback_saver(saver)

    def remove() -> None:
        savers = getattr(get_algorithm_selector_cache(), "feedback_saver_fns", [])
        if saver in savers:
            savers.remove(saver)

    return remove
