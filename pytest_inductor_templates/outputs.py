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
