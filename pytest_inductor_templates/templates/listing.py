"""The template list printed by --inductor-list-templates, and the README's templates table."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..machine import Device
from ..tables import render
from .registry import Template, TemplateRegistry


def _settings(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in values.items()) or "(none)"


def template_lines(template: Template, devices: Iterable[Device]) -> list[str]:
    """One template's block in the listing."""
    problem = template.machine_problem(devices)
    status = "available" if problem is None else f"UNAVAILABLE: {problem}"
    lines = [
        f"{template.name} ({template.origin}): {status}",
        f"    {template.description}",
        f"    settings: {_settings(template.compile_options)}",
    ]
    if template.config_patches:
        lines.append(f"    scoped config patch: {_settings(template.config_patches)}")
    lines.append(f"    requires: {template.requires.describe()}")
    if template.requires.below_capability:
        lines.append(f"    below the capability: {template.requires.below_capability}")
    return lines


def listing(registry: TemplateRegistry, devices: list[Device], torch_version: str) -> str:
    """Every template with settings, requirements and availability on this machine."""
    machine = ", ".join(d.name + (f" ({d.description})" if d.description else "") for d in devices)
    lines = [f"Inductor templates for torch {torch_version} on {machine}:", ""]
    for template in registry:
        lines += [*template_lines(template, devices), ""]
    return "\n".join(lines)


def markdown_table(registry: TemplateRegistry) -> str:
    """The docs' table of templates, generated from the registry."""
    rows = []
    for t in registry:
        settings = ", ".join(
            f"`{k}={v!r}`" + (" (scoped patch)" if k in t.scoped else "") for k, v in t.settings.items()
        )
        requires = t.requires.describe()
        if t.requires.below_capability:
            requires += f"; below it: {t.requires.below_capability}"
        rows.append([f"`{t.name}`", t.description, settings or "none", requires])
    return "\n".join(render(["template", "what it does", "Inductor settings", "requires"], rows, markdown=True))


if __name__ == "__main__":
    print(markdown_table(TemplateRegistry()))
