"""A GraphNet ``model.py`` as the plugin runs it: its hard-coded device strings pointed at the item's device and,
with the weights bound to the module, its ``forward`` reading them from the module (``graphnet_scalars``: the
lifted scalars among them read as the module's numbers)."""

from __future__ import annotations

import ast
import re

from .base import SampleError
from .graphnet_scalars import item_only, read_as_numbers

_DEVICE_STRING = re.compile(r"(cuda|cpu|xpu|mps)(:\d+)?")


def point_devices_at(tree: ast.Module, device: str) -> ast.Module:
    """``tree`` with its hard-coded device strings and ``device(...)`` calls pointed at ``device``."""
    return _DeviceRewriter(device).visit(tree)


class _DeviceRewriter(ast.NodeTransformer):
    """Points hard-coded device strings and ``device(...)`` calls at the item's device."""

    def __init__(self, device: str) -> None:
        self.device = device

    def _target(self, node: ast.AST) -> ast.expr:
        call = ast.Call(
            func=ast.Attribute(value=ast.Name("torch", ast.Load()), attr="device", ctx=ast.Load()),
            args=[ast.Constant(self.device)],
            keywords=[],
        )
        return ast.copy_location(call, node)

    def _is_device_string(self, node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and bool(_DEVICE_STRING.fullmatch(node.value))
        )

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        is_device_ctor = (isinstance(func, ast.Name) and func.id == "device") or (
            isinstance(func, ast.Attribute)
            and func.attr == "device"
            and isinstance(func.value, ast.Name)
            and func.value.id == "torch"
        )
        if is_device_ctor:
            return self._target(node)
        if isinstance(func, ast.Attribute) and func.attr == "cuda" and not node.args:
            return ast.copy_location(
                ast.Call(func=ast.Attribute(func.value, "to", ast.Load()), args=[self._target(node)], keywords=[]),
                node,
            )
        if isinstance(func, ast.Attribute) and func.attr == "to":
            node.args = [self._target(a) if self._is_device_string(a) else a for a in node.args]
        for keyword in node.keywords:
            if keyword.arg == "device" and self._is_device_string(keyword.value):
                keyword.value = self._target(keyword.value)
        return node


def read_weights_from_self(tree: ast.Module, weights: frozenset[str]) -> tuple[ast.Module, frozenset[str]]:
    """``tree`` with ``GraphModule.forward`` taking its weights from the module instead of as arguments: each leaves
    the signature, and ``forward`` begins with ``NAME = self.NAME``; and the weights it reads only with ``.item()``
    (GraphNet's lifted scalars: ``graphnet_scalars``), which the module holds as Python numbers, read as those. The
    rest of the captured code is unchanged.

    Dynamo then traces the graph's own ``forward``, as with the weights as inputs (no wrapper frame, the same graph
    breaks but the lifted scalars'), and marks the module's parameters and buffers as static: freezing folds them,
    on both sides of a graph break, where they reach the resumed code as locals."""
    forward = next(
        (
            node
            for cls in tree.body
            if isinstance(cls, ast.ClassDef) and cls.name == "GraphModule"
            for node in cls.body
            if isinstance(node, ast.FunctionDef) and node.name == "forward"
        ),
        None,
    )
    if forward is None or not forward.args.args:
        raise SampleError("GraphModule has no forward(self, ...) to bind the weights to")
    arguments = forward.args
    owner = arguments.args[0].arg
    taken = [a.arg for a in [*arguments.args, *arguments.kwonlyargs] if a.arg in weights]
    defaults = [None] * (len(arguments.args) - len(arguments.defaults)) + list(arguments.defaults)
    positional = [(a, d) for a, d in zip(arguments.args, defaults, strict=True) if a.arg not in weights]
    arguments.args = [a for a, _ in positional]
    arguments.defaults = [d for _, d in positional if d is not None]  # the defaults stay the trailing ones
    keywords = [
        (a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if a.arg not in weights
    ]
    arguments.kwonlyargs, arguments.kw_defaults = [a for a, _ in keywords], [d for _, d in keywords]
    self_read = [
        ast.Assign([ast.Name(name, ast.Store())], ast.Attribute(ast.Name(owner, ast.Load()), name, ast.Load()))
        for name in taken
    ]
    docstring = forward.body[:1] if ast.get_docstring(forward) is not None else []
    scalars = item_only(forward, frozenset(taken))
    read_as_numbers(forward, scalars)
    forward.body = [*docstring, *self_read, *forward.body[len(docstring) :]]
    return tree, scalars
