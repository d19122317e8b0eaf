"""What the installed torch knows: Inductor option keys and types, modes, backends.

Everything here imports torch lazily, inside the functions.
"""

from __future__ import annotations

import difflib
import inspect
import typing
from functools import cache
from typing import Any


@cache
def known_options() -> dict[str, Any]:
    """Every Inductor config key of the installed torch, with its value when first asked (for its type)."""
    from torch._inductor import config

    return config.get_config_copy()


def _expected_type(key: str, current: Any) -> Any:
    from torch._inductor import config

    get_type = getattr(config, "get_type", None)
    return get_type(key) if get_type is not None else type(current)


def closest(name: str, candidates: typing.Iterable[str], n: int = 3) -> list[str]:
    """The candidates that look most like ``name``."""
    return difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.6)


def did_you_mean(name: str, candidates: typing.Iterable[str], n: int = 1) -> str:
    """``; did you mean 'x'?`` naming the closest candidates, or nothing when none is close."""
    near = closest(name, candidates, n)
    return f"; did you mean {', '.join(repr(k) for k in near)}?" if near else ""


def unknown_name(what: str, name: str, known: typing.Iterable[str], label: str = "Known") -> str:
    """``unknown WHAT 'name'; did you mean 'x'? Known: a, b`` (the hint only when a name is close)."""
    known = list(known)
    return f"unknown {what} {name!r}{did_you_mean(name, known) or '.'} {label}: {', '.join(known)}"


def setting_problem(key: str, value: Any, known: dict[str, Any]) -> str | None:
    """Why ``key=value`` would be refused by ``torch.compile(options=...)``, or None.

    Mirrors torch's own check: the key must exist and, when its declared type is
    a plain class, the value must be an instance of it.
    """
    if key not in known:
        return f"unknown Inductor option {key!r}{did_you_mean(key, known, n=3)}"
    expected = _expected_type(key, known[key])
    if typing.get_origin(expected) is None and isinstance(expected, type):
        if not isinstance(value, expected):
            return f"Inductor option {key!r} takes {expected.__name__}, got {type(value).__name__} {value!r}"
    return None


def coerce_setting(key: str, value: Any, known: dict[str, Any]) -> Any:
    """JSON has one number type: give an integer to a float-typed key as a float."""
    if key in known and isinstance(value, int) and not isinstance(value, bool):
        if _expected_type(key, known[key]) is float:
            return float(value)
    return value


def settings_problems(settings: dict[str, Any]) -> list[str]:
    """Every reason the installed torch would refuse these Inductor settings (none for no settings: Inductor's
    config, a second of imports, is not read for them)."""
    if not settings:
        return []
    known = known_options()
    found = (setting_problem(k, v, known) for k, v in settings.items())
    return [p for p in found if p is not None]


def compile_modes() -> dict[str, dict[str, Any]]:
    """torch.compile modes of the installed torch, each with the options it sets."""
    from torch._inductor import list_mode_options

    return {name: dict(opts) for name, opts in list_mode_options().items()}


def backend_names() -> list[str]:
    """Backends registered with torch.compile."""
    import torch._dynamo

    return sorted(torch._dynamo.list_backends(exclude_tags=()))


def backend_accepts(backend: str, parameter: str) -> bool:
    """Whether a registered backend's compiler function names ``parameter``.

    A bare ``**kwargs`` does not count: backends such as ``eager`` take and ignore it.
    """
    if backend == "inductor":
        return True
    from torch._dynamo.backends.registry import lookup_backend

    return parameter in inspect.signature(lookup_backend(backend)).parameters
