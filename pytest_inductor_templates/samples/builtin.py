"""The built-in samples: small, deterministic models that exercise what the templates change."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from ..runs.tables import render
from .base import Inputs, Sample, Tolerance, stable_seed

ModelFactory = Callable[..., Any]  # (**Size.model) -> a model
InputFactory = Callable[[Any, Any], list[Inputs]]  # (generator, dtype) -> inputs on the CPU


@dataclass(frozen=True)
class Size:
    """A GPU-sized sample's size on one device type: the model's keyword arguments, its one input's shape."""

    model: Mapping[str, Any]
    inputs: tuple[int, ...]

    def __str__(self) -> str:
        return f"input {'x'.join(map(str, self.inputs))}, " + ", ".join(f"{k} {v}" for k, v in self.model.items())


@dataclass(frozen=True, eq=False)
class BuiltinSample(Sample):
    """A model class and an input factory; weights and inputs come from a seed fixed by the name.

    A sample with ``sizes`` has a size per device type (full on CUDA, reduced on the CPU so that CI stays
    fast): its model factory takes the size's keyword arguments, and its input is one tensor of its shape.
    """

    name: str
    model_factory: ModelFactory
    input_factory: InputFactory | None = None
    dtype_name: str = "float32"
    device_types: tuple[str, ...] = ("cpu", "cuda")
    tolerance: Tolerance | None = None
    description: str = ""
    sizes: Mapping[str, Size] | None = None

    @property
    def id(self) -> str:  # type: ignore[override]
        return f"builtin/{self.name}"

    @property
    def dtype(self) -> str:
        return self.dtype_name

    @property
    def summary(self) -> str:
        """The description, and a GPU-sized sample's size on each device type."""
        sizes = self.sizes or {}
        return "; ".join([self.description, *(f"{device}: {size}" for device, size in sizes.items())])

    def _torch_dtype(self) -> Any:
        import torch

        return getattr(torch, self.dtype_name)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by name (its factories are closures): the worker process finds the same sample."""
        return (builtin_sample, (self.name,))

    def make_model(self, device: Any) -> Any:
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(stable_seed(self.id))
            model = self.model_factory(**self.sizes[device.type].model) if self.sizes else self.model_factory()
        return model.to(device=device, dtype=self._torch_dtype()).eval()

    def make_inputs(self, device: Any) -> list[Inputs]:
        import torch

        from ..compile.outputs import map_tensors

        generator = torch.Generator().manual_seed(stable_seed(self.id) + 1)
        if self.sizes:
            inputs = _one(generator, self._torch_dtype(), *self.sizes[device.type].inputs)
        else:
            assert self.input_factory is not None
            inputs = self.input_factory(generator, self._torch_dtype())
        move = lambda t: t.to(device)  # noqa: E731
        return [Inputs(map_tensors(move, i.args), map_tensors(move, i.kwargs)) for i in inputs]


def _randn(generator: Any, dtype: Any, *shape: int) -> Any:
    import torch

    return torch.randn(*shape, generator=generator).to(dtype)


def _one(generator: Any, dtype: Any, *shape: int) -> list[Inputs]:
    return [Inputs((_randn(generator, dtype, *shape),)), Inputs((_randn(generator, dtype, *shape),))]


@cache
def _models() -> dict[str, Any]:
    """The model classes (defined here so that importing this module does not import torch)."""
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


def _model(name: str) -> ModelFactory:
    return lambda **size: _models()[name](**size)


GPU_SIZED = {  # full size on CUDA, where launch overhead no longer decides the speedup; reduced on the CPU
    "transformer_block": {
        "cuda": Size({"width": 2048, "heads": 16}, (8, 1024, 2048)),
        "cpu": Size({"width": 64, "heads": 4}, (2, 32, 64)),
    },
    "conv_stack": {
        "cuda": Size({"layers": (3, 4, 6, 3), "width": 64}, (64, 3, 224, 224)),
        "cpu": Size({"layers": (1, 1), "width": 8}, (2, 3, 32, 32)),
    },
    "gemm_chain": {
        "cuda": Size({"width": 4096, "depth": 4}, (4096, 4096)),
        "cpu": Size({"width": 128, "depth": 4}, (64, 128)),
    },
}


def _token_inputs(generator: Any, dtype: Any) -> list[Inputs]:
    import torch

    calls = []
    for _ in range(2):
        ids = torch.randint(0, 1000, (8, 16), generator=generator)
        mask = (torch.rand(8, 16, generator=generator) > 0.2).to(dtype)
        calls.append(Inputs((ids, mask)))
    return calls


def _batches(generator: Any, dtype: Any) -> list[Inputs]:
    return [Inputs((_randn(generator, dtype, batch, 48),)) for batch in (8, 5, 13)]


def _shape(*shape: int) -> InputFactory:
    return lambda generator, dtype: _one(generator, dtype, *shape)


BUILTIN_SAMPLES: tuple[BuiltinSample, ...] = (
    BuiltinSample(
        "launch_bound",
        _model("LaunchBound"),
        _shape(4, 64),
        description="40 tiny elementwise ops: launch bound, where CUDA graphs win",
    ),
    BuiltinSample(
        "gemm_fp16",
        _model("GemmBlock"),
        _shape(256, 512),
        "float16",
        description="two large linear layers around GELU in fp16 (max_autotune, tma, cutlass, aten)",
    ),
    BuiltinSample(
        "gemm_bf16",
        _model("GemmBlock"),
        _shape(256, 512),
        "bfloat16",
        description="the same GEMM block in bf16",
    ),
    BuiltinSample(
        "conv_bn",
        _model("ConvBN"),
        _shape(2, 8, 16, 16),
        description="convolution + batch norm + ReLU (freezing folds the norm)",
    ),
    BuiltinSample(
        "attention",
        _model("Attention"),
        _shape(2, 32, 64),
        description="causal self-attention through scaled_dot_product_attention; returns a dict",
    ),
    BuiltinSample(
        "norm_softmax",
        _model("NormSoftmax"),
        _shape(16, 128),
        description="layer norm, softmax and log-softmax reductions; returns a list",
    ),
    BuiltinSample(
        "embedding",
        _model("EmbeddingPool"),
        _token_inputs,
        description="embedding lookup of integer ids with a mask; returns a nested tuple",
    ),
    BuiltinSample(
        "dataclass_output", _model("DataclassOutput"), _shape(16, 32), description="a classifier returning a dataclass"
    ),
    BuiltinSample(
        "buffer_mutation",
        _model("BufferMutation"),
        _shape(16, 32),
        description="a forward that updates buffers in place (running average, step counter)",
    ),
    BuiltinSample(
        "graph_break",
        _model("GraphBreak"),
        _shape(16, 32),
        description="data-dependent control flow on .item(): a graph break",
    ),
    BuiltinSample(
        "dynamic_batch", _model("DynamicBatch"), _batches, description="an MLP called with batch sizes 8, 5 and 13"
    ),
    BuiltinSample(
        "transformer_block",
        _model("TransformerBlock"),
        dtype_name="bfloat16",
        sizes=GPU_SIZED["transformer_block"],
        description="GPU-sized: a pre-norm transformer block (attention, 4x MLP)",
    ),
    BuiltinSample(
        "conv_stack",
        _model("ConvStack"),
        dtype_name="bfloat16",
        sizes=GPU_SIZED["conv_stack"],
        description="GPU-sized: ResNet-50's bottleneck layout",
    ),
    BuiltinSample(
        "gemm_chain",
        _model("GemmChain"),
        dtype_name="bfloat16",
        sizes=GPU_SIZED["gemm_chain"],
        description="GPU-sized: square linear layers with GELU between",
    ),
)


def builtin_sample(name: str) -> BuiltinSample:
    """The built-in sample called ``name``."""
    return next(sample for sample in BUILTIN_SAMPLES if sample.name == name)


def samples_table() -> str:
    """The docs' table of built-in samples (``python -m pytest_inductor_templates.samples.builtin``)."""
    rows = [
        [
            f"`{s.id}`",
            s.dtype,
            s.summary,
            f"rtol {s.tolerance.rtol:g}, atol {s.tolerance.atol:g}" if s.tolerance else "dtype default",
        ]
        for s in BUILTIN_SAMPLES
    ]
    return "\n".join(render(["sample", "dtype", "what it exercises", "own tolerance"], rows, markdown=True))


if __name__ == "__main__":
    print(samples_table())
