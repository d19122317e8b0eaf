"""The built-in samples: small, deterministic models that exercise what the templates change."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..tables import render
from .base import Inputs, Sample, Tolerance, stable_seed
from .builtin_models import models

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


def _model(name: str) -> ModelFactory:
    return lambda **size: models()[name](**size)


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
