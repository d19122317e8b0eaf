"""The built-in samples' model classes, defined on first use so that importing the plugin does not import torch."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any


@cache
def models() -> dict[str, Any]:
    """The model classes by name (defined here, on first call, so that importing this module does not import torch)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class LaunchBound(nn.Module):
        """Forty tiny elementwise ops on a small tensor: kernel-launch bound, where CUDA graphs win."""

        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 64))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for step in range(10):
                x = torch.sin(x * self.scale) + 0.1 * step
                x = torch.tanh(x) * 1.5
                x = x - x.mean()
                x = torch.sigmoid(x) + x
            return x

    class GemmBlock(nn.Module):
        """Two large linear layers around GELU: GEMM bound."""

        def __init__(self) -> None:
            super().__init__()
            self.up = nn.Linear(512, 1024)
            self.down = nn.Linear(1024, 512)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down(F.gelu(self.up(x)))

    class ConvBN(nn.Module):
        """Convolution, batch norm, ReLU: freezing folds the norm into the convolution."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(8, 16, 3, padding=1)
            self.bn = nn.BatchNorm2d(16)
            with torch.no_grad():
                self.bn.running_mean.uniform_(-0.5, 0.5)
                self.bn.running_var.uniform_(0.5, 2.0)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(self.bn(self.conv(x)))

    class Attention(nn.Module):
        """Causal self-attention through scaled_dot_product_attention; returns a dict."""

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

    class NormSoftmax(nn.Module):
        """Layer norm and softmax reductions; returns a list."""

        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(128)
            self.proj = nn.Linear(128, 32)

        def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
            h = self.norm(x)
            return [h, torch.softmax(self.proj(h), dim=-1), torch.log_softmax(h, dim=1)]

    class EmbeddingPool(nn.Module):
        """Embedding lookup of integer token ids; returns a nested tuple."""

        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(1000, 64)
            self.head = nn.Linear(64, 10)

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[tuple[torch.Tensor, torch.Tensor], Any]:
            e = self.embed(ids) * mask.unsqueeze(-1)
            pooled = e.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
            return (pooled, F.normalize(pooled, dim=-1)), self.head(pooled)

    @dataclass
    class ClassifierOutput:
        logits: torch.Tensor
        hidden: torch.Tensor

    class DataclassOutput(nn.Module):
        """A small classifier returning a dataclass."""

        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Linear(32, 64), nn.SiLU(), nn.Linear(64, 64))
            self.head = nn.Linear(64, 5)

        def forward(self, x: torch.Tensor) -> ClassifierOutput:
            hidden = self.body(x)
            return ClassifierOutput(logits=self.head(hidden), hidden=hidden)

    class BufferMutation(nn.Module):
        """A forward that updates a running average buffer and a step counter in place."""

        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(32, 32)
            self.register_buffer("ema", torch.zeros(32))
            self.register_buffer("steps", torch.zeros((), dtype=torch.long))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.fc(x)
            self.ema.mul_(0.9).add_(y.mean(0), alpha=0.1)
            self.steps.add_(1)
            return y + self.ema

    class GraphBreak(nn.Module):
        """Data-dependent Python control flow (``.item()``): Dynamo breaks the graph there."""

        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(32, 32)
            self.b = nn.Linear(32, 32)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.a(x))
            if h.mean().item() > 0.0:
                h = h * 2
            return self.b(h)

    class DynamicBatch(nn.Module):
        """A two-layer MLP called with several batch sizes."""

        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(48, 96), nn.GELU(), nn.Linear(96, 48))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x) + x

    class TransformerBlock(nn.Module):
        """A pre-norm transformer block: causal self-attention and a 4x-wide GELU MLP, each with a residual."""

        def __init__(self, width: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
            self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.down(F.gelu(self.up(self.norm2(x))))

    class Bottleneck(nn.Module):
        """ResNet's bottleneck: 1x1, 3x3 (strided), 1x1 convolutions with batch norm, and a shortcut."""

        def __init__(self, channels: int, width: int, stride: int) -> None:
            super().__init__()
            out = 4 * width
            self.body = nn.Sequential(
                nn.Conv2d(channels, width, 1, bias=False), _norm(width), nn.ReLU(),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), _norm(width), nn.ReLU(),
                nn.Conv2d(width, out, 1, bias=False), _norm(out),
            )  # fmt: skip
            self.shortcut = (
                nn.Sequential(nn.Conv2d(channels, out, 1, stride, bias=False), _norm(out))
                if stride != 1 or channels != out
                else nn.Identity()
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.relu(self.body(x) + self.shortcut(x))

    def _norm(channels: int) -> nn.BatchNorm2d:
        norm = nn.BatchNorm2d(channels)
        with torch.no_grad():
            norm.running_mean.uniform_(-0.1, 0.1)
            norm.running_var.uniform_(0.5, 1.5)
        return norm

    class ConvStack(nn.Module):
        """ResNet-50's layout: a 7x7 stem, four stages of bottlenecks, global pooling and a linear head."""

        def __init__(self, layers: tuple[int, ...], width: int) -> None:
            super().__init__()
            stages: list[nn.Module] = [
                nn.Conv2d(3, width, 7, 2, 3, bias=False),
                _norm(width),
                nn.ReLU(),
                nn.MaxPool2d(3, 2, 1),
            ]
            channels = width
            for stage, blocks in enumerate(layers):
                for block in range(blocks):
                    stride = 2 if stage > 0 and block == 0 else 1
                    stages.append(Bottleneck(channels, width * 2**stage, stride))
                    channels = 4 * width * 2**stage
            self.features = nn.Sequential(*stages)
            self.head = nn.Linear(channels, 1000)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.features(x).mean((2, 3)))

    class GemmChain(nn.Module):
        """Square linear layers in a row with GELU between: large GEMMs back to back."""

        def __init__(self, width: int, depth: int) -> None:
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers[:-1]:
                x = F.gelu(layer(x))
            return self.layers[-1](x)

    return {
        cls.__name__: cls
        for cls in (
            LaunchBound,
            GemmBlock,
            ConvBN,
            Attention,
            NormSoftmax,
            EmbeddingPool,
            DataclassOutput,
            BufferMutation,
            GraphBreak,
            DynamicBatch,
            TransformerBlock,
            ConvStack,
            GemmChain,
        )
    }
