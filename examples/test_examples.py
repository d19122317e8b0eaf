"""Example tests: run them under any template, e.g. ``pytest examples --inductor-template=cudagraphs``.

Each test compiles a small model with the selected template through ``compiled_model``
and compares it with eager. Models run on the first CUDA device when there is one.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class MLP(nn.Module):
    """Launch-bound: many small layers (CUDA graphs help here)."""

    def __init__(self, width: int = 256, depth: int = 8) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = F.gelu(layer(x))
        return x


class ConvBN(nn.Module):
    """Convolution + batch norm (freezing folds the norm into the weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class Attention(nn.Module):
    """Self-attention through scaled_dot_product_attention, returning a dict."""

    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = self.out(y.transpose(1, 2).reshape(b, t, d))
        return {"hidden": y, "norm": y.norm(dim=-1)}


def _check(compiled_model, model: nn.Module, x: torch.Tensor, **tolerance: float) -> None:
    model = model.to(DEVICE).eval()
    x = x.to(DEVICE)
    compiled = compiled_model(model)
    with torch.no_grad():
        expected = model(x)
        actual = compiled(x)
        compiled(torch.randn_like(x))  # a second call must not change the first result
    torch.testing.assert_close(actual, expected, **tolerance)
    print(f"{type(model).__name__}: {compiled.stats.summary()}")


def test_mlp(compiled_model) -> None:
    torch.manual_seed(0)
    _check(compiled_model, MLP(), torch.randn(4, 256), rtol=1e-4, atol=1e-4)


def test_conv_bn(compiled_model) -> None:
    torch.manual_seed(0)
    _check(compiled_model, ConvBN(), torch.randn(2, 3, 16, 16), rtol=1e-4, atol=1e-4)


def test_attention(compiled_model) -> None:
    torch.manual_seed(0)
    _check(compiled_model, Attention(), torch.randn(2, 16, 64), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(DEVICE.type != "cuda", reason="bf16 GEMMs are exercised on CUDA")
def test_bf16_gemm(compiled_model) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024)).to(torch.bfloat16)
    _check(compiled_model, model, torch.randn(512, 1024, dtype=torch.bfloat16), rtol=2e-2, atol=2e-2)
