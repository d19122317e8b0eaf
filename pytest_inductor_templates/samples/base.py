"""What every sample provides: a fresh model and seeded inputs for a device."""

from __future__ import annotations

import zlib
from abc import ABC, abstractmethod
from typing import Any

from ..check.inputs import Inputs
from ..tolerance import Tolerance

__all__ = ["Inputs", "Sample", "SampleError", "Tolerance", "stable_seed"]


class SampleError(Exception):
    """A sample that cannot be built; the message says why, and fails that sample's items alone."""


def stable_seed(sample_id: str) -> int:
    """A seed derived from the sample id alone: the same on every machine, template and device."""
    return zlib.crc32(sample_id.encode())


def model_and_inputs(build: Any, device: Any) -> tuple[Any, list[Inputs]]:
    """``build``'s inputs, then its model, each from its own ``make_inputs`` / ``make_model``: what drawing both
    at once is for a builder that has no one pass over its draws."""
    inputs = build.make_inputs(device)
    return build.make_model(device), inputs


class Sample(ABC):
    """A model and its inputs, buildable on any device it suits."""

    id: str
    device_types: tuple[str, ...] = ("cpu", "cuda")
    tolerance: Tolerance | None = None

    @property
    @abstractmethod
    def dtype(self) -> str:
        """The dtype its computation runs in, e.g. ``float32``."""

    @abstractmethod
    def make_model(self, device: Any) -> Any:
        """A fresh model (or function) on ``device``, with new tensors holding the same weights every time."""

    @abstractmethod
    def make_inputs(self, device: Any) -> list[Inputs]:
        """Seeded inputs on ``device``: the first call's, then any further calls' (e.g. other batch sizes); new
        tensors every time (a tensor still alive after its triple is released counts as kept by something else)."""

    def make_model_and_inputs(self, device: Any) -> tuple[Any, list[Inputs]]:
        """``make_model`` and ``make_inputs`` together (an item's build, a diagnosis's one draw); a sample that can
        draw both in one pass does (GraphNet's)."""
        return model_and_inputs(self, device)

    @property
    def weights_mode(self) -> str | None:
        """How a GraphNet sample's weights reach its graph (``parameters`` or ``inputs``, the record's
        ``sample_weights``); None for a sample whose model holds its own weights (the built-ins)."""
        return None

    def tensor_bytes(self, float_dtype: str | None = None) -> int | None:
        """What its weights and inputs take once built (floating ones in ``float_dtype`` when given), or None
        when that is not known before building (the built-ins are small)."""
        return None

    @property
    def graph_size(self) -> int | None:
        """How large its graph is, as a guess at how long it compiles (a GraphNet sample: its ``model.py`` in bytes,
        about a line a node); None when not known (the built-ins are small)."""
        return None

    def device_problem(self, device_type: str) -> str | None:
        if device_type in self.device_types:
            return None
        return f"sample {self.id} runs on {'/'.join(self.device_types)} only"
