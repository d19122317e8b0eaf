"""One call's arguments: what a check calls the eager and compiled models with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Inputs:
    """One call's arguments."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
