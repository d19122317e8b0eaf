"""One call's arguments: what a check calls the eager and compiled models with, and how a later call's differ."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..compile.outputs import map_tensors


@dataclass
class Inputs:
    """One call's arguments."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def rolled(t: Any) -> Any:
    """``t`` with its elements rolled by one place: the same values (so the same range: valid token ids stay
    valid ids, masks stay masks), in other places. A tensor of one element is returned as it is."""
    return t.reshape(-1).roll(1).reshape(t.shape) if t.numel() > 1 else t


def later_inputs(first: Inputs) -> list[Inputs]:
    """Candidates for a second call where the caller gave one input set, in order of preference: every
    tensor rolled by one (floating, integer and bool alike), then only the floating ones (for a model that
    rejects reordered integers, such as sorted lengths or offsets)."""

    def floating(t: Any) -> Any:
        return rolled(t) if t.is_floating_point() or t.is_complex() else t

    return [
        Inputs(map_tensors(rolled, first.args), map_tensors(rolled, first.kwargs)),
        Inputs(map_tensors(floating, first.args), map_tensors(floating, first.kwargs)),
    ]
