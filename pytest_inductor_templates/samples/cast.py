"""A sample run in another floating dtype (``--inductor-sample-dtype``): weights and inputs cast."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..compile.outputs import map_tensors
from .base import Inputs, Sample


@dataclass(frozen=True, eq=False)
class CastSample(Sample):
    """``inner`` with its floating weights and inputs in ``dtype_name``; its id says so (``id@bfloat16``)."""

    inner: Sample
    dtype_name: str

    @property
    def id(self) -> str:  # type: ignore[override]
        return f"{self.inner.id}@{self.dtype_name}"

    @property
    def dtype(self) -> str:
        return self.dtype_name

    @property
    def device_types(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.inner.device_types

    @property
    def tolerance(self) -> Any:  # type: ignore[override]
        return self.inner.tolerance

    @property
    def weights_mode(self) -> str | None:
        return self.inner.weights_mode

    @property
    def graph_size(self) -> int | None:
        return self.inner.graph_size

    def tensor_bytes(self, float_dtype: str | None = None) -> int | None:
        return self.inner.tensor_bytes(float_dtype or self.dtype_name)

    def _cast(self, t: Any) -> Any:
        import torch

        return t.to(getattr(torch, self.dtype_name)) if t.is_floating_point() else t

    def make_model(self, device: Any) -> Any:
        return self._cast_model(self.inner.make_model(device))

    def make_inputs(self, device: Any) -> list[Inputs]:
        return self._cast_inputs(self.inner.make_inputs(device))

    def make_model_and_inputs(self, device: Any) -> tuple[Any, list[Inputs]]:
        model, inputs = self.inner.make_model_and_inputs(device)
        return self._cast_model(model), self._cast_inputs(inputs)

    def _cast_model(self, model: Any) -> Any:
        import torch

        return model.to(getattr(torch, self.dtype_name)) if isinstance(model, torch.nn.Module) else model

    def _cast_inputs(self, inputs: list[Inputs]) -> list[Inputs]:
        return [Inputs(map_tensors(self._cast, i.args), map_tensors(self._cast, i.kwargs)) for i in inputs]
