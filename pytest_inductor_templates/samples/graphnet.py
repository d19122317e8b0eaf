"""GraphNet-format samples: discovered cheaply at collection, loaded only when an item runs.

A sample root holds one directory per sample, anywhere below it, each with ``model.py``
(``class GraphModule``) and ``weight_meta.py`` / ``input_meta.py`` tensor metadata. Sample
roots are trusted code: ``model.py`` is imported.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import inspect
import json
import os
import sys
import types
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ..check.inputs import rolled
from ..compile.effects import WEIGHTS_AS_INPUTS
from ..option_table import SAMPLE_WEIGHTS
from .base import Inputs, Sample, SampleError, stable_seed
from .graphnet_meta import TensorMeta, parse_file, read_meta_file, rebuild, shown, skip_draws, tensor_bytes, torch_dtype
from .graphnet_source import point_devices_at, read_weights_from_self

META_FILES = ("weight_meta.py", "input_meta.py")


def discover(root: Path) -> list[str]:
    """Relative paths (POSIX, sorted) of every directory under ``root`` that holds a ``model.py``.

    A symbolic link to a directory is followed unless it leads into, or around, a tree already walked (the
    root, or another link's target): no loop, and no sample found twice."""
    found = []
    walked = [os.path.realpath(root)]
    for directory, subdirs, files in os.walk(root, followlinks=True):
        kept = []
        for name in sorted(subdirs):
            path = os.path.join(directory, name)
            if os.path.islink(path):  # one lstat; realpath only for links
                target = os.path.realpath(path)
                if any(_nested(target, tree) or _nested(tree, target) for tree in walked):
                    continue
                walked.append(target)
            kept.append(name)
        subdirs[:] = kept
        if "model.py" in files:
            found.append(Path(directory).relative_to(root).as_posix())
    return sorted(found)


def _nested(inner: str, outer: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


def module_name(path: Path, device: str, bound: bool = False) -> str:
    """The name a sample's loaded ``model.py`` goes by in ``sys.modules``: one per file, device (the device strings
    in it are rewritten per device) and binding (whether forward reads its weights from ``self``), the same in every
    process."""
    digest = hashlib.sha1(f"{Path(path).resolve()}\0{device}\0{bound}".encode()).hexdigest()[:16]
    return f"inductor_sample_{digest}"


# module name -> (model.py's mtime and size, the module, the weights it reads as the module's Python numbers)
_LOADED: dict[str, tuple[tuple[int, int], types.ModuleType, frozenset[str]]] = {}


def load_graph_module(path: Path, device: str, weights: frozenset[str] = frozenset()) -> type:
    """``GraphModule`` from ``path``, with device strings pointed at ``device``; with ``weights``, its forward reads
    those from ``self`` instead of taking them (``graphnet_source.read_weights_from_self``).

    The module is registered in ``sys.modules`` under ``module_name``, as an imported module is: Dynamo looks a
    function's module up by name when it inlines it. A file loaded before is loaded again only when it changed, so
    the models built from it share one module."""
    import torch

    name = module_name(path, device, bool(weights))
    try:
        info = os.stat(path)
    except OSError as error:
        raise SampleError(f"cannot read model.py: {error.strerror}") from None
    stamp = (info.st_mtime_ns, info.st_size)
    loaded = _LOADED.get(name)
    if loaded is not None and loaded[0] == stamp and sys.modules.get(name) is loaded[1]:
        module = loaded[1]
    else:
        tree, scalars = point_devices_at(parse_file(path), device), frozenset[str]()
        if weights:
            tree, scalars = read_weights_from_self(tree, weights)
        module = types.ModuleType(name)
        module.__dict__.update(
            {"__file__": str(path), "torch": torch, "device": torch.device, "inf": float("inf"), "nan": float("nan")}
        )
        try:
            exec(compile(ast.fix_missing_locations(tree), str(path), "exec"), module.__dict__)
        except Exception as error:
            raise SampleError(
                f"{where(error, path)}model.py failed to import: {type(error).__name__}: {error}"
            ) from None
        sys.modules[name] = module
        _LOADED[name] = (stamp, module, scalars)
    module_class = getattr(module, "GraphModule", None)
    if not isinstance(module_class, type):
        raise SampleError("model.py defines no class GraphModule")
    return module_class


def is_parameter(meta: TensorMeta) -> bool:
    """Whether a weight is bound as a ``torch.nn.Parameter``: Dynamo names a module's parameters
    ``..._parameters_...``; a parameter is floating (or complex). Every other weight (``_buffers_``, and plain tensor
    attributes) is a buffer; a lifted scalar, which the graph reads only with ``.item()`` (a batch norm's 0-dim
    float64 momentum), is neither: a Python number (``graphnet_scalars``)."""
    return "_parameters_" in meta.name and ("float" in meta.dtype or "complex" in meta.dtype)


def where(error: BaseException, path: Path) -> str:
    """``PATH:LINE: ``, the innermost line of ``path`` that ``error`` passed through (as compilers name a place,
    so that an editor can go there), or nothing when it did not pass through ``path``."""
    line = None
    frame = error.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code.co_filename == str(path):
            line = frame.tb_lineno
        frame = frame.tb_next
    return f"{shown(path)}:{line}: " if line is not None else ""


@dataclass(frozen=True, eq=False)
class GraphNetSample(Sample):
    """One sample directory of a GraphNet-format root; ``weights`` says how its weights reach the graph:
    ``parameters`` (the module's own parameters and buffers, as a deployed model holds them) or ``inputs``
    (forward arguments, as GraphNet captured and runs them). The id does not say it: runs of both modes match by id,
    and their records say which ran (``weights_mode``)."""

    root: Path
    relative: str
    weights: str = "parameters"

    def __post_init__(self) -> None:
        if self.weights not in SAMPLE_WEIGHTS:
            raise ValueError(f"weights must be one of {', '.join(SAMPLE_WEIGHTS)}, got {self.weights!r}")

    @property
    def id(self) -> str:  # type: ignore[override]
        return f"{self.root.name}/{self.relative}" if self.relative != "." else self.root.name

    @property
    def directory(self) -> Path:
        return self.root / self.relative

    @cached_property
    def metas(self) -> list[TensorMeta]:
        if not (self.directory / "weight_meta.py").is_file():
            raise SampleError("missing weight_meta.py")
        metas = []
        for name in META_FILES:
            if (self.directory / name).is_file():
                metas += read_meta_file(self.directory / name)
        for meta in metas:
            torch_dtype(meta)
        return metas

    @property
    def dtype(self) -> str:
        floating = Counter(m.dtype.removeprefix("torch.") for m in self.metas if "float" in m.dtype)
        return floating.most_common(1)[0][0] if floating else "none"

    def tensor_bytes(self, float_dtype: str | None = None) -> int | None:
        return tensor_bytes(self.metas, float_dtype)

    @property
    def graph_size(self) -> int | None:
        try:
            return (self.directory / "model.py").stat().st_size
        except OSError:
            return None

    def _devices_required(self) -> int:
        """``num_devices_required`` of ``graph_net.json`` (1 without the file); a broken file is a SampleError."""
        path = self.directory / "graph_net.json"
        if not path.is_file():
            return 1
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, RecursionError) as error:
            raise SampleError(f"cannot read graph_net.json: {getattr(error, 'strerror', None) or error}") from None
        except json.JSONDecodeError as error:
            raise SampleError(f"graph_net.json is not valid JSON: {error}") from None
        count = info.get("num_devices_required", 1) if isinstance(info, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise SampleError(f"graph_net.json: num_devices_required must be an integer >= 1, got {count!r}")
        return count

    @property
    def weights_mode(self) -> str:
        return self.weights

    def _graph(self, device: Any) -> Any:
        """A fresh ``GraphModule`` on ``device``, its forward's parameters checked against the metadata; with
        ``parameters``, its forward reads the weights from the module, which does not hold them yet."""
        if self._devices_required() > 1:
            raise SampleError(f"needs {self._devices_required()} devices (graph_net.json)")
        path = self.directory / "model.py"
        forward = getattr(load_graph_module(path, str(device)), "forward", None)
        if forward is None:
            raise SampleError("GraphModule has no forward")
        params = [p for p in inspect.signature(forward).parameters if p != "self"]
        names = [m.name for m in self.metas]
        missing = [p for p in params if p not in names]
        extra = [n for n in names if n not in params]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"forward takes {', '.join(missing[:3])} with no tensor metadata")
            if extra:
                parts.append(f"metadata names {', '.join(extra[:3])}, which forward does not take")
            raise SampleError("metadata does not match forward: " + "; ".join(parts))
        bound = frozenset() if self.weights == "inputs" else frozenset(filter(is_weight, names))
        module_class = load_graph_module(path, str(device), bound)
        try:
            graph = module_class()
        except Exception as error:  # named where model.py raised, in one line
            raise SampleError(f"{where(error, path)}GraphModule() raised {type(error).__name__}: {error}") from error
        if self.weights == "inputs":
            setattr(graph, WEIGHTS_AS_INPUTS, sum(is_weight(name) for name in names))
        return graph.eval()

    def register_modules(self, device: Any) -> None:
        """Load ``model.py``'s modules for ``device`` into ``sys.modules``, drawing nothing: a model saved with
        ``torch.save`` unpickles in another process once its class can be found there."""
        self._graph(device)

    def make_model(self, device: Any) -> Any:
        """The graph; with ``parameters``, holding its weights (drawn as ``make_inputs`` draws them with ``inputs``:
        the same values in both modes) on ``device`` as its own parameters and buffers, under their Dynamo names."""
        if self.weights == "inputs":
            return self._graph(device)
        return self._bind(self._unbound(device), self._first_set(lambda meta: is_weight(meta.name)), device)

    def make_model_and_inputs(self, device: Any) -> tuple[Any, list[Inputs]]:
        """``make_model`` and ``make_inputs`` from one pass over the seeded draws (each alone passes over every
        tensor's draws, keeping its own: on a large transformer, seconds each)."""
        import torch

        graph = self._graph(device) if self.weights == "inputs" else self._unbound(device)
        generator = torch.Generator().manual_seed(stable_seed(self.id))
        drawn = self._first_set(lambda meta: True, generator)
        if self.weights == "inputs":
            return graph, self._input_sets(drawn, generator, device)
        first = {name: t for name, t in drawn.items() if not is_weight(name)}
        return self._bind(graph, drawn, device), self._input_sets(first, generator, device)

    def _unbound(self, device: Any) -> Any:
        """The graph that reads its weights from the module, which does not hold them yet."""
        graph = self._graph(device)
        taken = [name for name in self._weight_names if hasattr(graph, name)]
        if taken:
            raise SampleError(
                f"cannot bind weight {taken[0]} to the module: GraphModule has an attribute of that name "
                "(--inductor-sample-weights=inputs passes the weights as forward inputs)"
            )
        return graph

    def _bind(self, graph: Any, drawn: dict[str, Any], device: Any) -> Any:
        """``graph`` holding the weights of ``drawn`` (taken out of it) on ``device`` as its own parameters and
        buffers, and its lifted scalars (``graphnet_scalars``) as its Python numbers."""
        import torch

        scalars = _LOADED[type(graph).__module__][2]
        for meta in self.metas:
            if not is_weight(meta.name) or meta.name not in drawn:
                continue
            tensor = drawn.pop(meta.name).to(device)
            if meta.name in scalars:  # a lifted scalar: the module's Python number (graphnet_scalars)
                setattr(graph, meta.name, tensor.item())
            elif is_parameter(meta):
                graph.register_parameter(meta.name, torch.nn.Parameter(tensor, requires_grad=False))
            else:
                graph.register_buffer(meta.name, tensor)
        return graph

    @property
    def _weight_names(self) -> list[str]:
        return [m.name for m in self.metas if is_weight(m.name)]

    def _first_set(self, wanted: Any, generator: Any = None) -> dict[str, Any]:
        """The first input set's tensors that ``wanted(meta)`` picks, drawn from the sample's seeded generator;
        the others' draws are made and dropped, so that every tensor gets the same values whichever are kept."""
        import torch

        generator = generator if generator is not None else torch.Generator().manual_seed(stable_seed(self.id))
        kept = {}
        for meta in self.metas:
            if wanted(meta):
                kept[meta.name] = rebuild(meta, generator)
            else:
                skip_draws(meta, generator)
        return kept

    @cached_property
    def symint_parameters(self) -> frozenset[str]:
        """The forward parameters annotated ``torch.SymInt``: sizes the graph was captured with, which GraphNet's
        metadata can only describe as 0-dim integer tensors."""
        tree = parse_file(self.directory / "model.py")
        names = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "forward":
                for arg in node.args.args:
                    annotation = arg.annotation
                    if isinstance(annotation, ast.Attribute) and annotation.attr == "SymInt":
                        names.add(arg.arg)
        return frozenset(names)

    def make_inputs(self, device: Any) -> list[Inputs]:
        """Two input sets from one seeded generator. The second keeps the weights and redraws every input
        by the same rule (integers within min_val/max_val, bools from a coin), so that a compiled model that
        returns its first output again is caught; an input given as literal data is rolled by one place, and a
        constant floating one (std 0) varies around its value. A ``torch.SymInt`` parameter gets a Python int,
        as when the graph was captured (a 0-dim tensor in its place makes Dynamo trace a tensor where the
        graph has a size), the same in both sets. With ``parameters`` the weights are the model's, not in the sets
        (their draws are made and dropped: every input gets the values it gets with ``inputs``)."""
        import torch

        generator = torch.Generator().manual_seed(stable_seed(self.id))
        passed = (lambda meta: True) if self.weights == "inputs" else (lambda meta: not is_weight(meta.name))
        return self._input_sets(self._first_set(passed, generator), generator, device)

    def _input_sets(self, first: dict[str, Any], generator: Any, device: Any) -> list[Inputs]:
        """``make_inputs``'s two sets from the first set's tensors, ``generator`` where the first set's draws
        left it."""
        import torch

        second = {}
        for meta in self.metas:
            if meta.name not in first:
                continue
            if is_weight(meta.name):
                second[meta.name] = first[meta.name]
            elif meta.data is not None:
                second[meta.name] = rolled(first[meta.name])
            else:
                second[meta.name] = rebuild(_varying(meta), generator)
        for name in self.symint_parameters & first.keys():
            if first[name].dim() == 0 and not first[name].is_floating_point():
                first[name] = second[name] = int(first[name])
        moved: dict[int, Any] = {}  # a weight shared by both sets is moved to the device once
        for t in [*first.values(), *second.values()]:
            if id(t) not in moved:
                moved[id(t)] = t.to(device) if isinstance(t, torch.Tensor) else t
        return [Inputs(kwargs={name: moved[id(t)] for name, t in tensors.items()}) for tensors in (first, second)]


def _varying(meta: TensorMeta) -> TensorMeta:
    """``meta``, a constant floating tensor (std 0) given the spread of its own magnitude (at least 1)."""
    if meta.std != 0 or "float" not in meta.dtype:
        return meta
    return dataclasses.replace(meta, std=max(abs(float(meta.mean or 0.0)), 1.0))


def is_weight(name: str) -> bool:
    """Whether a GraphNet tensor is the captured module's state (Dynamo names it ``L_self_..._parameters_...``
    or ``..._buffers_...``) rather than an input of the call."""
    return name.startswith(("L_self_", "self_")) or "_parameters_" in name or "_buffers_" in name
