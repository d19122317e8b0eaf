"""A built model kept as built, in host memory (``engine/pristine.py``): fresh eager models are copies of it."""

from __future__ import annotations

import pytest
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


@pytest.mark.filterwarnings("ignore:`torch.jit.trace")
def test_a_model_that_cannot_be_copied_one_tensor_at_a_time_is_built_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tensors sharing storage would come apart copied one by one (a buffer that views a parameter; a view kept in
    a list beside its base); a traced TorchScript module's copy cannot be copied again; something that is not a
    module has nothing to copy; a model over the size kept in host memory: no pristine copy, its eager models are
    built again."""
    from pytest_inductor_templates.engine import pristine

    viewed = Held()
    viewed.register_buffer("row", viewed.weight.detach()[0])
    assert pristine_or_none(viewed) is None
    listed = Held()
    listed.pair = [listed.mean, listed.mean[:2]]  # found inside the list: its storage is shared
    assert pristine_or_none(listed) is None
    assert pristine_or_none(torch.jit.trace(torch.nn.Linear(4, 4), torch.randn(2, 4))) is None
    assert pristine_or_none(lambda x: x) is None
    monkeypatch.setattr(pristine, "MAX_BYTES", 64)
    assert pristine_or_none(Held()) is None
    monkeypatch.undo()
    kept = pristine_or_none(Held())
    assert kept is not None


def test_a_copy_keeps_a_buffer_s_requires_grad_and_the_tensors_held_in_lists() -> None:
    model = Held()
    model.register_buffer("tracked", torch.ones(2, requires_grad=True))
    model.tables = [torch.arange(3.0)]
    kept = Pristine(model)
    assert all(t.device.type == "cpu" for t in kept.model.tables)
    fresh = kept.fresh()
    assert fresh.tracked.requires_grad and torch.equal(fresh.tables[0], model.tables[0])
    assert fresh.tables[0].data_ptr() != model.tables[0].data_ptr()
