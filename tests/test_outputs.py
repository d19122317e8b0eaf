"""map_tensors rebuilds every container kind, mapping tensors and leaving other leaves alone."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict, namedtuple
from typing import Any

import pytest
import torch

from pytest_inductor_templates.compile.outputs import map_tensors

Pair = namedtuple("Pair", ["first", "second"])


@dataclasses.dataclass
class Plain:
    hidden: torch.Tensor
    label: str


@dataclasses.dataclass(frozen=True)
class Frozen:
    logits: torch.Tensor
    extra: Any = None


class ModelOutput(OrderedDict):
    """Like transformers' ModelOutput: a dict whose keys are also attributes."""

    def __getattr__(self, name: str) -> Any:
        return self[name]


class TensorList(list):
    pass


def tensors_in(obj: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    map_tensors(lambda t: found.append(t) or t, obj)
    return found


def make_outputs() -> dict[str, Any]:
    t = lambda *shape: torch.randn(*shape)  # noqa: E731
    return {
        "tensor": t(3),
        "tuple": (t(2), 7, "s"),
        "list": [t(2), None, t(1)],
        "dict": {"a": t(2), "b": 1.5},
        "ordered_dict": OrderedDict(x=t(2), y="label"),
        "namedtuple": Pair(t(2), 3),
        "dataclass": Plain(t(2), "cat"),
        "frozen_dataclass": Frozen(t(4), extra={"k": t(1)}),
        "model_output": ModelOutput(logits=t(2), loss=None),
        "list_subclass": TensorList([t(2), "x"]),
        "structseq": torch.max(t(3, 2), dim=0),
        "nested": {"outer": [(t(2), {"deep": Plain(t(1), "d")})], "n": 4},
    }


@pytest.mark.parametrize("kind", list(make_outputs()))
def test_clone_every_container_kind(kind: str) -> None:
    original = make_outputs()[kind]
    cloned = map_tensors(torch.Tensor.clone, original)
    assert type(cloned) is type(original)
    before, after = tensors_in(original), tensors_in(cloned)
    assert len(before) == len(after) > 0
    for old, new in zip(before, after, strict=True):
        assert new.data_ptr() != old.data_ptr()
        assert torch.equal(new, old)
    for old_leaf, new_leaf in zip(non_tensor_leaves(original), non_tensor_leaves(cloned), strict=True):
        assert new_leaf is old_leaf


def non_tensor_leaves(obj: Any) -> list[Any]:
    if isinstance(obj, torch.Tensor):
        return []
    if isinstance(obj, dict):
        return [leaf for v in obj.values() for leaf in non_tensor_leaves(v)]
    if isinstance(obj, (list, tuple)):
        return [leaf for v in obj for leaf in non_tensor_leaves(v)]
    if dataclasses.is_dataclass(obj):
        return [leaf for f in dataclasses.fields(obj) for leaf in non_tensor_leaves(getattr(obj, f.name))]
    return [obj]


def test_original_is_untouched_and_attributes_follow() -> None:
    out = ModelOutput(logits=torch.ones(2))
    cloned = map_tensors(lambda t: t * 2, out)
    assert torch.equal(out.logits, torch.ones(2)) and torch.equal(cloned.logits, torch.full((2,), 2.0))
    frozen = Frozen(torch.ones(1))
    assert map_tensors(lambda t: t + 1, frozen).logits.item() == 2.0 and frozen.logits.item() == 1.0
