"""A built model kept as it was built, in host memory: fresh eager models are copies of it.

A check calls for fresh eager models (its reference, eager's second run, the float64 opinion) and paired timing for
one more, and each timing repeat in another process for one; building a GraphNet sample draws every weight again
(resnet50: 2.9 s on a 2-core CPU), a copy takes a transfer (0.04 s). The copy of its tensors is kept on the CPU, so
that none stays on the GPU beside the model under test: the peaks of memory a timing reads stay those of the model
and its inputs. A model larger than ``MAX_BYTES`` is built again instead (each worker process, repeats included,
would hold its copy in host memory), and so is one that cannot be copied tensor by tensor.
"""

from __future__ import annotations

import copy
from typing import Any

MAX_BYTES = 2 << 30  # the tensors of a model kept in host memory


def _tensors(model: Any) -> list[Any]:
    """The tensors the model's modules hold: parameters, buffers, and plain tensors, also inside lists, tuples
    and dicts (a GraphModule's constants), each once."""
    import torch

    found: dict[int, Any] = {}

    def visit(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            found.setdefault(id(value), value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for item in value.values():
                visit(item)

    for module in model.modules():  # _parameters and _buffers by name: a ScriptModule's are no dicts in vars()
        for value in [*module._parameters.values(), *module._buffers.values(), *vars(module).values()]:
            visit(value)
    return list(found.values())


def _moved(tensor: Any, device: Any) -> Any:
    """A copy of ``tensor`` on ``device``: a parameter where it is one, with its ``requires_grad``."""
    import torch

    data = tensor.detach().to(device, copy=True)
    if isinstance(tensor, torch.nn.Parameter):
        return torch.nn.Parameter(data, requires_grad=tensor.requires_grad)
    return data.requires_grad_(tensor.requires_grad)


class Pristine:
    """A copy of ``model`` made before anything called it, its tensors in host memory; ``fresh()`` gives a copy of
    it with each tensor on the device it was built on."""

    def __init__(self, model: Any) -> None:
        import torch

        originals = _tensors(model)
        if any(type(t) not in (torch.Tensor, torch.nn.Parameter) for t in originals):
            raise ValueError("a tensor subclass or a parameter subclass: copied as a plain one it would change")
        held = [t for t in originals if t.untyped_storage().nbytes()]
        if len({t.untyped_storage().data_ptr() for t in held}) < len(held):
            raise ValueError("tensors of the model share storage: copied one by one they would not")
        if sum(t.untyped_storage().nbytes() for t in held) > MAX_BYTES:
            raise ValueError(f"its tensors take more than {MAX_BYTES >> 30} GiB")
        memo = {id(t): _moved(t, "cpu") for t in originals}
        self.devices = {id(memo[id(t)]): t.device for t in originals}
        self.model = copy.deepcopy(model, memo)

    def fresh(self) -> Any:
        """A fresh model with the built values, independent of every other copy."""
        memo = {id(t): _moved(t, self.devices[id(t)]) for t in _tensors(self.model)}
        return copy.deepcopy(self.model, memo)


def pristine_or_none(model: Any) -> Pristine | None:
    """The model's ``Pristine`` copy, or None where it cannot be kept (not a module, too large, or something in it
    refuses a copy: a traced TorchScript module's copy does not copy again): its eager models are then built
    again."""
    import torch

    if not isinstance(model, torch.nn.Module) or isinstance(model, torch.jit.ScriptModule):
        return None  # a ScriptModule's tensors are new Python objects at each read: the checks below see them by id,
        # which a freed object's id can match (traced modules were kept 4, 10 and 7 times in three runs of 40)
    try:
        kept = Pristine(model)
        held = _tensors(kept.model)
        if any(id(t) not in kept.devices for t in held):  # the copy holds tensors other than those it was given
            return None
        copy.deepcopy(kept.model, {id(t): t for t in held})  # a trial of fresh(), its tensors shared
    except Exception:
        return None
    return kept
