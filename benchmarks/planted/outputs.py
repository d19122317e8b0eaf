"""Output helpers of the planted-fault benchmark: leaves by path, replacing them, seeded choices."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytest_inductor_templates.compile.outputs import leaves, map_tensors


def replace(obj: Any, fn: Callable[[str, Any], Any]) -> Any:
    """``obj`` with every tensor leaf replaced by ``fn(path, leaf)``."""

    paths = {id(t): p for p, t in leaves(obj)}
    return map_tensors(lambda t: fn(paths[id(t)], t), obj)


def floating(t: Any) -> bool:
    return t.is_floating_point()


def largest_floating(observed: Any) -> str | None:
    """The floating output with the most elements: where single-output faults are planted."""
    sizes = [(t.numel(), p) for p, t in leaves(observed.actual[0]) if hasattr(t, "dtype") and floating(t)]
    return max(sizes, key=lambda x: x[0])[1] if sizes else None


def first_of(obj: Any, kind: Callable[[Any], bool]) -> str | None:
    return next((p for p, t in leaves(obj) if hasattr(t, "dtype") and kind(t) and t.numel()), None)


def seeded(path: str, t: Any) -> Any:
    import zlib

    import torch

    return torch.Generator().manual_seed(zlib.crc32(f"{path}{list(t.shape)}".encode()))


def random_index(t: Any) -> int:
    import torch

    return int(torch.randint(0, t.numel(), (1,), generator=seeded("element", t)))


def nudge(t: Any, ulps: Any) -> Any:
    """``t`` moved ``ulps`` (elementwise, any sign) units in the last place of its dtype."""
    import torch

    spacing = (torch.nextafter(t.abs(), torch.full_like(t, float("inf"))) - t.abs()).double()
    return (t.double() + ulps * spacing).to(t.dtype)


def on_leaf(path: str | None, fn: Callable[[Any], Any]) -> Callable[[Any], Any] | None:
    if path is None:
        return None
    import torch

    fresh = lambda t: t.clone(memory_format=torch.contiguous_format)  # noqa: E731
    return lambda outputs: replace(outputs, lambda p, t: fn(fresh(t)) if p == path else t)
