"""The standalone repro: the failing Dynamo graph as torch code (torch's ``NNModuleToString``), its inputs and the
module's own weights saved beside it (``inputs.pt``, ``weights.pt``), the item's settings, and ``standalone``'s
check. It needs torch alone (and, for a backend of the user's own, the conftest.py that registers it)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from . import standalone
from .capture import CapturedGraph

SCRIPT, INPUTS, WEIGHTS = "repro.py", "inputs.pt", "weights.pt"  # one folder; its text reads the last two

HEADER = '''"""Standalone repro of {name}, written by pytest-inductor-templates' diagnosis.

{what}
Run it with plain python (torch only, and CONFTESTS below; inputs.pt and weights.pt must lie beside it): it compiles
the graph below, with the item's weights and inputs and its recorded settings, from a fresh Inductor cache and
compares it with eager.
Exit code 0: the fault is gone; 1: the fault is there; 2: the repro itself could not run.
"""
'''

MAIN = """

# ---- the failing graph, as Dynamo captured it -------------------------------------------------------------
from math import inf, nan  # noqa: E402,F401 - names the graph code may use
from torch import device, tensor  # noqa: E402,F401
import torch._inductor.inductor_prims  # noqa: E402,F401

{module}

# ---- the item's settings ---------------------------------------------------------------------------------
OPTIONS = {options!r}  # torch.compile(options=...)
PATCHES = {patches!r}  # applied as torch._inductor.config.patch(...) around compile and call
NO_GRAD = {no_grad!r}  # the item's calls run under torch.no_grad()
TOLERANCE = {tolerance!r}  # (rtol, atol), or None for torch.testing's per-dtype defaults scaled to each output
TF32 = {tf32!r}  # torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
SECOND_OPINION = {second_opinion!r}  # False: an output beyond the tolerance fails, no float64 run asked
BACKEND = {backend!r}  # torch.compile's backend
CONFTESTS = {conftests!r}  # files run first: they register BACKEND (a backend of the user's own)


def built(here):
    # Repro() with the item's own parameters and buffers (weights.pt) in place of the random ones it is made with
    # (the graph's module holds them where Dynamo does not lift them to inputs: under freezing, say)
    import os

    module = Repro()
    weights = torch.load(os.path.join(here, {weights!r}), weights_only=True)
    with torch.no_grad():
        for name, value in weights.items():
            owner, _, attribute = name.rpartition(".")
            getattr(module.get_submodule(owner), attribute).copy_(value)
    return module


def main():
    import os
    import traceback

    try:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = TF32
        for path in CONFTESTS:
            import runpy

            runpy.run_path(path)
        here = os.path.dirname(os.path.abspath(__file__))
        inputs = torch.load(os.path.join(here, {inputs!r}), weights_only=True)
        module = built(here)
    except Exception:
        traceback.print_exc()
        print("the repro could not run")
        return 2
    code, message = check(module, inputs, OPTIONS, PATCHES, NO_GRAD, TOLERANCE, SECOND_OPINION, BACKEND)
    print(message)
    return code


if __name__ == "__main__":
    import sys

    sys.exit(main())
"""


def module_source(graph: Any) -> str | None:
    """The graph as a ``class Repro(torch.nn.Module)``, or None where it holds modules torch cannot write out."""
    from torch._dynamo.debug_utils import NNModuleToString

    if not NNModuleToString.can_convert_to_string(graph):
        return None
    return NNModuleToString.convert(graph)


def write_repro(
    directory: Path,
    entry: CapturedGraph,
    *,
    name: str,
    what: str,
    options: dict[str, Any] | None,
    patches: dict[str, Any],
    no_grad: bool,
    tolerance: tuple[float, float] | None,
    second_opinion: bool = True,
    backend: str = "inductor",
    conftests: list[str] | None = None,
) -> Path | None:
    """``directory/repro.py``, ``directory/inputs.pt`` and ``directory/weights.pt``; None when the graph cannot be
    written as torch code."""
    import torch

    module = module_source(entry.dynamo)
    if module is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    torch.save(list(entry.inputs), directory / INPUTS)
    torch.save(entry.kept, directory / WEIGHTS)  # as captured: before the call mutated a buffer
    body = inspect.getsource(standalone)
    text = (
        HEADER.format(name=name, what=what)
        + body.split('"""', 2)[2]
        + MAIN.format(
            module=module,
            options=options or None,
            patches=patches,
            no_grad=no_grad,
            tolerance=tolerance,
            tf32=(torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32),
            second_opinion=second_opinion,
            backend=backend,
            conftests=conftests or [],
            inputs=INPUTS,
            weights=WEIGHTS,
        )
    )
    path = directory / SCRIPT
    path.write_text(text, encoding="utf-8")
    return path


def load_module(path: Path) -> Any:
    """The repro's ``Repro`` module, built by running its source (to check the graph fails before keeping it)."""
    namespace: dict[str, Any] = {"__name__": "inductor_repro", "__file__": str(path)}
    exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
    return namespace
