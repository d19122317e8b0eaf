"""GraphNet's lifted scalars: a module's Python number (a batch norm's ``eps`` or ``momentum``, a dropout's ``p``)
that the capture passed as a 0-dim tensor weight and the captured code reads back with ``.item()``.

Replayed as a tensor, each ``.item()`` is a graph break that neither the captured program nor the deployed model
has (torchvision's ``fcn_resnet101`` graph reads 214 of them). With the weights bound to the module, such a weight
is bound as the module's Python number instead, and its ``.item()`` reads are the number itself: Dynamo then
specialises it as it does a deployed module's attribute."""

from __future__ import annotations

import ast
from collections import Counter


def item_only(forward: ast.FunctionDef, weights: frozenset[str]) -> frozenset[str]:
    """The weights of ``forward``'s parameters that its body reads only through ``.item()``, itself or through the
    one local it was copied to (Dynamo's ``l_name = L_name``), neither of them assigned anything else but ``None``
    (Dynamo's release, no read); any other read, store or copy keeps the weight a tensor."""
    assignments = _copy_assignments(forward, weights)
    copied_to = Counter(node.targets[0].id for node in assignments)  # type: ignore[attr-defined]
    kept = {node.value.id for node in assignments if copied_to[node.targets[0].id] > 1}  # type: ignore[attr-defined]
    aliases = {name: name for name in weights} | _copies(assignments)  # a name in the body -> its weight
    copy_reads = {id(node.value) for node in assignments}
    allowed_stores = {id(node.targets[0]) for node in assignments} | {
        id(target)
        for node in ast.walk(forward)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and node.value.value is None
        for target in node.targets
    }
    items = {id(call.func.value) for call in ast.walk(forward) if _is_item_call(call)}  # type: ignore[attr-defined]
    read_by_item: set[str] = set()
    for node in ast.walk(forward):
        if not isinstance(node, ast.Name) or node.id not in aliases:
            continue
        weight = aliases[node.id]
        if isinstance(node.ctx, ast.Load):
            if id(node) in items:
                read_by_item.add(weight)
            elif id(node) not in copy_reads:
                kept.add(weight)
        elif id(node) not in allowed_stores:  # assigned something else (augmented, unpacked, chained, ...)
            kept.add(weight)
    return frozenset(read_by_item - kept)


def read_as_numbers(forward: ast.FunctionDef, scalars: frozenset[str]) -> None:
    """``forward`` with each ``NAME.item()`` of a ``scalars`` weight (or of its local copy) read as ``NAME``: the
    module holds the number."""
    names = set(scalars) | set(_copies(_copy_assignments(forward, scalars)))

    class _Numbers(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if _is_item_call(node) and node.func.value.id in names:  # type: ignore[attr-defined]
                return ast.copy_location(ast.Name(node.func.value.id, ast.Load()), node)  # type: ignore[attr-defined]
            return node

    _Numbers().visit(forward)


def _copy_assignments(forward: ast.FunctionDef, weights: frozenset[str]) -> list[ast.Assign]:
    """``forward``'s assignments of a weight to one local (``l_name = L_name``)."""
    return [
        node
        for node in ast.walk(forward)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Name)
        and node.value.id in weights
    ]


def _copies(assignments: list[ast.Assign]) -> dict[str, str]:
    """Each local a weight is copied to by ``assignments`` (``_copy_assignments``) -> that weight."""
    return {node.targets[0].id: node.value.id for node in assignments}  # type: ignore[attr-defined]


def _is_item_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and not node.args
        and not node.keywords
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "item"
        and isinstance(node.func.value, ast.Name)
    )
