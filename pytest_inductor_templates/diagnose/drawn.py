"""Drawn once: a diagnosis's model and inputs drawn once (the item's own draw: the same seeded values) and eager's
half of the check (its outputs, the float64 runs) computed once, then kept in memory and saved in the diagnosis's
folder, so that every check, in this process or in another, starts from copies of the same tensors."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..check.float64 import Float64Run
from ..check.inputs import Inputs
from ..check.runner import EagerSide
from ..compile.outputs import map_tensors
from ..memory import available_memory, storage_bytes
from ..samples.base import model_and_inputs
from .request import ModelBuilder

DRAWN = "drawn.pt"
EAGER = "eager.pt"


@dataclass
class Counts:
    """What one process of a diagnosis did, counted: what it costs."""

    draws: int = 0  # models or input sets built from the item's builder (drawn weights, drawn inputs)
    eager_runs: int = 0  # calls of an eager model (the float64 runs and the operator step's graph runs included)
    compiles: int = 0  # models or graphs compiled with the item's backend or Inductor (each check's, the operator
    # step's, the repro's)
    checks: int = 0  # checks run ("does it still fail?")
    skipped_checks: int = 0  # bisector checks answered without compiling (they cannot change the answer)
    graph_checks: int = 0  # lowering-bisection checks compiled from Inductor's kept graph alone (``inner_graph``)

    def add(self, other: dict[str, int]) -> None:
        for key, value in other.items():
            if hasattr(self, key):
                setattr(self, key, getattr(self, key) + int(value))


def _clone(value: Any) -> Any:
    return value.detach().clone().requires_grad_(value.requires_grad) if value.requires_grad else value.clone()


def clone_inputs(inputs: list[Inputs]) -> list[Inputs]:
    """Copies of ``inputs``: a check that changes its inputs in place leaves the next one's as drawn."""
    return [Inputs(map_tensors(_clone, x.args), map_tensors(_clone, x.kwargs)) for x in inputs]


class Drawn:
    """A ``ModelBuilder`` that hands out copies of one drawn model and its input sets."""

    def __init__(self, model: Any, inputs: list[Inputs]) -> None:
        self.model = model
        self.inputs = inputs

    @classmethod
    def draw(cls, build: ModelBuilder, device: Any, counts: Counts) -> Drawn:
        """The item's model and inputs, drawn once from its builder: with a sample's ``make_model_and_inputs`` (in
        one pass over its draws where it can: a GraphNet sample's), else its ``make_inputs``, then ``make_model``."""
        both = getattr(build, "make_model_and_inputs", None)
        model, inputs = both(device) if both is not None else model_and_inputs(build, device)
        counts.draws += 0 if isinstance(build, SavedDraw) else 2  # the item's own draw, loaded: none
        return cls(model, inputs)

    def make_model(self, device: Any) -> Any:
        return copy.deepcopy(self.model)

    def make_inputs(self, device: Any) -> list[Inputs]:
        return clone_inputs(self.inputs)

    def save(self, directory: Path) -> None:
        """The model and inputs as a file; a model whose class cannot be pickled (a class local to a function,
        as the built-ins' are) as its parameters and buffers by name, put back into a skeleton on loading."""
        import pickle

        import torch

        try:
            torch.save({"model": self.model, "inputs": self.inputs}, directory / DRAWN)
        except (pickle.PicklingError, AttributeError, TypeError):
            state = {**dict(self.model.named_parameters()), **dict(self.model.named_buffers())}
            grads = {name: p.requires_grad for name, p in self.model.named_parameters()}
            torch.save({"state": state, "grads": grads, "inputs": self.inputs}, directory / DRAWN)

    @classmethod
    def load(cls, directory: Path, build: ModelBuilder, device: Any) -> Drawn:
        """What ``save`` wrote, in another process; a GraphNet sample's ``model.py`` module is loaded first (its
        model's class lives there), and a skeleton is built on the meta device (no values drawn), drawing
        nothing."""
        import torch

        build = build.sample if isinstance(build, SavedDraw) else build  # what registers modules, builds skeletons
        if (register := getattr(build, "register_modules", None)) is not None:
            register(device)
        saved = torch.load(directory / DRAWN, weights_only=False, map_location=device)
        if "model" in saved:
            return cls(saved["model"], saved["inputs"])
        meta = torch.device("meta")
        with meta:
            model = build.make_model(meta)
        for name, tensor in saved["state"].items():
            owner, _, leaf = name.rpartition(".")
            module = model.get_submodule(owner)
            if name in saved["grads"]:
                module._parameters[leaf] = torch.nn.Parameter(tensor, requires_grad=saved["grads"][name])
            else:
                module._buffers[leaf] = tensor
        return cls(model, saved["inputs"])


