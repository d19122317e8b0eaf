"""A built model kept as it was built, in host memory: fresh eager models are copies of it.

A check calls for fresh eager models (its reference, eager's second run, the float64 opinion) and paired timing for
one more, and each timing repeat in another process for one; building a GraphNet sample draws every weight again
(resnet50: 2.9 s on a 2-core CPU), a copy takes a transfer (0.04 s). The copy of its tensors is kept on the CPU, so
that none stays on the GPU beside the model under test: the peaks of memory a timing reads stay those of the model
and its inputs.
"""

from __future__ import annotations

import copy
from typing import Any


def _tensors(model: Any) -> list[Any]:
    """The model's parameters, buffers and the plain tensors its modules hold (a GraphModule's constants)."""
    import torch

    found: dict[int, Any] = {}
    for module in model.modules():
        for value in [*module._parameters.values(), *module._buffers.values(), *vars(module).values()]:
            if isinstance(value, torch.Tensor):
                found.setdefault(id(value), value)
    return list(found.values())


def _moved(tensor: Any, device: Any) -> Any:
    """A copy of ``tensor`` on ``device``, a parameter where it is one."""
    import torch

    data = tensor.detach().to(device, copy=True)
    if isinstance(tensor, torch.nn.Parameter):
        return torch.nn.Parameter(data, requires_grad=tensor.requires_grad)
    return data


class Pristine:
    """A copy of ``model`` made before anything called it, its tensors in host memory; ``fresh()`` gives a copy of
    it with each tensor on the device it was built on."""

    def __init__(self, model: Any) -> None:
        originals = _tensors(model)
        storages = {t.untyped_storage().data_ptr() for t in originals if t.untyped_storage().nbytes()}
        if len(storages) < sum(1 for t in originals if t.untyped_storage().nbytes()):
            raise ValueError("tensors of the model share storage: copied one by one they would not")
        memo = {id(t): _moved(t, "cpu") for t in originals}
        self.devices = {id(memo[id(t)]): t.device for t in originals}
        self.model = copy.deepcopy(model, memo)

    def fresh(self) -> Any:
        """A fresh model with the built values, independent of every other copy."""
        memo = {id(t): _moved(t, self.devices[id(t)]) for t in _tensors(self.model)}
        return copy.deepcopy(self.model, memo)


def pristine_or_none(model: Any) -> Pristine | None:
    """The model's ``Pristine`` copy, or None where it cannot be copied (not a module, or something in it refuses a
    deep copy): its eager models are then built again."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return None
    try:
        return Pristine(model)
    except Exception:
        return None
