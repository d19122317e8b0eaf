"""Walking nested model outputs: tuples, lists, dicts, namedtuples, dataclasses, pytree nodes."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any


def map_tensors(fn: Callable[[Any], Any], obj: Any) -> Any:
    """``obj`` rebuilt with ``fn`` applied to every tensor in it; other leaves are kept as they are.

    Containers keep their types: namedtuples, dict subclasses (model-output objects),
    dataclasses (registered with pytree or not) and other registered pytree nodes.
    """
    import torch
    import torch.utils._pytree as pytree

    def walk(node: Any) -> Any:
        if isinstance(node, torch.Tensor):
            return fn(node)
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            return type(node)(*(walk(v) for v in node))
        if type(node) in (tuple, list):
            return type(node)(walk(v) for v in node)
        if isinstance(node, list):
            rebuilt = copy.copy(node)
            rebuilt[:] = [walk(v) for v in node]
            return rebuilt
        if isinstance(node, dict):
            rebuilt = copy.copy(node)
            for key, value in node.items():
                rebuilt[key] = walk(value)
            return rebuilt
        if dataclasses.is_dataclass(node) and not isinstance(node, type):
            rebuilt = copy.copy(node)
            for f in dataclasses.fields(node):
                object.__setattr__(rebuilt, f.name, walk(getattr(node, f.name)))
            return rebuilt
        if type(node) in pytree.SUPPORTED_NODES:
            return pytree.tree_map_only(torch.Tensor, fn, node)
        return node

    return walk(obj)


def leaves(obj: Any, path: str = "out") -> list[tuple[str, Any]]:
    """Every leaf of a nested output with its path, e.g. ``out["logits"][1]`` or ``out.hidden``."""
    import torch
    import torch.utils._pytree as pytree

    if isinstance(obj, torch.Tensor):
        return [(path, obj)]
    if isinstance(obj, (list, tuple)):
        return [leaf for i, v in enumerate(obj) for leaf in leaves(v, f"{path}[{i}]")]
    if isinstance(obj, dict):
        return [leaf for k, v in obj.items() for leaf in leaves(v, f"{path}[{k!r}]")]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [leaf for f in dataclasses.fields(obj) for leaf in leaves(getattr(obj, f.name), f"{path}.{f.name}")]
    if type(obj) in pytree.SUPPORTED_NODES:
        children, _ = pytree.tree_flatten(obj)
        return [leaf for i, v in enumerate(children) for leaf in leaves(v, f"{path}<{i}>")]
    return [(path, obj)]
