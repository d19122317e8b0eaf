"""The float64 reference: the eager model run again with every floating tensor and dtype widened to float64.

Casting the model and its inputs is not enough for captured graphs, which hard-code dtypes
(``.to(torch.float32)``, ``torch.zeros(..., dtype=torch.float16)``): a dispatch mode widens every
lower-precision floating tensor and dtype argument of every operator, and the default dtype is float64
for the run. The result may still be a different program (a mask compared with ``==``, an integer cast,
a data-dependent branch); the second opinion checks that it is close to eager before trusting it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..compile.failures import first_line
from ..compile.outputs import map_tensors
from .inputs import Inputs
from .tolerances import machine_epsilon

TF32_EPSILON = 2.0**-10  # TF32's machine epsilon: 10 explicit mantissa bits


def round_to_tf32(t: Any) -> Any:
    """``t`` (float64) rounded to TF32's precision: 10 explicit mantissa bits, round to nearest."""
    import torch

    mantissa, exponent = torch.frexp(t)  # mantissa in [0.5, 1): 11 significant bits are TF32's 1 + 10
    return torch.ldexp(torch.round(mantissa * 2048) / 2048, exponent)


GEMMS = frozenset({"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_scaled_mm"})
CONVOLUTIONS = frozenset({"convolution", "_convolution", "cudnn_convolution", "cudnn_convolution_transpose"})


def narrowest(dtypes: set[Any]) -> Any:
    """The least precise of some floating dtypes (the largest machine epsilon), or None."""
    return max(dtypes, key=machine_epsilon, default=None)


def tf32_enabled() -> bool:
    """Whether CUDA may run float32 matmuls or convolutions in TF32 (10-bit mantissa) right now."""
    import torch

    return bool(torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32)


def tf32_applies(ops: set[str]) -> bool:
    """Whether a model that ran ``ops`` (aten operator names) runs any of them in TF32 under today's flags:
    a GEMM with ``torch.backends.cuda.matmul.allow_tf32``, a convolution with ``torch.backends.cudnn.allow_tf32``
    (on by default). A model with neither runs in plain float32, and its check gets no TF32 allowance."""
    import torch

    return bool(
        (torch.backends.cuda.matmul.allow_tf32 and ops & GEMMS)
        or (torch.backends.cudnn.allow_tf32 and ops & CONVOLUTIONS)
    )


def _wide_dtype(dtype: Any) -> Any:
    import torch

    if dtype in (torch.float16, torch.bfloat16, torch.float32):
        return torch.float64
    if dtype in (torch.complex32, torch.complex64):
        return torch.complex128
    return dtype


def widen(t: Any, tf32: bool = False) -> Any:
    """A floating or complex tensor in double precision (rounded to TF32 first with ``tf32``); others as they are."""
    wide = t.to(_wide_dtype(t.dtype)) if t.dtype != _wide_dtype(t.dtype) else t
    return round_to_tf32(wide) if tf32 and wide.is_floating_point() else wide


@contextlib.contextmanager
def widened(ops: set[str] | None = None) -> Iterator[None]:
    """Run eager code in float64: every operator's lower-precision floating tensors and dtype arguments are
    widened (except a tensor the operator writes into), and the default dtype is float64. The name of every
    aten operator that runs is added to ``ops``."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_map

    def widen_argument(value: Any) -> Any:
        if isinstance(value, torch.dtype):
            return _wide_dtype(value)
        if isinstance(value, torch.Tensor) and value.dtype != _wide_dtype(value.dtype):
            return value.to(_wide_dtype(value.dtype))
        return value

    class Widen(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if ops is not None:
                ops.add(func.overloadpacket.__name__)
            written = {a.name for a in func._schema.arguments if a.alias_info is not None and a.alias_info.is_write}
            names = [a.name for a in func._schema.arguments]
            args = tuple(
                a if i < len(names) and names[i] in written else tree_map(widen_argument, a) for i, a in enumerate(args)
            )
            kwargs = {k: v if k in written else tree_map(widen_argument, v) for k, v in (kwargs or {}).items()}
            return func(*args, **kwargs)

    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with Widen():
            yield
    finally:
        torch.set_default_dtype(default)


@dataclass
class Float64Run:
    """The float64 outputs of every input set, computed on first request, or the reason there are none."""

    run: Callable[[], list[Any]]
    ops: set[str] = field(default_factory=set)  # the aten operators the run called (filled as it runs)
    dtypes: set[Any] = field(default_factory=set)  # the floating dtypes of eager's inputs, parameters and buffers
    _outputs: list[Any] | None = field(default=None, init=False)
    _reason: str | None = field(default=None, init=False)

    def outputs(self) -> list[Any] | None:
        """The outputs per input set, or None (then ``reason`` says why)."""
        if self._outputs is None and self._reason is None:
            try:
                self._outputs = self.run()
            except Exception as error:  # the model cannot run in float64: the first comparison alone decides
                self._reason = f"the float64 run raised {first_line(error)}"
        return self._outputs

    @property
    def reason(self) -> str | None:
        return self._reason

    @classmethod
    def of(cls, outputs: list[Any] | None, reason: str | None = None) -> Float64Run:
        """A run already done (``outputs``), or one that could not be done (``reason``)."""
        done = cls(lambda: [])
        done._outputs, done._reason = outputs, reason
        return done


def float64_run(
    make_eager: Callable[[], Any], call: Callable[[Any, Inputs], Any], inputs: list[Inputs], tf32: bool = False
) -> Float64Run:
    """The float64 run of a fresh eager model on every input set, in order (state carries from call to call
    as it does for eager). With ``tf32``, inputs, parameters and buffers are rounded to TF32 first: the
    result is what a TF32 kernel is allowed to compute."""
    import torch

    ops: set[str] = set()
    dtypes: set[Any] = set()

    def run() -> list[Any]:
        model = make_eager()
        tensors: list[Any] = []
        for x in inputs:
            map_tensors(tensors.append, (x.args, x.kwargs))
        if isinstance(model, torch.nn.Module):
            tensors += [*model.parameters(), *model.buffers()]
        dtypes.update(t.dtype for t in tensors if t.is_floating_point())
        if isinstance(model, torch.nn.Module):
            model = model.to(torch.float64)
            if tf32:
                with torch.no_grad():
                    for tensor in [*model.parameters(), *model.buffers()]:
                        if tensor.is_floating_point():
                            tensor.copy_(round_to_tf32(tensor))
        wide = [
            Inputs(map_tensors(lambda t: widen(t, tf32), x.args), map_tensors(lambda t: widen(t, tf32), x.kwargs))
            for x in inputs
        ]
        outputs = []
        for x in wide:  # each output copied as returned: a model may return its own state, which the next call changes
            with widened(ops):
                out = call(model, x)
            outputs.append(map_tensors(lambda t: t.detach().clone(), out))
        return outputs

    return Float64Run(run, ops, dtypes)
