"""One resolved compile selection: template, mode or options, plus backend, fullgraph, dynamic."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..machine import Device
from ..option_table import SELECTION_KINDS
from ..settings import Settings, Sourced
from . import torch_config
from .registry import ALWAYS_SCOPED, Template, TemplateRegistry, needs_inference

DEFAULT_BACKEND = "inductor"
NOTHING_SELECTED = "no template, mode or options given: the default"


@dataclass(frozen=True)
class Selection:
    """What every compiled item of the session is compiled with."""

    template: Template | None = None
    mode: str | None = None
    options: dict[str, Any] | None = None
    backend: str = DEFAULT_BACKEND
    fullgraph: bool = False
    dynamic: bool | None = None
    origin: str = NOTHING_SELECTED  # where the selection came from
    overridden: tuple[str, ...] = ()  # ini settings the command line overrode
    mode_options: dict[str, Any] = field(default_factory=dict)  # what the mode turns on

    @property
    def label(self) -> str:
        """The column name in test ids: the template, ``mode-MODE`` or ``options-HASH``."""
        if self.mode is not None:
            return f"mode-{self.mode}"
        if self.options is not None:
            digest = hashlib.sha1(json.dumps(self.options, sort_keys=True).encode()).hexdigest()
            return f"options-{digest[:8]}"
        return self.template.name if self.template else "default"

    @property
    def came_from(self) -> str:
        """``from --inductor-template (command line)``, or why it is the default."""
        return f"({self.origin})" if self.origin == NOTHING_SELECTED else f"from {self.origin}"

    @property
    def description(self) -> str:
        if self.mode is not None:
            return f"mode {self.mode}"
        if self.options is not None:
            return "options " + json.dumps(self.options, sort_keys=True)
        return f"template {self.label}"

    @property
    def compiles(self) -> bool:
        return self.template is None or self.template.compiles

    @property
    def compile_options(self) -> dict[str, Any] | None:
        """``options=`` for torch.compile (None when nothing is passed)."""
        if self.options is not None:
            return {k: v for k, v in self.options.items() if k not in ALWAYS_SCOPED} or None
        if self.template is not None and self.template.compile_options:
            return self.template.compile_options
        return None

    @property
    def config_patches(self) -> dict[str, Any]:
        """Settings applied as a scoped ``torch._inductor.config.patch``."""
        if self.options is not None:
            return {k: v for k, v in self.options.items() if k in ALWAYS_SCOPED}
        return self.template.config_patches if self.template else {}

    @property
    def effective_settings(self) -> dict[str, Any]:
        """Every Inductor setting this selection changes, however it is applied."""
        if self.options is not None:
            return dict(self.options)
        if self.mode is not None:
            return dict(self.mode_options)
        return dict(self.template.settings) if self.template else {}

    @property
    def cudagraphs(self) -> bool:
        """Whether CUDA graphs are on (for calls on a CUDA device)."""
        return bool(self.effective_settings.get("triton.cudagraphs")) or self.backend == "cudagraphs"

    @property
    def inference_only(self) -> bool:
        """Whether compiled calls run without grad: the template says so, or the settings need it (freezing)."""
        if self.template is not None:
            return self.template.requires.inference_only
        return needs_inference(self.effective_settings)


def parse_options(raw: Sourced[str]) -> dict[str, Any]:
    """Inductor options from inline JSON or ``@file``, validated against the installed torch."""
    text = str(raw.value).strip()
    source = "the value"
    if text.startswith("@"):
        path = raw.path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise raw.usage_error(f"cannot read {path}: {error.strerror}") from None
        except UnicodeDecodeError as error:
            raise raw.usage_error(f"{path} is not UTF-8: {error.reason} at byte {error.start}") from None
        source = str(path)
    try:
        options = json.loads(text)
    except json.JSONDecodeError as error:
        raise raw.usage_error(
            f"{source} is not valid JSON: {error.msg} at line {error.lineno} column {error.colno} (char {error.pos})",
        ) from None
    except RecursionError:
        raise raw.usage_error(f"{source} is nested too deeply to read") from None
    if not isinstance(options, dict):
        raise raw.usage_error(f"expected a JSON object of Inductor options, got {type(options).__name__}")
    known = torch_config.known_options()
    options = {k: torch_config.coerce_setting(k, v, known) for k, v in options.items()}
    for key, value in options.items():
        problem = torch_config.setting_problem(key, value, known)
        if problem:
            raise raw.usage_error(problem)
    return options


def _choose_kind(settings: Settings) -> tuple[Sourced[Any] | None, tuple[str, ...]]:
    """The one selection kind in force, and what on the ini level it overrode."""
    levels: dict[bool, list[Sourced[Any]]] = {True: [], False: []}
    for name in SELECTION_KINDS:
        for level in settings.levels(name):
            for value in level:
                levels[value.from_command_line].append(value)
    for chosen in levels.values():
        if len(chosen) > 1:
            names = " and ".join(v.origin for v in chosen)
            raise pytest.UsageError(f"{names}: choose one of template, mode and options")
    cli, ini = levels[True], levels[False]
    if cli:
        overridden = tuple(f"{v.origin} = {v.value!r}" for v in ini)
        return cli[0], overridden
    return (ini[0] if ini else None), ()


def _names(chosen: Sourced[Any]) -> list[str]:
    return list(dict.fromkeys(n.strip() for n in str(chosen.value).split(",") if n.strip()))


def _all(registry: TemplateRegistry, devices: list[Device]) -> tuple[list[Template], list[tuple[str, str]]]:
    """What ``all`` means here: the compiling templates this machine can run, and the others with why."""
    runnable: list[Template] = []
    left_out: list[tuple[str, str]] = []
    for template in (t for t in registry if t.compiles):
        problem = template.machine_problem(devices)
        if problem is None:
            runnable.append(template)
        else:
            left_out.append((template.name, problem))
    return runnable, left_out


def _templates(chosen: Sourced[Any], registry: TemplateRegistry, devices: list[Device]) -> list[Template]:
    names = _names(chosen)
    if names == ["all"]:
        return _all(registry, devices)[0]
    if "all" in names:
        others = ", ".join(n for n in names if n != "all")
        raise chosen.usage_error(
            f"all stands alone: give all by itself, or a comma list of templates without it (not {others})"
        )
    if not names:
        raise chosen.usage_error("give one template, a comma list of templates, or all")
    for name in names:
        if name not in registry:
            raise chosen.usage_error(registry.unknown_name_message(name))
        if problem := user_template_problem(registry[name]):
            raise chosen.usage_error(problem)
    return [registry[name] for name in names]


def user_template_problem(template: Template) -> str | None:
    """Why a user template named on purpose cannot run with this torch for a reason its author can fix (an
    Inductor key this torch lacks, a value of the wrong type), or None. A built-in one is skipped instead, and
    ``all`` leaves such a template out with the reason."""
    if template.origin == "built-in":
        return None
    reason = template.unavailable_reason()
    return f"template {template.name!r} ({template.origin}) cannot run here: {reason}" if reason else None


def left_out_by_all(settings: Settings, registry: TemplateRegistry, devices: list[Device]) -> list[tuple[str, str]]:
    """The templates ``all`` leaves out on this machine, each with why (none unless ``all`` was chosen)."""
    chosen, _ = _choose_kind(settings)
    if chosen is None or chosen.option.name != "inductor_template" or _names(chosen) != ["all"]:
        return []
    return _all(registry, devices)[1]


def resolve(settings: Settings, registry: TemplateRegistry, devices: list[Device]) -> list[Selection]:
    """The session's compiled columns (one per template, or one mode or options), or a UsageError."""
    chosen, overridden = _choose_kind(settings)
    backend_raw = settings.get("inductor_backend")
    backend = str(backend_raw.value) if backend_raw else DEFAULT_BACKEND
    if backend_raw is not None:
        known = torch_config.backend_names()
        if backend not in known:
            raise backend_raw.usage_error(torch_config.unknown_name("torch.compile backend", backend, known))
    common: dict[str, Any] = {
        "backend": backend,
        "fullgraph": settings.fullgraph,
        "dynamic": settings.dynamic,
        "origin": chosen.origin if chosen else NOTHING_SELECTED,
        "overridden": overridden,
    }
    if chosen is None:
        return [Selection(template=registry["default"], **common)]
    value = chosen.value
    if chosen.option.name == "inductor_template":
        templates = _templates(chosen, registry, devices)
        for template in templates:
            if template.settings and backend != DEFAULT_BACKEND:
                raise chosen.usage_error(
                    f"template {template.name!r} sets Inductor options, which backend "
                    f"{backend!r} cannot take; use --inductor-backend=inductor",
                )
        return [Selection(template=template, **common) for template in templates]
    what = "mode" if chosen.option.name == "inductor_mode" else "options"
    if not torch_config.backend_accepts(backend, what):
        raise chosen.usage_error(f"backend {backend!r} takes no {what}= argument")
    if what == "mode":
        modes = torch_config.compile_modes()
        if value not in modes:
            message = torch_config.unknown_name("torch.compile mode", str(value), modes, "Modes of this torch")
            raise chosen.usage_error(message)
        return [Selection(mode=value, mode_options=modes[value], **common)]
    return [Selection(options=parse_options(chosen), **common)]
