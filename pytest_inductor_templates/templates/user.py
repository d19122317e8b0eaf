"""User templates: from a TOML file and from the ``pytest_inductor_templates`` hook."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from .registry import Requirements, Template, TemplateRegistry
from .torch_config import did_you_mean, unknown_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

TEMPLATE_FIELDS = ("description", "extends", "settings", "scoped", "requires")
REQUIREMENT_FIELDS = tuple(f.name for f in fields(Requirements))


class TemplateDefinitionError(ValueError):
    """A user template that cannot be built; the message names where it came from."""


def _unknown(kind: str, name: str, allowed: Iterable[str]) -> str:
    return unknown_name(kind, name, allowed, label="Allowed")


def _requirements(raw: Any, base: Requirements, where: str) -> Requirements:
    if not isinstance(raw, Mapping):
        raise TemplateDefinitionError(f"{where}: 'requires' must be a table, got {raw!r}")
    values = {f.name: getattr(base, f.name) for f in fields(Requirements)}
    for key, value in raw.items():
        if key not in REQUIREMENT_FIELDS:
            raise TemplateDefinitionError(f"{where}: {_unknown('requirement', key, REQUIREMENT_FIELDS)}")
        if key in ("device_types", "packages"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise TemplateDefinitionError(f"{where}: requires.{key} must be a list of strings")
            value = tuple(value)
        elif key == "min_capability":
            try:
                major, minor = (int(p) for p in str(value).split("."))
            except ValueError:
                raise TemplateDefinitionError(
                    f'{where}: requires.min_capability must look like "9.0", got {value!r}'
                ) from None
            value = (major, minor)
        elif key == "inference_only" and not isinstance(value, bool):
            raise TemplateDefinitionError(f"{where}: requires.inference_only must be true or false")
        elif key == "below_capability" and not isinstance(value, str):
            raise TemplateDefinitionError(f"{where}: requires.below_capability must be a string")
        values[key] = value
    return Requirements(**values)


def build_template(name: str, spec: Any, registry: TemplateRegistry, origin: str) -> Template:
    """One template from its definition (a mapping, or a ready Template)."""
    if isinstance(spec, Template):
        return spec if spec.origin != "built-in" else replace(spec, origin=origin)
    where = f"{origin}: template {name!r}"
    if not isinstance(spec, Mapping):
        raise TemplateDefinitionError(f"{where}: expected a table of fields, got {spec!r}")
    for key in spec:
        if key not in TEMPLATE_FIELDS and key != "name":
            raise TemplateDefinitionError(f"{where}: {_unknown('field', key, TEMPLATE_FIELDS)}")
    settings = spec.get("settings", {})
    if not isinstance(settings, Mapping) or not all(isinstance(k, str) for k in settings):
        raise TemplateDefinitionError(f"{where}: 'settings' must be a table of Inductor options")
    scoped = spec.get("scoped", [])
    if not isinstance(scoped, list) or not all(isinstance(k, str) for k in scoped):
        raise TemplateDefinitionError(f"{where}: 'scoped' must be a list of option names")
    description = spec.get("description", "")
    if not isinstance(description, str):
        raise TemplateDefinitionError(f"{where}: 'description' must be a string")
    parent_name = spec.get("extends")
    if parent_name is not None and not isinstance(parent_name, str):
        raise TemplateDefinitionError(f"{where}: 'extends' must be a template's name, got {parent_name!r}")
    if parent_name is None:
        parent = Template(name, "")
    elif parent_name not in registry:
        raise TemplateDefinitionError(f"{where}: extends {registry.unknown_name_message(parent_name)}")
    else:
        parent = registry[parent_name]
    requires = _requirements(spec.get("requires", {}), parent.requires, where)
    description = description or (f"{parent_name} with {dict(settings)}" if parent_name else "user template")
    template = parent.extended(name, description, settings, origin, scoped, requires)
    for key in scoped:
        if key not in template.settings:
            raise TemplateDefinitionError(
                f"{where}: 'scoped' names {key!r}, which is not among its settings"
                f"{did_you_mean(key, template.settings)} ({', '.join(template.settings) or 'none'})"
            )
    return template


def add_user_templates(registry: TemplateRegistry, definitions: Mapping[str, Any], origin: str) -> None:
    """Build and register templates, parents before the templates extending them."""
    pending = dict(definitions)
    while pending:
        name = next(
            (
                name
                for name, spec in pending.items()
                if not isinstance(spec, Mapping)
                or not isinstance(spec.get("extends"), str)
                or spec.get("extends") not in pending
            ),
            None,
        )
        if name is None:
            raise TemplateDefinitionError(f"{origin}: templates extend each other in a cycle: {', '.join(pending)}")
        try:
            registry.add(build_template(name, pending.pop(name), registry, origin))
        except ValueError as error:
            raise TemplateDefinitionError(str(error)) from None


def load_templates_file(path: Path) -> dict[str, Any]:
    """The ``[templates.NAME]`` tables of a TOML file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise TemplateDefinitionError(f"cannot read templates file {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise TemplateDefinitionError(
            f"templates file {path} is not UTF-8: {error.reason} at byte {error.start}"
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise TemplateDefinitionError(f"templates file {path} is not valid TOML: {error}") from None
    except RecursionError:
        raise TemplateDefinitionError(f"templates file {path} is nested too deeply to read") from None
    templates = data.get("templates")
    if not isinstance(templates, dict) or set(data) != {"templates"}:
        raise TemplateDefinitionError(f"templates file {path} must hold only [templates.NAME] tables")
    return templates


def hook_definitions(results: Iterable[Iterable[Any]]) -> dict[str, Any]:
    """Flatten what ``pytest_inductor_templates`` implementations returned."""
    definitions: dict[str, Any] = {}
    for result in results:
        for item in result or ():
            if isinstance(item, Template):
                name = item.name
            elif isinstance(item, Mapping) and isinstance(item.get("name"), str):
                name = item["name"]
            else:
                raise TemplateDefinitionError(
                    f"pytest_inductor_templates must return Template objects or tables with a 'name'; got {item!r}"
                )
            if name in definitions:
                raise TemplateDefinitionError(f"conftest: template {name!r} is defined twice")
            definitions[name] = item
    return definitions
