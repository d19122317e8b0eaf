"""GraphNet tensor metadata: read with ``ast`` (never executed) and rebuilt into seeded tensors."""

from __future__ import annotations

import ast
import copy
import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .base import SampleError

FIELDS = ("name", "shape", "dtype", "device", "mean", "std", "data", "min_val", "max_val")


@dataclass(frozen=True)
class TensorMeta:
    """One tensor's metadata class."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    mean: float | None = None
    std: float | None = None
    data: tuple[Any, ...] | None = None
    min_val: float | None = None
    max_val: float | None = None


def shown(path: Path) -> str:
    """``path`` as a message names it: relative to the current directory when it lies below it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def parse_file(path: Path) -> ast.Module:
    """The syntax tree of a sample file; a SampleError names a file that cannot be read or parsed."""
    try:
        return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except SyntaxError as error:
        raise SampleError(f"{shown(path)}:{error.lineno}: syntax error: {error.msg}") from None
    except OSError as error:
        raise SampleError(f"cannot read {path.name}: {error.strerror}") from None


class _FloatCalls(ast.NodeTransformer):
    """``float("nan")``, ``float("inf")``, ``float("-inf")``, ``float(1)``: the constants GraphNet writes."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "float"
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, (str, int, float))
            and not isinstance(node.args[0].value, bool)
        ):
            return ast.copy_location(ast.Constant(float(node.args[0].value)), node)  # ValueError: not a float
        return self.generic_visit(node)


def literal(node: ast.expr) -> Any:
    """A metadata value: a Python literal, with ``float("nan")``-style constants; nothing is executed."""
    return ast.literal_eval(_FloatCalls().visit(copy.deepcopy(node)))


def _is_dimension(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_meta_file(path: Path) -> list[TensorMeta]:
    """Every metadata class in ``path``, read as literals; a SampleError names what is wrong."""
    tree = parse_file(path)
    metas = []
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        values: dict[str, Any] = {}
        for statement in node.body:
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target = statement.targets[0]
                if isinstance(target, ast.Name) and target.id in FIELDS:
                    try:
                        values[target.id] = literal(statement.value)
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        raise SampleError(
                            f"{path.name}: {node.name}.{target.id} at line {statement.lineno} is not a literal"
                        ) from None
        missing = [f for f in ("name", "shape", "dtype") if f not in values]
        if missing:
            raise SampleError(f"{path.name}: class {node.name} lacks {', '.join(missing)}")
        data = values.get("data")
        shape = values["shape"]
        if not isinstance(shape, (list, tuple)):
            raise SampleError(f"{path.name}: {node.name}.shape must be a list of integers >= 0, got {shape!r}")
        for dimension in shape:
            if not _is_dimension(dimension):
                raise SampleError(
                    f"{path.name}: {node.name}.shape must be a list of integers >= 0, got {dimension!r} in {shape!r}"
                )
        metas.append(
            TensorMeta(
                name=str(values["name"]),
                shape=tuple(shape),
                dtype=str(values["dtype"]),
                mean=values.get("mean"),
                std=values.get("std"),
                data=tuple(data) if data is not None else None,
                min_val=values.get("min_val"),
                max_val=values.get("max_val"),
            )
        )
    return metas


def torch_dtype(meta: TensorMeta) -> Any:
    """The torch dtype a metadata string names, or a SampleError."""
    import torch

    name = meta.dtype.removeprefix("torch.")
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise SampleError(f"tensor {meta.name}: unknown dtype {meta.dtype!r}")
    return dtype


CHUNK = 1 << 20  # elements drawn at a time: float64 temporaries stay small whatever the tensor's size


def chunks(numel: int, size: int = CHUNK) -> list[tuple[int, int]]:
    """(start, stop) spans covering ``numel`` elements. The last span has at least 16 elements (or is the only
    one): torch's CPU normal sampler treats spans under 16 differently, and drawing in these spans then gives
    exactly the values of one draw over the whole tensor."""
    edges = [*range(0, numel, size), numel]
    if len(edges) > 2 and edges[-1] - edges[-2] < 16:
        edges.pop(-2)
    return list(itertools.pairwise(edges))


def rebuild(meta: TensorMeta, generator: Any) -> Any:
    """A CPU tensor as GraphNet's reference tool rebuilds it, drawn from ``generator``.

    Drawn a chunk at a time into the finished tensor, so building it takes little more memory than the
    tensor itself (one float64 draw over the whole tensor, then its arithmetic, took about 6x).
    """
    import torch

    dtype = torch_dtype(meta)
    shape = meta.shape
    if meta.data is not None:
        values = torch.tensor(meta.data, dtype=dtype)
        if values.numel() != math.prod(shape):
            raise SampleError(f"tensor {meta.name}: {values.numel()} literal values for shape {list(shape)}")
        return values.reshape(shape)
    if not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool:
        if meta.min_val is not None and meta.max_val is not None:
            return torch.randint(int(meta.min_val), int(meta.max_val) + 1, shape, generator=generator, dtype=dtype)
    out = torch.empty(math.prod(shape), dtype=dtype)
    for start, stop in chunks(out.numel()):
        out[start:stop].copy_(_draw(meta, stop - start, generator, dtype))  # converted as it is copied
    return out.reshape(shape)


def skip_draws(meta: TensorMeta, generator: Any) -> None:
    """Advance ``generator`` as ``rebuild(meta, generator)`` does, a chunk at a time, keeping nothing: the tensors
    drawn after it get the same values whether or not it was built."""
    import torch

    dtype = torch_dtype(meta)
    if meta.data is not None:
        return
    if not dtype.is_floating_point and not dtype.is_complex and dtype != torch.bool:
        if meta.min_val is not None and meta.max_val is not None:
            torch.randint(int(meta.min_val), int(meta.max_val) + 1, meta.shape, generator=generator, dtype=dtype)
            return
    for start, stop in chunks(math.prod(meta.shape)):  # the draws of _draw, without its arithmetic
        if dtype == torch.bool:
            torch.rand(stop - start, generator=generator)
        else:
            torch.randn(stop - start, generator=generator, dtype=torch.float64)


def _draw(meta: TensorMeta, count: int, generator: Any, dtype: Any) -> Any:
    """``count`` values of the tensor (as bool or float64), in the order one draw over the whole tensor gives them."""
    import torch

    if dtype == torch.bool:
        return torch.rand(count, generator=generator) < 0.5
    mean = 0.0 if meta.mean is None else float(meta.mean)
    std = 0.1 if meta.std is None else float(meta.std)
    values = torch.randn(count, generator=generator, dtype=torch.float64).mul_(std).mul_(0.2).add_(mean)
    if meta.min_val is not None:
        values.clamp_(min=float(meta.min_val))
    if meta.max_val is not None:
        values.clamp_(max=float(meta.max_val))
    return values.nan_to_num_(nan=mean, posinf=100.0, neginf=-100.0).clamp_(-100.0, 100.0)


def tensor_bytes(metas: list[TensorMeta], float_dtype: str | None = None) -> int:
    """What the tensors take once built (floating ones in ``float_dtype`` when given)."""
    import torch

    total = 0
    for meta in metas:
        dtype = torch_dtype(meta)
        if float_dtype is not None and dtype.is_floating_point:
            dtype = getattr(torch, float_dtype)
        total += math.prod(meta.shape) * dtype.itemsize
    return total
