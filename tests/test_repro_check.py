"""The repro's check (``standalone.check``) compiles the module as it was given, not as eager's call left it."""

from __future__ import annotations

import pytest
import torch

from pytest_inductor_templates.diagnose.standalone import check


class Counts(torch.nn.Module):
    """Each call adds one to a buffer its output depends on: a model whose state a call changes."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x * (1 + self.calls)
        self.calls.add_(1)
        return out


@pytest.mark.parametrize("second_opinion", [False, True])
def test_a_model_whose_call_changes_its_buffers_is_not_a_false_fault(second_opinion: bool) -> None:
    model = Counts()
    code, message = check(model, [torch.randn(16)], backend="aot_eager", fresh=False, second_opinion=second_opinion)
    assert (code, message) == (0, "compiled matches eager: the fault is gone")
    assert model.calls.item() == 1  # eager's own call, on the module given
