"""The template registry: named, tested groups of Inductor settings."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from ..machine import Device, package_missing
from .torch_config import settings_problems, unknown_name

# Settings that only take effect through the global config, never through
# ``torch.compile(options=...)`` (measured: docs/design.md).
ALWAYS_SCOPED = frozenset({"freezing"})
# Settings that only take effect without grad: whoever turns them on gets an inference-only column.
NEEDS_INFERENCE = frozenset({"freezing"})
# A template name goes into test ids (``test[NAME-cpu]``) and comma lists: letters, digits, ``_`` and ``.``;
# no ``-`` (it separates the template from the device, and starts the ``mode-``/``options-`` labels).
NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]*")
RESERVED_NAMES = frozenset({"all"})  # --inductor-template=all


def needs_inference(settings: Mapping[str, Any]) -> bool:
    """Whether these settings only take effect when the model runs without grad (freezing)."""
    return any(settings.get(key) for key in NEEDS_INFERENCE)


def name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a template, or None."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return f"template name {name!r}: use letters, digits, '_' and '.' (it goes into test ids)"
    if name in RESERVED_NAMES:
        return f"template name {name!r} is reserved (--inductor-template=all)"
    return None


@dataclass(frozen=True)
class Requirements:
    """Where a template can run."""

    device_types: tuple[str, ...] = ("cpu", "cuda")
    min_capability: tuple[int, int] | None = None  # CUDA compute capability
    below_capability: str | None = None  # what runs instead below min_capability; None: skip
    packages: tuple[str, ...] = ()
    inference_only: bool = False

    def describe(self) -> str:
        parts = ["/".join(self.device_types)]
        if self.min_capability:
            cc = ".".join(map(str, self.min_capability))
            parts.append(f"sm >= {cc}" + (" (fallback below)" if self.below_capability else ""))
        parts.extend(self.packages)
        if self.inference_only:
            parts.append("inference only")
        return ", ".join(parts)


@dataclass(frozen=True)
class Template:
    """A named group of Inductor settings.

    ``scoped`` names the settings applied as a ``torch._inductor.config.patch``
    around compilation and every call instead of through ``options=``. A template whose
    settings need inference (freezing) is inference-only, however it was defined.
    """

    name: str
    description: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    scoped: frozenset[str] = frozenset()
    requires: Requirements = Requirements()
    origin: str = "built-in"
    compiles: bool = True  # False only for the eager pseudo-template

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))
        object.__setattr__(self, "scoped", frozenset(self.scoped) | (ALWAYS_SCOPED & set(self.settings)))
        if needs_inference(self.settings) and not self.requires.inference_only:
            object.__setattr__(self, "requires", replace(self.requires, inference_only=True))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled through its fields (``settings`` is a read-only mapping, which pickle cannot copy)."""
        fields = (self.name, self.description, dict(self.settings), self.scoped, self.requires, self.origin)
        return (Template, (*fields, self.compiles))

    @property
    def compile_options(self) -> dict[str, Any]:
        """The settings passed to ``torch.compile(options=...)``."""
        return {k: v for k, v in self.settings.items() if k not in self.scoped}

    @property
    def config_patches(self) -> dict[str, Any]:
        """The settings applied as a scoped config patch."""
        return {k: v for k, v in self.settings.items() if k in self.scoped}

    def extended(
        self,
        name: str,
        description: str,
        settings: Mapping[str, Any],
        origin: str,
        scoped: Iterable[str] = (),
        requires: Requirements | None = None,
    ) -> Template:
        """A new template with this one's settings, updated by ``settings``."""
        return replace(
            self,
            name=name,
            description=description,
            settings={**self.settings, **settings},
            scoped=self.scoped | frozenset(scoped),
            requires=requires or self.requires,
            origin=origin,
        )

    def unavailable_reason(self) -> str | None:
        """Why the installed torch cannot take this template's settings, or None."""
        return "; ".join(settings_problems(dict(self.settings))) or None

    def missing_packages(self) -> str | None:
        """Why a package this template needs cannot be used here, or None."""
        return "; ".join(m for m in map(package_missing, self.requires.packages) if m) or None

    def device_problem(self, device: Device) -> str | None:
        """Why this template cannot run on ``device``, or None."""
        req = self.requires
        if device.type not in req.device_types:
            return f"needs a {' or '.join(req.device_types)} device, not {device.type}"
        if req.min_capability and device.capability and device.capability < req.min_capability:
            if req.below_capability is None:
                return (
                    "needs compute capability >= "
                    f"{'.'.join(map(str, req.min_capability))}; {device} has "
                    f"{'.'.join(map(str, device.capability))}"
                )
        return None

    def machine_problem(self, devices: Iterable[Device]) -> str | None:
        """Why this template cannot run on any of ``devices``, or None."""
        reason = self.unavailable_reason()
        if reason:
            return reason
        devices = list(devices)
        usable = [d for d in devices if d.type in self.requires.device_types]
        if not usable:
            return (
                f"needs a {' or '.join(self.requires.device_types)} device; this machine has "
                f"only {', '.join(d.name for d in devices)}"
            )
        problems = [self.device_problem(d) for d in usable]
        return problems[0] if all(problems) else self.missing_packages()

    def fallback_note(self, device: Device) -> str | None:
        """What runs instead of the template's intent on ``device``, if anything."""
        req = self.requires
        if req.min_capability and req.below_capability and device.capability and device.capability < req.min_capability:
            cc = ".".join(map(str, device.capability))
            return f"{self.name}: {device} has compute capability {cc}: {req.below_capability}"
        return None


