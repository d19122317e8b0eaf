""" "Does it still fail": build a fresh eager model, compile it as the plugin does, and run the plugin's check."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from ..check.inputs import Inputs
from ..compile.failures import first_line
from ..templates.registry import Template
from ..templates.selection import Selection
from .request import DiagnosisRequest


@dataclass
class Attempt:
    """One check's outcome under some variant of the item's compile settings."""

    outcome: str  # an Outcome value, or "error" when building or checking raised outside the check
    reason: str
    seconds: float
    backend_calls: int = 0  # graphs the plugin's own backend compiled (0: torch.compile used another backend)
    notes: list[str] = field(default_factory=list)


def call_of(request: DiagnosisRequest) -> Any:
    """How the item calls its models: under ``no_grad`` for samples, as they are for ``inductor_check``."""

    def call(model: Any, inputs: Inputs) -> Any:
        import torch

        with torch.no_grad() if request.no_grad else contextlib.nullcontext():
            return model(*inputs.args, **inputs.kwargs)

    return call


def with_settings(selection: Selection, settings: dict[str, Any]) -> Selection:
    """``selection`` with its Inductor settings replaced by ``settings`` (how each is applied kept)."""
    if selection.template is not None and selection.options is None and selection.mode is None:
        template = selection.template
        reduced = Template(
            template.name,
            template.description,
            settings,
            template.scoped & set(settings),
            template.requires,
            template.origin,
            template.compiles,
        )
        return replace(selection, template=reduced)
    return replace(selection, template=None, mode=None, mode_options={}, options=dict(settings))


@contextlib.contextmanager
def scoped_config(patches: dict[str, Any] | None) -> Iterator[None]:
    """``torch._inductor.config.patch(patches)`` for the block (nothing for no patches)."""
    if not patches:
        yield
        return
    from torch._inductor import config

    with config.patch(patches):
        yield


def attempt(
    request: DiagnosisRequest, selection: Selection | None = None, patches: dict[str, Any] | None = None
) -> Attempt:
    """The plugin's check of a fresh model compiled with ``selection`` (the item's by default) under extra
    config ``patches``. Never raises an Exception: a build that raises is outcome ``error``."""
    import torch

    from ..check.runner import CheckSubject, run_check
    from ..compile.compiled import CompiledModel
    from ..compile.isolation import isolated_compile_state
    from ..machine import device_scope

    selection = selection or request.selection
    device = torch.device(request.device.name)
    start = time.perf_counter()
    compiled = None
    try:
        with device_scope(request.device), scoped_config(patches), isolated_compile_state() as watcher:
            compiled = CompiledModel(request.build.make_model(device), selection, watcher)
            subject = CheckSubject(
                make_eager=lambda: request.build.make_model(device),
                model=compiled,
                inputs=request.build.make_inputs(device),
                tolerance=request.tolerance,
                backend=selection.backend,
                call=call_of(request),
            )
            result = run_check(subject)
        outcome, reason = result.outcome.value, result.reason
    except Exception as error:
        outcome, reason = "error", f"building or checking raised {first_line(error)}"
    calls = compiled.stats.graphs if compiled is not None else 0
    return Attempt(outcome, reason, round(time.perf_counter() - start, 2), calls)
