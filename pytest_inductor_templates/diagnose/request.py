"""What a diagnosis is asked (picklable: it goes to a child process) and what it answers (plain data)."""

from __future__ import annotations

import pickle
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..check.inputs import Inputs
from ..check.tolerances import Tolerance
from ..machine import Device
from ..templates.selection import Selection
from ..timing.host_lock import Sharing
from ..timing.threads import usable_cpus

DIAGNOSED = ("accuracy_fail", "compile_fail", "runtime_fail")


class ModelBuilder(Protocol):
    """Builds the item's subject afresh: a ``Sample`` has this shape, and so has ``PickledModel``."""

    def make_model(self, device: Any) -> Any: ...

    def make_inputs(self, device: Any) -> list[Inputs]: ...


@dataclass
class PickledModel:
    """A user's model (``inductor_check``) and its call's inputs, as pickled copies of the pristine objects."""

    model: bytes
    inputs: bytes

    @classmethod
    def of(cls, model: Any, inputs: list[Inputs]) -> PickledModel:
        """Copies of ``model`` (before it was compiled or called) and ``inputs``; pickle errors propagate."""
        return cls(pickle.dumps(model), pickle.dumps(inputs))

    def make_model(self, device: Any) -> Any:
        model = pickle.loads(self.model)
        return model.to(device) if hasattr(model, "to") else model

    def make_inputs(self, device: Any) -> list[Inputs]:
        from ..compile.outputs import map_tensors

        inputs: list[Inputs] = pickle.loads(self.inputs)
        return [
            Inputs(map_tensors(lambda t: t.to(device), x.args), map_tensors(lambda t: t.to(device), x.kwargs))
            for x in inputs
        ]


@dataclass
class DiagnosisRequest:
    """One failing item to diagnose."""

    build: ModelBuilder
    selection: Selection
    device: Device
    outcome: str  # the item's outcome: accuracy_fail, compile_fail or runtime_fail
    repro_dir: Path  # repro.py (with inputs.pt and weights.pt) is written here
    tolerance: Tolerance | None = None  # the item's tolerance (None: the per-dtype default)
    budget_seconds: float = 300.0
    no_grad: bool = True  # the item's calls run under torch.no_grad() (samples do; inductor_check calls do not)
    sys_path: list[str] = field(default_factory=lambda: list(sys.path))  # for the child, to unpickle user classes
    name: str = "item"  # the item, for messages
    # judged as the item was judged
    second_opinion: bool = (
        True  # the float64 second opinion of an output beyond its tolerance (--inductor-second-opinion)
    )
    tf32: str | None = None  # the TF32 mode the item ran in (--inductor-tf32), None: torch's flags as they are
    conftests: list[tuple[str, str]] = field(default_factory=list)  # (module, file) of the item process's conftest.py
    # files, imported by the diagnosis's processes (backends and templates they register)
    reason: str | None = None  # the item's own failure (its reason): the reproduce step, without compiling again
    # (None: the diagnosis checks once itself, with a fresh cache)
    item_float64_rmse: dict[str, tuple[float, float]] = field(default_factory=dict)  # with ``reason``: the item's
    # failing outputs' compiled and eager RMSE against float64 (``CheckResult.float64_rmse``), which the kind step
    # reads instead of compiling the model again
    item_cache: str | None = None  # the item's compile-cache state (cold, warm, mixed): code from the cache is
    # compiled again for the reproduce step, which says so when that passes
    host_lock: Sharing | None = None  # the session's work/timing lock, taken per check by the diagnosis's processes
    processes: int = 2  # at most this many processes run independent bisector checks at once (and no more than CPUs)
    threads: int | None = None  # the item's intra-op CPU threads (None: torch's default)

    def repro_tolerance(self) -> tuple[float, float] | None:
        """The item's tolerance as the repro's rule takes it: (rtol, atol) where it was explicit and not scaled,
        else None (the per-dtype default)."""
        tolerance = self.tolerance
        return (tolerance.rtol, tolerance.atol) if tolerance is not None and not tolerance.scaled else None

    def process_threads(self) -> int | None:
        """Intra-op CPU threads of each of the diagnosis's processes: on the CPU the item's (Inductor bakes the count
        into the C++ kernels it generates); on a GPU one, since the host there mostly compares outputs, and with the
        other processes compiling beside it a comparison spread over every CPU waited for them (on an H100, one
        check's comparison took 8 s with three other processes compiling, 0.03 s alone). A graph on a GPU that also
        computes on CPU tensors runs those kernels on one thread here: their sums may differ from the item's in the
        last bits. None: torch's default."""
        return self.threads if self.device.type == "cpu" else 1

    def process_count(self) -> int:
        """The diagnosis's processes: ``processes``, and no more than the usable CPUs."""
        return max(1, min(self.processes, usable_cpus()))


@dataclass
class Diagnosis:
    """Where and why one item fails. Every field is plain data; None where that part found nothing."""

    summary: str  # one line, e.g. "inductor / lowerings: sigmoid; setting: none needed; first diverging op: ..."
    stage: str | None = None  # "inductor / lowerings: sigmoid", "aot_eager_decomp_partition / decomposition: ..."
    setting: str | None = None  # "max_autotune=True", "none needed", "fails under default too", "no settings"
    op: str | None = None  # "aten.sigmoid (model.py:12)", "not localised"
    kind: str | None = None  # "numerics" or "miscompile"
    figures: str | None = None  # how far compiled and eager are from float64, where
    repro: str | None = None  # the path of repro.py
    no_repro: str | None = None  # why there is no repro
    partial: str | None = None  # what the budget cut short, e.g. "stage only"
    failed: str | None = None  # "diagnosis failed: ..." when the diagnosis itself crashed, hung or raised
    notes: list[str] = field(default_factory=list)  # e.g. "does not fail with a fresh cache"
    steps: list[dict[str, Any]] = field(default_factory=list)  # the child's step log, record by record
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)  # draws, eager_runs, compiles, checks, skipped_checks,
    # graph_checks
