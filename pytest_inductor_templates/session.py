"""Session state: the registry, the resolved selection, the header, and the compiled_model fixture's work."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from . import selection as selection_module
from .compiled import CompiledModel
from .environment import Device, visible_devices
from .isolation import CompileWatcher, isolated_compile_state
from .options import effective
from .templates import TemplateRegistry
from .user_templates import (
    TemplateDefinitionError,
    add_user_templates,
    hook_definitions,
    load_templates_file,
)

SESSION_KEY = pytest.StashKey["InductorSession"]()


class RecompileLimitWarning(UserWarning):
    """Dynamo hit its recompile limit and fell back to running the code eagerly."""


def build_registry(config: pytest.Config) -> TemplateRegistry:
    """Built-in templates, then the templates file's, then conftest's."""
    registry = TemplateRegistry()
    try:
        file_option = effective(config, "--inductor-templates-file", "inductor_templates_file")
        if file_option is not None:
            base = (
                config.invocation_params.dir
                if file_option.from_command_line
                else (config.inipath.parent if config.inipath else config.rootpath)
            )
            path = Path(base, str(file_option.value))
            add_user_templates(registry, load_templates_file(path), str(path.name))
        results = config.hook.pytest_inductor_templates(config=config)
        add_user_templates(registry, hook_definitions(results), "conftest")
    except TemplateDefinitionError as error:
        raise pytest.UsageError(str(error)) from None
    return registry


class InductorSession:
    """What the plugin resolved for this pytest session."""

    def __init__(self, registry: TemplateRegistry, selection: selection_module.Selection) -> None:
        self.registry = registry
        self.selection = selection

    @classmethod
    def from_config(cls, config: pytest.Config) -> InductorSession:
        registry = build_registry(config)
        return cls(registry, selection_module.resolve(config, registry))

    @cached_property
    def devices(self) -> list[Device]:
        return visible_devices()

    @cached_property
    def skip_reason(self) -> str | None:
        """Why the selected template cannot run on this machine, or None."""
        template = self.selection.template
        if template is None:
            return None
        problem = template.machine_problem(self.devices)
        return f"template {template.name!r} is unavailable here: {problem}" if problem else None

    @cached_property
    def fallback_notes(self) -> list[str]:
        template = self.selection.template
        notes = (template.fallback_note(d) for d in self.devices) if template else ()
        return [n for n in notes if n]

    def header_lines(self) -> list[str]:
        import torch

        sel = self.selection
        devices = ", ".join(
            d.name + (f" ({d.description}, sm {d.capability[0]}.{d.capability[1]})" if d.capability else "")
            for d in self.devices
        )
        dynamic = {None: "auto", True: "true", False: "false"}[sel.dynamic]
        lines = [
            f"inductor-templates: torch {torch.__version__}; devices: {devices}",
            f"inductor-templates: {sel.label} from {sel.origin}; backend {sel.backend}, "
            f"fullgraph {sel.fullgraph}, dynamic {dynamic}",
        ]
        lines += [f"inductor-templates: overridden by the command line: {o}" for o in sel.overridden]
        settings = ", ".join(f"{k}={v!r}" for k, v in sel.effective_settings.items()) or "none (defaults)"
        lines.append(f"inductor-templates: effective Inductor settings: {settings}")
        if sel.config_patches:
            lines.append("inductor-templates: applied as a scoped config patch: " + ", ".join(sel.config_patches))
        if sel.inference_only:
            lines.append("inductor-templates: inference only: compiled calls run under torch.no_grad()")
        if self.skip_reason:
            lines.append(f"inductor-templates: {self.skip_reason}; tests using compiled_model are skipped")
        lines += [f"inductor-templates: fallback: {note}" for note in self.fallback_notes]
        return lines

    def compiled_models(self, request: pytest.FixtureRequest) -> Iterator[CompiledModelFactory]:
        """The compiled_model fixture: skip if unavailable, isolate, warn on recompile-limit hits."""
        if self.skip_reason:
            pytest.skip(self.skip_reason)
        for note in self.fallback_notes:
            request.node.user_properties.append(("inductor_fallback", note))
        with isolated_compile_state() as watcher:
            yield CompiledModelFactory(self.selection, watcher)
        for hit in watcher.recompile_limit_hits:
            warnings.warn(RecompileLimitWarning(hit), stacklevel=1)


class CompiledModelFactory:
    """``compiled_model(module_or_function)`` returns it compiled with the test's selection."""

    def __init__(self, selection: selection_module.Selection, watcher: CompileWatcher) -> None:
        self.selection = selection
        self._watcher = watcher

    def __call__(self, target: Any) -> CompiledModel:
        return CompiledModel(target, self.selection, self._watcher)