@dataclass
class SavedDraw:
    """The failing item's own model, as built, and inputs, saved by the item's process (``Drawn.save``) for its
    diagnosis, which loads them and draws nothing; ``sample`` registers the modules their classes live in and
    builds the skeleton of a model whose class cannot be pickled."""

    sample: ModelBuilder
    folder: Path
    seconds: float = 0.0  # what saving them took in the item's process

    def make_model_and_inputs(self, device: Any) -> tuple[Any, list[Inputs]]:
        """The saved model and inputs, loaded; the folder then goes (the diagnosis copies what it loaded)."""
        drawn = Drawn.load(self.folder, self.sample, device)
        shutil.rmtree(self.folder, ignore_errors=True)
        return drawn.model, drawn.inputs

    def make_model(self, device: Any) -> Any:
        return self.make_model_and_inputs(device)[0]

    def make_inputs(self, device: Any) -> list[Inputs]:
        return self.make_model_and_inputs(device)[1]


SHARED_MEMORY = Path("/dev/shm")
DRAW_PREFIX = "inductor-draw-"  # then the saving process's pid


def _in_memory(model: Any, inputs: list[Inputs]) -> str | None:
    """A folder in memory (``/dev/shm``) where it and the host's available memory have room for the model's and
    inputs' tensors twice over, else None (the default temporary folder): on disk, opus-mt's 908 MiB took 5.3 s
    to save against 0.6 s in memory."""
    import torch

    if not SHARED_MEMORY.is_dir():
        return None
    tensors = [*model.parameters(), *model.buffers()] if isinstance(model, torch.nn.Module) else []
    for x in inputs:
        map_tensors(lambda t: tensors.append(t) or t, (x.args, x.kwargs))
    size = storage_bytes([t for t in tensors if isinstance(t, torch.Tensor)])
    memory = available_memory()  # /dev/shm's free space does not see a container's memory limit
    roomy = shutil.disk_usage(SHARED_MEMORY).free > 2 * size and (memory is None or memory > 2 * size)
    return str(SHARED_MEMORY) if roomy else None


@contextlib.contextmanager
def item_draw(sample: ModelBuilder, model: Any, inputs: list[Inputs]) -> Iterator[ModelBuilder]:
    """What a diagnosis builds from: the item's ``model`` as built (in host memory) and its ``inputs`` saved to a
    folder of their own (a ``SavedDraw``; the diagnosis removes it once loaded, the block's end in any case, and
    a later block the folders of a process that was killed), where both are at hand and can be saved; else
    ``sample``, drawn again."""
    if model is None or not inputs:
        yield sample
        return
    folder = None
    saved: ModelBuilder = sample
    try:
        start = time.perf_counter()
        where = _in_memory(model, inputs)
        _remove_orphans(Path(where or tempfile.gettempdir()))
        folder = Path(tempfile.mkdtemp(prefix=f"{DRAW_PREFIX}{os.getpid()}-", dir=where))
        Drawn(model, inputs).save(folder)
        saved = SavedDraw(sample, folder, round(time.perf_counter() - start, 2))
    except Exception:  # a model that cannot be saved even as its tensors, or no room: drawn again
        saved = sample
    try:
        yield saved
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _remove_orphans(parent: Path) -> None:
    """The saved draws in ``parent`` of processes that are gone (killed before their block ended)."""
    for folder in parent.glob(f"{DRAW_PREFIX}*-*"):
        pid = folder.name[len(DRAW_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def settled(run: Float64Run | None) -> Float64Run | None:
    """``run`` computed now (its outputs or its reason), as a run already done."""
    if run is None:
        return None
    outputs = run.outputs()
    done = Float64Run.of(outputs, run.reason)
    done.ops, done.dtypes = set(run.ops), set(run.dtypes)
    return done


def _run_state(run: Float64Run | None) -> tuple[Any, ...] | None:
    return None if run is None else (run.outputs(), run.reason, sorted(run.ops), list(run.dtypes))


def _run_of(state: tuple[Any, ...] | None) -> Float64Run | None:
    if state is None:
        return None
    done = Float64Run.of(state[0], state[1])
    done.ops, done.dtypes = set(state[2]), set(state[3])
    return done


def save_eager(side: EagerSide, directory: Path) -> None:
    """Eager's half of the check, its float64 runs done, for the diagnosis's other processes."""
    import torch

    fields = {f.name: getattr(side, f.name) for f in dataclasses.fields(side)}
    fields["float64"], fields["tf32"] = _run_state(side.float64), _run_state(side.tf32)
    torch.save(fields, directory / f"{EAGER}.part")
    os.replace(directory / f"{EAGER}.part", directory / EAGER)  # whole once it is there: helpers wait for it


def wait_for_eager(directory: Path, poll: float = 0.1) -> None:
    """Until the diagnosis's process has saved the draw and eager's half (a helper starts before that)."""
    while not (directory / EAGER).exists():
        time.sleep(poll)


def load_eager(directory: Path, device: Any) -> EagerSide:
    import torch

    fields = torch.load(directory / EAGER, weights_only=False, map_location=device)
    fields["float64"], fields["tf32"] = _run_of(fields["float64"]), _run_of(fields["tf32"])
    return EagerSide(**fields)


def for_one_check(side: EagerSide) -> EagerSide:
    """``side`` with fresh copies of its inputs and of the state the model under test starts from."""
    state = dataclasses.replace(side.state, before={k: v.clone() for k, v in side.state.before.items()})
    return dataclasses.replace(side, inputs=clone_inputs(side.inputs), state=state)
