"""Example tests: run them under any templates, e.g. ``pytest examples --inductor-template=cudagraphs``.

Each test compiles a small model with its template through ``compiled_model`` and compares it
with eager, or hands it to ``inductor_check`` (the correctness engine) or ``inductor_benchmark``
(checked, then timed beside eager). Tests that take ``inductor_device`` run on every device of the matrix
(``--inductor-devices``; by default every CUDA device, else the CPU).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn


class TransformerMLP(nn.Module):
    """A pre-norm transformer feed-forward block with a residual connection."""

    def __init__(self, width: int = 128) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.gelu(self.up(self.norm(x))))


def _check(compiled_model, model: nn.Module, x: torch.Tensor, **tolerance: float) -> None:
    compiled = compiled_model(model)
    with torch.no_grad():
        expected = model(x)
        actual = compiled(x)
        compiled(torch.randn_like(x))  # a later call must not change the first result
    torch.testing.assert_close(actual, expected, **tolerance)
    print(f"{type(model).__name__}: {compiled.stats.summary()}")


def test_transformer_mlp(compiled_model, inductor_device) -> None:
    torch.manual_seed(0)
    model = TransformerMLP().to(inductor_device).eval()
    _check(compiled_model, model, torch.randn(4, 16, 128, device=inductor_device), rtol=1e-4, atol=1e-4)


def test_pointwise_function(compiled_model, inductor_device) -> None:
    def swish_residual(x: torch.Tensor) -> torch.Tensor:
        return x + x * torch.sigmoid(x)

    x = torch.linspace(-3, 3, 1000, device=inductor_device)
    torch.testing.assert_close(compiled_model(swish_residual)(x), swish_residual(x))


@pytest.mark.inductor_templates(exclude=["cpp_wrapper"])  # a C++-wrapper compile of this block is slow
def test_bf16_block(compiled_model, inductor_device) -> None:
    if inductor_device.type != "cuda":
        pytest.skip("bf16 GEMMs are exercised on CUDA")
    torch.manual_seed(0)
    model = TransformerMLP(256).to(inductor_device, torch.bfloat16).eval()
    x = torch.randn(8, 64, 256, device=inductor_device, dtype=torch.bfloat16)
    _check(compiled_model, model, x, rtol=2e-2, atol=2e-2)


def test_transformer_mlp_checked(inductor_check, inductor_device) -> None:
    """The same block through the correctness engine: any mismatch is explained leaf by leaf."""
    torch.manual_seed(0)
    model = TransformerMLP().to(inductor_device).eval()
    with torch.no_grad():
        inductor_check(model, torch.randn(4, 16, 128, device=inductor_device))


def test_transformer_mlp_speed(inductor_benchmark, inductor_device) -> None:
    """Checked, then timed through pytest-benchmark beside eager: the speedup lands in the JSON and the summary."""
    torch.manual_seed(0)
    model = TransformerMLP().to(inductor_device).eval()
    with torch.no_grad():
        inductor_benchmark(model, torch.randn(4, 16, 128, device=inductor_device))
