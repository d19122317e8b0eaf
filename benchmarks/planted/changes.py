"""The planted faults and the harmless changes: transforms of the compiled model's outputs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from .measures import chooses_otherwise, untrusted
from .outputs import first_of, floating, largest_floating, leaves, nudge, on_leaf, random_index, replace, seeded

FAULTS = {
    "channel_0.1%": "one channel (dim 1) of the largest output 0.1% off",
    "last_row_2%": "the last row (index -1 of dim -2) of the largest output 2% off",
    "bf16_rounding": "the largest output rounded through bfloat16",
    "element_1000ulp": "one element of the largest output 1000 units in the last place off",
    "zeroed_batch": "batch entry 0 (dim 0) of the largest output zeroed",
    "transposed": "the largest output's last two dimensions transposed (reshaped back to its shape)",
    "shifted_by_one": "the largest output rolled by one along its last dimension",
    "int_off_by_one": "one element of an integer output off by one",
    "bool_flipped": "one element of a bool output flipped",
    "stale_second_call": "call 2 returns call 1's outputs",
    "nan": "one element of the largest output NaN",
    "inf": "one element of the largest output +Inf",
}


HARMLESS = {
    "float64_recomputed": "the float64 run's outputs, rounded to the dtype",
    "relative_noise": "eager's floating outputs times (1 + U(-u, u)), u the unit roundoff (fp32 6e-8, bf16 3.9e-3)",
    "reassociated": "eager with every matmul, convolution, sum, mean, softmax and layer norm reduction reversed",
    "two_ulp": "eager's floating outputs, every element 2 units in the last place up or down at random",
    "cloned": "every output cloned",
    "plain_default": "the compiled model's outputs as they are",
}


def fault(name: str, observed: Any) -> Callable[[Any], Any] | None:
    """The output transform that plants fault ``name`` in one call's outputs (None where nothing fits)."""
    import torch

    target = largest_floating(observed)

    def channel(t: Any) -> Any:
        dim = 1 if t.dim() > 1 else 0
        index = int(torch.randint(0, t.shape[dim], (1,), generator=seeded("channel", t)))
        t.select(dim, index).mul_(1.001)
        return t

    def last_row(t: Any) -> Any:
        (t.select(-2, -1) if t.dim() > 1 else t[-1:]).mul_(1.02)
        return t

    def element(change: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def plant(t: Any) -> Any:
            flat = t.view(-1)
            index = random_index(t)
            flat[index] = change(flat[index : index + 1])[0]
            return t

        return plant

    def transposed(t: Any) -> Any:
        return t.transpose(-1, -2).reshape(t.shape) if t.dim() > 1 else t.flip(0)

    def zeroed(t: Any) -> Any:
        t[0] = 0
        return t

    plants: dict[str, Callable[[Any], Any] | None] = {
        "channel_0.1%": on_leaf(target, channel),
        "last_row_2%": on_leaf(target, last_row),
        "bf16_rounding": on_leaf(target, lambda t: t.to(torch.bfloat16).to(t.dtype)),
        "element_1000ulp": on_leaf(target, element(lambda x: nudge(x, 1000.0))),
        "zeroed_batch": on_leaf(target, zeroed),
        "transposed": on_leaf(target, transposed),
        "shifted_by_one": on_leaf(target, lambda t: t.roll(1, dims=-1) if t.dim() else t),
        "int_off_by_one": on_leaf(
            first_of(observed.actual[0], lambda t: not floating(t) and t.dtype != torch.bool and not t.is_complex()),
            element(lambda x: x + 1),
        ),
        "bool_flipped": on_leaf(first_of(observed.actual[0], lambda t: t.dtype == torch.bool), element(lambda x: ~x)),
        "nan": on_leaf(target, element(lambda x: torch.full_like(x, float("nan")))),
        "inf": on_leaf(target, element(lambda x: torch.full_like(x, float("inf")))),
    }
    return plants[name]


@contextlib.contextmanager
def reductions_reversed() -> Iterator[None]:
    """Eager with the summation order of every matmul, convolution, sum, mean, softmax and layer norm reversed:
    the same arithmetic in another order, as a legitimate kernel may do it."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten

    class Reverse(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func in (aten.mm.default, aten.bmm.default):
                return func(args[0].flip(-1), args[1].flip(-2))
            if func is aten.addmm.default:
                return func(args[0], args[1].flip(-1), args[2].flip(-2), *args[3:], **kwargs)
            if func is aten.convolution.default and not args[6] and args[8] == 1:
                return func(args[0].flip(1), args[1].flip(1), *args[2:])
            if func in (aten.sum.dim_IntList, aten.mean.dim) and args[1]:
                return func(args[0].flip(args[1]), *args[1:], **kwargs)
            if func in (aten._softmax.default, aten._log_softmax.default):
                return func(args[0].flip(args[1]), *args[1:]).flip(args[1])
            if func is aten.native_layer_norm.default:
                x, shape, weight, bias = args[:4]
                dims = list(range(x.dim() - len(shape), x.dim()))
                flip = lambda t: t.flip(list(range(t.dim()))) if t is not None else None  # noqa: E731
                out, mean, rstd = func(x.flip(dims), shape, flip(weight), flip(bias), *args[4:])
                return out.flip(dims), mean, rstd
            return func(*args, **kwargs)

    with Reverse():
        yield


def harmless(name: str, observed: Any, reassociated: list[Any] | None) -> list[Any] | None:
    """The compiled outputs of every call under harmless change ``name`` (None where it cannot be made)."""
    import torch

    def every_floating(fn: Callable[[Any], Any]) -> list[Any]:  # eager's outputs, every floating one changed
        return [replace(out, lambda p, t: fn(t) if floating(t) else t) for out in observed.expected]

    if name == "plain_default":
        return list(observed.actual)
    if name == "cloned":
        return [replace(out, lambda p, t: t.clone()) for out in observed.actual]
    if name == "relative_noise":

        def noisy(t: Any) -> Any:
            noise = torch.rand(t.shape, generator=seeded("noise", t), dtype=torch.float64).to(t.device) * 2 - 1
            return (t.double() * (1 + torch.finfo(t.dtype).eps / 2 * noise)).to(t.dtype)

        return every_floating(noisy)
    if name == "two_ulp":
        signs = lambda t: torch.randint(0, 2, t.shape, generator=seeded("ulp", t)).to(t.device) * 2.0 - 1  # noqa: E731
        return every_floating(lambda t: nudge(t, 2 * signs(t)))
    if name == "float64_recomputed":  # harmless only where the float64 run computes what eager does
        wide = observed.float64.outputs()
        if wide is None or untrusted(observed) or chooses_otherwise(observed):
            return None
        eager = [dict(leaves(out)) for out in observed.expected]

        def rounded(t: Any, e: Any) -> Any:  # float64 in eager's dtype; NaN and Inf where eager overflowed
            t = t.to(e.device, e.dtype)
            return torch.where(e.isfinite(), t, e) if floating(e) else t

        outputs = [
            replace(w, lambda p, t, e=e: rounded(t, e[p]) if p in e else t) for w, e in zip(wide, eager, strict=True)
        ]
        overflows = any(  # float64 beyond the dtype's range where eager is finite: not a harmless rounding
            floating(t) and bool((~t.isfinite() & e[p].isfinite()).any())
            for out, e in zip(outputs, eager, strict=True)
            for p, t in leaves(out)
            if p in e
        )
        return None if overflows else outputs
    if name == "reassociated":
        return reassociated
    raise KeyError(name)
