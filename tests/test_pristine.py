"""A built model kept as built, in host memory (``engine/pristine.py``): fresh eager models are copies of it."""

from __future__ import annotations

import torch

from pytest_inductor_templates.engine.pristine import Pristine, pristine_or_none


class Held(torch.nn.Module):
    """A parameter, a frozen one tied twice, a buffer and a plain tensor attribute (as a GraphModule's constant)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 4))
        self.frozen = torch.nn.Parameter(torch.randn(4), requires_grad=False)
        self.inner = torch.nn.Module()
        self.inner.frozen = self.frozen  # tied: one tensor in two places
        self.register_buffer("mean", torch.randn(4))
        self.constant = torch.randn(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + self.frozen + self.inner.frozen + self.mean + self.constant


def test_a_fresh_copy_has_the_built_values_in_tensors_of_its_own() -> None:
    built = Held()
    x = torch.randn(2, 4)
    expected = built(x)
    kept = Pristine(built)
    assert all(t.device.type == "cpu" for t in [*kept.model.parameters(), *kept.model.buffers()])
    with torch.no_grad():
        built.weight.add_(1.0)  # the model under test changed after the copy: the copy keeps the built values
        built.mean.zero_()
    one, two = kept.fresh(), kept.fresh()
    assert torch.equal(one(x), expected) and torch.equal(two(x), expected)
    assert isinstance(one.weight, torch.nn.Parameter) and one.weight.requires_grad and not one.frozen.requires_grad
    assert one.inner.frozen is one.frozen  # still tied
    assert "mean" in dict(one.named_buffers()) and "constant" not in dict(one.named_buffers())
    assert one.weight.data_ptr() != two.weight.data_ptr() != kept.model.weight.data_ptr()
    assert one.constant.data_ptr() != two.constant.data_ptr()
    with torch.no_grad():
        one.weight.zero_()  # a copy's change reaches no other copy
    assert torch.equal(two(x), expected) and torch.equal(kept.fresh()(x), expected)


def test_a_model_that_cannot_be_copied_one_tensor_at_a_time_is_built_again() -> None:
    """Tensors sharing storage (a buffer that views a parameter) would come apart copied one by one; something that
    is not a module has nothing to copy: no pristine copy, its eager models are built again."""
    viewed = Held()
    viewed.register_buffer("row", viewed.weight.detach()[0])
    assert pristine_or_none(viewed) is None
    assert pristine_or_none(lambda x: x) is None
    assert pristine_or_none(Held()) is not None