_GEMM_AUTOTUNE = {"max_autotune_gemm": True}

EAGER = "eager"

BUILTIN_TEMPLATES: tuple[Template, ...] = (
    Template(EAGER, "the model run uncompiled: the reference row of the matrix", compiles=False),
    Template("default", "plain torch.compile, no overrides"),
    Template(
        "triton",
        "Triton kernels behind the Python wrapper (cpp_wrapper off)",
        {"cpp_wrapper": False},
        requires=Requirements(device_types=("cuda",), packages=("triton",)),
    ),
    Template("cpp_wrapper", "a C++ wrapper around the generated kernels", {"cpp_wrapper": True}),
    Template(
        "cudagraphs",
        "CUDA Graphs, to cut kernel-launch overhead",
        {"triton.cudagraphs": True},
        requires=Requirements(device_types=("cuda",)),
    ),
    Template(
        "max_autotune",
        "autotuned GEMMs and kernel configs",
        {"max_autotune": True, "max_autotune_gemm": True, "coordinate_descent_tuning": True, "epilogue_fusion": True},
    ),
    Template(
        "freezing",
        "weights folded into constants; compiled calls run without grad",
        {"freezing": True},
    ),
    Template(
        "tma",
        "Triton GEMM autotuning with the persistent TMA template among the choices",
        {**_GEMM_AUTOTUNE, "max_autotune_gemm_backends": "TRITON", "triton.enable_persistent_tma_matmul": True},
        requires=Requirements(
            device_types=("cuda",),
            min_capability=(9, 0),
            below_capability="no TMA; the non-TMA Triton GEMM templates are autotuned instead",
            packages=("triton",),
        ),
    ),
    Template(
        "cutlass",
        "CUTLASS GEMM kernels among the autotuning choices (fp16/bf16 GEMMs)",
        {**_GEMM_AUTOTUNE, "max_autotune_gemm_backends": "ATEN,TRITON,CUTLASS"},
        requires=Requirements(device_types=("cuda",), packages=("cutlass_library",)),
    ),
    Template(
        "aten",
        "ATen (cuBLAS / CPU BLAS) GEMMs only, even under GEMM autotuning",
        {**_GEMM_AUTOTUNE, "max_autotune_gemm_backends": "ATEN"},
    ),
)


class TemplateRegistry:
    """Built-in and user templates by name."""

    def __init__(self, templates: Iterable[Template] = BUILTIN_TEMPLATES) -> None:
        self._templates: dict[str, Template] = {}
        for template in templates:
            self.add(template)

    def add(self, template: Template) -> None:
        """Register a template; a name may be used once, and must be fit for test ids."""
        if problem := name_problem(template.name):
            raise ValueError(f"{template.origin}: {problem}")
        if template.name in self._templates:
            raise ValueError(
                f"template {template.name!r} ({template.origin}) is already defined "
                f"({self._templates[template.name].origin})"
            )
        self._templates[template.name] = template

    def __contains__(self, name: object) -> bool:
        return name in self._templates

    def __iter__(self) -> Iterator[Template]:
        return iter(self._templates.values())

    def __getitem__(self, name: str) -> Template:
        return self._templates[name]

    def names(self) -> list[str]:
        return list(self._templates)

    def unknown_name_message(self, name: str) -> str:
        return unknown_name("template", name, self._templates)
