"""Planted faults and harmless changes against the plugin's checker, on the built-ins and real GraphNet samples.

Every sample is compiled once per dtype with plain Inductor (the ``default`` template), in its own process
with a time limit. The check's calls are made once (``check.runner.observe``: eager twice, compiled on two
input sets, and the float64 run); each planted fault and each harmless change is then a transform of the
compiled model's outputs, judged by the plugin's own ``check.runner.judge``, exactly as the check judges a
compiled model that returns those outputs. A fault counts where it is *applicable*: where it changed some
output element by more than the dtype's legitimate reassociation error (``LEGIT``, printed); there it must
be caught. A harmless change must pass. Plain ``default`` itself must pass, except where it is shown to be
a real miscompilation (compiled clearly farther from float64 than eager: the figures are printed).

Usage:
  python benchmarks/planted_faults.py [--corpus PATH] [--device cpu|cuda] [--dtypes float32,bfloat16]
      [--limit-seconds 900] [--samples-k EXPR] [--max-gib 8] [--shard I/N] [--budget-seconds S]
      [--observations DIR] [--done SHARD.json...]
Writes planted_faults.md and planted_faults.json (planted_faults-shardIofN.* for a shard) to $OUT (default: a
new temporary directory) and prints the summary. With --observations DIR, each sample's outputs are kept there
and a later run judges them again without compiling: shards (one per GPU) and budgeted runs fill DIR, then one
run over everything writes the whole summary. With --done, the entries of earlier runs' JSON files count as
run, but for timeouts, which run again (with --budget-seconds 0, nothing runs: the JSON files alone give the
summary).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

# A change is beyond the dtype's legitimate reassociation error where |change| > rtol * |eager| + atol * max|eager|
# (max over the output): torch.testing's per-dtype tolerances with atol scaled to the output, the first
# comparison's own rule. Reordering a reduction of n terms moves a result by about sqrt(n) units in the last
# place of its largest partial sums; the measured compiled-vs-eager and reordered-vs-eager differences (the
# summary prints their maxima) stay below this.
LEGIT = {"float32": (1.3e-6, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float16": (1e-3, 1e-5)}
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


# ----------------------------------------------------------------------------------------------- the child


def _leaves(obj: Any) -> list[tuple[str, Any]]:
    from pytest_inductor_templates.compile.outputs import leaves

    return leaves(obj)


def _replace(obj: Any, fn: Callable[[str, Any], Any]) -> Any:
    """``obj`` with every tensor leaf replaced by ``fn(path, leaf)``."""
    from pytest_inductor_templates.compile.outputs import map_tensors

    paths = {id(t): p for p, t in _leaves(obj)}
    return map_tensors(lambda t: fn(paths[id(t)], t), obj)


def _floating(t: Any) -> bool:
    return t.is_floating_point()


def _target(observed: Any) -> str | None:
    """The floating output with the most elements: where single-output faults are planted."""
    floating = [(t.numel(), p) for p, t in _leaves(observed.actual[0]) if hasattr(t, "dtype") and _floating(t)]
    return max(floating, key=lambda x: x[0])[1] if floating else None


def _first_of(obj: Any, kind: Callable[[Any], bool]) -> str | None:
    return next((p for p, t in _leaves(obj) if hasattr(t, "dtype") and kind(t) and t.numel()), None)


def _seeded(path: str, t: Any) -> Any:
    import zlib

    import torch

    return torch.Generator().manual_seed(zlib.crc32(f"{path}{list(t.shape)}".encode()))


def _random_index(t: Any) -> int:
    import torch

    return int(torch.randint(0, t.numel(), (1,), generator=_seeded("element", t)))


def _nudge(t: Any, ulps: Any) -> Any:
    """``t`` moved ``ulps`` (elementwise, any sign) units in the last place of its dtype."""
    import torch

    spacing = (torch.nextafter(t.abs(), torch.full_like(t, float("inf"))) - t.abs()).double()
    return (t.double() + ulps * spacing).to(t.dtype)


def _on_leaf(path: str | None, fn: Callable[[Any], Any]) -> Callable[[Any], Any] | None:
    if path is None:
        return None
    import torch

    fresh = lambda t: t.clone(memory_format=torch.contiguous_format)  # noqa: E731
    return lambda outputs: _replace(outputs, lambda p, t: fn(fresh(t)) if p == path else t)


def _fault(name: str, observed: Any) -> Callable[[Any], Any] | None:
    """The output transform that plants fault ``name`` in one call's outputs (None where nothing fits)."""
    import torch

    target = _target(observed)

    def channel(t: Any) -> Any:
        dim = 1 if t.dim() > 1 else 0
        index = int(torch.randint(0, t.shape[dim], (1,), generator=_seeded("channel", t)))
        t.select(dim, index).mul_(1.001)
        return t

    def last_row(t: Any) -> Any:
        (t.select(-2, -1) if t.dim() > 1 else t[-1:]).mul_(1.02)
        return t

    def element(change: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def plant(t: Any) -> Any:
            flat = t.view(-1)
            index = _random_index(t)
            flat[index] = change(flat[index : index + 1])[0]
            return t

        return plant

    def transposed(t: Any) -> Any:
        return t.transpose(-1, -2).reshape(t.shape) if t.dim() > 1 else t.flip(0)

    def zeroed(t: Any) -> Any:
        t[0] = 0
        return t

    plants: dict[str, Callable[[Any], Any] | None] = {
        "channel_0.1%": _on_leaf(target, channel),
        "last_row_2%": _on_leaf(target, last_row),
        "bf16_rounding": _on_leaf(target, lambda t: t.to(torch.bfloat16).to(t.dtype)),
        "element_1000ulp": _on_leaf(target, element(lambda x: _nudge(x, 1000.0))),
        "zeroed_batch": _on_leaf(target, zeroed),
        "transposed": _on_leaf(target, transposed),
        "shifted_by_one": _on_leaf(target, lambda t: t.roll(1, dims=-1) if t.dim() else t),
        "int_off_by_one": _on_leaf(
            _first_of(observed.actual[0], lambda t: not _floating(t) and t.dtype != torch.bool and not t.is_complex()),
            element(lambda x: x + 1),
        ),
        "bool_flipped": _on_leaf(_first_of(observed.actual[0], lambda t: t.dtype == torch.bool), element(lambda x: ~x)),
        "nan": _on_leaf(target, element(lambda x: torch.full_like(x, float("nan")))),
        "inf": _on_leaf(target, element(lambda x: torch.full_like(x, float("inf")))),
    }
    return plants[name]


@contextlib.contextmanager
def _reassociated() -> Iterator[None]:
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


def _harmless(name: str, observed: Any, reassociated: list[Any] | None) -> list[Any] | None:
    """The compiled outputs of every call under harmless change ``name`` (None where it cannot be made)."""
    import torch

    def every_floating(fn: Callable[[Any], Any]) -> list[Any]:  # eager's outputs, every floating one changed
        return [_replace(out, lambda p, t: fn(t) if _floating(t) else t) for out in observed.expected]

    if name == "plain_default":
        return list(observed.actual)
    if name == "cloned":
        return [_replace(out, lambda p, t: t.clone()) for out in observed.actual]
    if name == "relative_noise":

        def noisy(t: Any) -> Any:
            noise = torch.rand(t.shape, generator=_seeded("noise", t), dtype=torch.float64).to(t.device) * 2 - 1
            return (t.double() * (1 + torch.finfo(t.dtype).eps / 2 * noise)).to(t.dtype)

        return every_floating(noisy)
    if name == "two_ulp":
        signs = lambda t: torch.randint(0, 2, t.shape, generator=_seeded("ulp", t)).to(t.device) * 2.0 - 1  # noqa: E731
        return every_floating(lambda t: _nudge(t, 2 * signs(t)))
    if name == "float64_recomputed":  # harmless only where the float64 run computes what eager does
        wide = observed.float64.outputs()
        if wide is None or _untrusted(observed) or _chooses_otherwise(observed):
            return None
        dtypes = [dict((p, t.dtype) for p, t in _leaves(out)) for out in observed.expected]
        return [_replace(w, lambda p, t, d=d: t.to(d[p]) if p in d else t) for w, d in zip(wide, dtypes, strict=True)]
    if name == "reassociated":
        return reassociated
    raise KeyError(name)


def _untrusted(observed: Any) -> str | None:
    """Why the float64 run is no fair reference for some floating output (the second opinion's own rule), or
    None."""
    from pytest_inductor_templates.check.second_opinion import untrusted

    for call, out in enumerate(observed.expected):
        reference = observed.reference(call)
        refs, tf32s = reference.leaves or {}, reference.tf32_leaves or {}
        for path, e in _leaves(out):
            if hasattr(e, "dtype") and _floating(e) and path in refs:
                if why := untrusted(e, refs[path], reference.precision, path in tf32s):
                    return f"{path}: {why}"
    return None


def _chooses_otherwise(observed: Any) -> str | None:
    """Where the float64 run's integer or bool output differs from eager's (a near tie, in the dtype, that
    float64 decides the other way: then recomputing in float64 is no harmless change), or None."""
    import torch

    for call, (out, wide) in enumerate(zip(observed.expected, observed.float64.outputs() or [], strict=False)):
        refs = dict(_leaves(wide))
        for path, e in _leaves(out):
            if hasattr(e, "dtype") and not _floating(e) and path in refs:
                if not torch.equal(e.detach().cpu(), refs[path].detach().cpu()):
                    return f"call {call + 1} {path}: the float64 run's {e.dtype} output differs from eager's"
    return None


def _change_beyond_legit(before: list[Any], after: list[Any], expected: list[Any], dtype: str) -> float:
    """The largest change the transform made, in units of the legitimate error (> 1: beyond it); inf for a
    new NaN or Inf or any change to an integer or bool output."""
    import torch

    rtol, atol = LEGIT[dtype]
    worst = 0.0
    for b_out, a_out, e_out in zip(before, after, expected, strict=True):
        for (_, b), (_, a), (_, e) in zip(_leaves(b_out), _leaves(a_out), _leaves(e_out), strict=True):
            if not isinstance(b, torch.Tensor):
                continue
            b, a, e = b.detach().cpu(), a.detach().cpu(), e.detach().cpu()
            if a.shape != b.shape or a.dtype != b.dtype:
                return math.inf
            if not _floating(b):
                worst = max(worst, math.inf if not torch.equal(a, b) else 0.0)
                continue
            b64, a64, e64 = b.double(), a.double(), e.double()
            if not bool((b64.isnan() == a64.isnan()).all() and (b64.isinf() == a64.isinf()).all()):
                return math.inf
            finite = b64.isfinite() & a64.isfinite() & e64.isfinite()
            if not bool(finite.any()):
                continue
            scale = float(e64[finite].abs().max())
            legit = rtol * e64.abs() + max(atol * scale, torch.finfo(b.dtype).tiny)
            worst = max(worst, float(((a64 - b64).abs() / legit)[finite].max()))
    return worst


def _beyond_eager_error(observed: Any, after: list[Any]) -> float:
    """How far the change stands out from eager's own rounding error, in units of what the second opinion
    allows (> 1: it does): the largest, over every floating output, of the change's RMSE over the output, its
    worst element, and its RMSE over every slice along every dimension, each divided by 3x eager's own
    distance from float64 in the same place (plus one unit roundoff of the values there). Eager's distance is
    the second opinion's own (``eager_error``): on CUDA, where a convolution or GEMM runs under its TF32 flag,
    at least TF32 rounding's. Where float64 is missing or untrusted, inf: only the legitimate error decides."""
    import torch

    from pytest_inductor_templates.check.second_opinion import (
        MIN_SLICE,
        SLICE_FACTOR,
        SLICE_QUANTILE,
        eager_error,
        untrusted,
    )

    if observed.float64.outputs() is None:
        return math.inf
    worst = 0.0
    for call, (before_out, after_out, e_out) in enumerate(zip(observed.actual, after, observed.expected, strict=True)):
        reference = observed.reference(call)
        refs, tf32s = reference.leaves or {}, reference.tf32_leaves or {}
        for (path, b), (_, a), (_, e) in zip(_leaves(before_out), _leaves(after_out), _leaves(e_out), strict=True):
            if not hasattr(b, "dtype") or (a.shape == b.shape and torch.equal(a, b)):
                continue
            if not _floating(b):
                return math.inf  # an integer or bool changed: no rounding excuses it
            ref, tf32 = refs.get(path), tf32s.get(path)
            if ref is None or a.shape != b.shape or untrusted(e, ref, reference.precision, tf32 is not None):
                return math.inf
            b64, a64, e64 = (t.detach().cpu().double() for t in (b, a, e))
            finite = b64.isfinite() & a64.isfinite() & e64.isfinite()
            if not bool((a64.isfinite() == b64.isfinite()).all()):
                return math.inf
            zero = torch.zeros((), dtype=torch.float64)
            change = torch.where(finite, (a64 - b64).abs(), zero)
            own = torch.where(finite, eager_error(e, ref, tf32), zero)
            values = torch.where(finite, e64.abs(), zero)
            roundoff = torch.finfo(e.dtype).eps / 2
            rms = lambda t, dims=None: t.pow(2).mean(dim=dims).sqrt()  # noqa: E731
            ratios = [
                rms(change) / (SLICE_FACTOR * rms(own) + roundoff * rms(values)),
                change.max() / (SLICE_FACTOR * own.max() + roundoff * values.max()),
            ]
            for dim, size in enumerate(change.shape):
                if change.dim() > 1 and size > 1 and change.numel() // size >= MIN_SLICE:
                    others = [d for d in range(change.dim()) if d != dim]
                    slices = rms(own, others)
                    slices = slices.clamp(min=float(slices.float().quantile(SLICE_QUANTILE)))
                    ratio = rms(change, others) / (SLICE_FACTOR * slices + roundoff * rms(values, others))
                    ratios.append(ratio.max())
            worst = max(worst, *(float(r) for r in ratios))
    return worst


def _evidence(observed: Any) -> list[dict[str, Any]]:
    """Per floating output of each call: its scale, compiled-vs-eager difference, and both sides' distance to
    float64 (RMSE and worst element)."""
    from pytest_inductor_templates.check.second_opinion import untrusted

    wide = observed.float64.outputs()
    rows = []
    for call, (a_out, e_out) in enumerate(zip(observed.actual, observed.expected, strict=True)):
        refs = dict(_leaves(wide[call])) if wide is not None else {}
        for (path, a), (_, e) in zip(_leaves(a_out), _leaves(e_out), strict=True):
            if not hasattr(e, "dtype") or not _floating(e):
                continue
            a64, e64 = a.detach().cpu().double(), e.detach().cpu().double()
            finite = a64.isfinite() & e64.isfinite()
            scale = float(e64[finite].abs().max()) if bool(finite.any()) else 0.0
            row: dict[str, Any] = {
                "call": call + 1,
                "output": path,
                "max_abs_eager": scale,
                "compiled_vs_eager_worst": float((a64 - e64)[finite].abs().max()) if bool(finite.any()) else 0.0,
            }
            ref = refs.get(path)
            if ref is not None and ref.shape == e.shape:
                r64 = ref.detach().cpu().double()
                both = finite & r64.isfinite()
                for side, t in (("compiled", a64), ("eager", e64)):
                    diff = (t - r64)[both]
                    row[f"{side}_vs_float64_rmse"] = float(diff.pow(2).mean().sqrt()) if diff.numel() else 0.0
                    row[f"{side}_vs_float64_worst"] = float(diff.abs().max()) if diff.numel() else 0.0
                row["float64_untrusted"] = untrusted(e, ref)
            rows.append(row)
    return rows


def _probes() -> list[Any]:
    """The benchmark's own samples: no built-in, and few captured graphs, return integers or bools."""
    import dataclasses

    import torch

    from pytest_inductor_templates.check.inputs import Inputs
    from pytest_inductor_templates.samples.builtin import BuiltinSample

    class TopK(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(64, 32)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            scores = self.proj(x)
            values, indices = scores.topk(4, dim=-1)
            return values, indices, scores > 0

    @dataclasses.dataclass(frozen=True, eq=False)
    class Probe(BuiltinSample):
        @property
        def id(self) -> str:  # type: ignore[override]
            return f"probe/{self.name}"

    def inputs(generator: Any, dtype: Any) -> list[Inputs]:
        return [Inputs((torch.randn(16, 64, generator=generator).to(dtype),)) for _ in range(2)]

    return [Probe("topk_mask", TopK, inputs, description="top-4 scores, their integer indices, a bool mask")]


def _build(sample_id: str, corpus: Path | None, dtype: str) -> Any:
    from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES
    from pytest_inductor_templates.samples.cast import CastSample
    from pytest_inductor_templates.samples.graphnet import GraphNetSample

    if sample_id.startswith(("builtin/", "probe/")):
        sample = next(s for s in [*BUILTIN_SAMPLES, *_probes()] if s.id == sample_id)
    else:
        assert corpus is not None
        sample = GraphNetSample(corpus, sample_id.split("/", 1)[1])
    return sample if sample.dtype == dtype else CastSample(sample, dtype)


def _judged(observed: Any, actual: list[Any] | None = None) -> dict[str, Any]:
    """The check's verdict on ``observed`` with the compiled outputs replaced by ``actual``."""
    import dataclasses

    from pytest_inductor_templates.check.runner import judge

    if actual is not None:
        observed = dataclasses.replace(observed, actual=actual, first_after=actual[0])
    result = judge(observed)
    return {"outcome": result.outcome.value, "rule": result.rule, "reason": result.reason}


def _storable(outputs: list[Any]) -> list[Any]:
    """Outputs that ``torch.save`` can keep: as they are, or (a class defined in a function) by path."""
    import io
    import pickle

    import torch

    try:
        torch.save(outputs, io.BytesIO())
        return outputs
    except (pickle.PicklingError, AttributeError, TypeError):
        return [dict(_leaves(out)) for out in outputs]


def _observe(sample_id: str, corpus: Path | None, dtype: str, device_name: str) -> dict[str, Any]:
    """Compile the sample with plain Inductor and make the check's calls once: eager's, the compiled model's,
    the float64 run's, and eager's with every reduction reversed. A failure to run is an ``entry``."""
    import torch

    from pytest_inductor_templates.check.outcomes import CheckResult
    from pytest_inductor_templates.check.runner import CheckSubject, observe
    from pytest_inductor_templates.compile.compiled import CompiledModel
    from pytest_inductor_templates.compile.isolation import isolated_compile_state
    from pytest_inductor_templates.samples.triples import call_without_grad
    from pytest_inductor_templates.templates.selection import Selection

    device = torch.device(device_name)
    started = time.perf_counter()
    try:
        sample = _build(sample_id, corpus, dtype)
        inputs = sample.make_inputs(device)
        model = sample.make_model(device)
    except Exception as error:
        return {"entry": {"status": "broken", "reason": f"{type(error).__name__}: {error}"[:300]}}
    with isolated_compile_state() as watcher:
        subject = CheckSubject(
            lambda: sample.make_model(device),
            CompiledModel(model, Selection(), watcher),
            inputs,
            call=call_without_grad,
        )
        observed = observe(subject)
    if isinstance(observed, CheckResult):
        return {"entry": {"status": observed.outcome.value, "reason": observed.reason[:300]}}
    seconds = round(time.perf_counter() - started, 1)
    wide = observed.float64.outputs()
    try:
        model = subject.make_eager()
        with _reassociated():
            reassociated, why = [call_without_grad(model, x) for x in inputs], None
    except Exception as error:
        reassociated, why = None, f"{type(error).__name__}: {error}"[:200]
    return {
        "expected": observed.expected,
        "actual": observed.actual,
        "first_after": observed.first_after,
        "float64": wide,
        "float64_reason": observed.float64.reason,
        "float64_ops": sorted(observed.float64.ops),  # the TF32 rule reads them
        "float64_dtypes": sorted(str(d).removeprefix("torch.") for d in observed.float64.dtypes),  # the trust rule
        "tf32": observed.tf32.outputs() if observed.tf32 is not None else None,  # float32 on CUDA with TF32 allowed
        "reassociated": reassociated,
        "reassociated_reason": why,
        "compile_and_calls_seconds": seconds,
    }


def _stored(keep: Path | None, sample_id: str, dtype: str, device: str) -> Path:
    return (keep or Path("/nonexistent")) / f"{sample_id.replace('/', '__')}@{dtype}@{device}.pt"


def _observations(sample_id: str, corpus: Path | None, dtype: str, device: str, keep: Path | None) -> dict[str, Any]:
    """``_observe``'s result, from ``keep`` when an earlier run left it there (then nothing compiles)."""
    import torch

    stored = _stored(keep, sample_id, dtype, device) if keep else None
    if stored is not None and stored.exists():
        return torch.load(stored, weights_only=False)
    found = _observe(sample_id, corpus, dtype, device)
    if stored is not None:
        stored.parent.mkdir(parents=True, exist_ok=True)
        keys = ("expected", "actual", "float64", "tf32", "reassociated")
        kept = {k: _storable(v) if k in keys and v is not None else v for k, v in found.items()}
        if "first_after" in kept:
            kept["first_after"] = _storable([kept["first_after"]])[0]
        torch.save(kept, stored)
    return found


def child(sample_id: str, corpus: Path | None, dtype: str, device: str, keep: Path | None) -> dict[str, Any]:
    """Everything about one sample in one dtype: the plain verdict with its evidence, every fault, every
    harmless change."""
    from pytest_inductor_templates.check.float64 import Float64Run
    from pytest_inductor_templates.check.runner import Observed

    entry: dict[str, Any] = {"sample": sample_id, "dtype": dtype, "device": device}
    started = time.perf_counter()
    found = _observations(sample_id, corpus, dtype, device, keep)
    if "entry" in found:
        return {**entry, **found["entry"]}
    import torch

    float64 = Float64Run.of(found["float64"], found["float64_reason"])
    float64.ops.update(found.get("float64_ops", ()))  # observations kept before these were: the sample's dtype
    float64.dtypes.update(getattr(torch, name) for name in found.get("float64_dtypes", [dtype]))
    observed = Observed(
        found["expected"],
        found["actual"],
        found["first_after"],
        float64,
        Float64Run.of(found["tf32"]) if found.get("tf32") is not None else None,
    )
    entry["compile_and_calls_seconds"] = found["compile_and_calls_seconds"]
    entry["float64"] = found["float64_reason"] or _untrusted(observed) or "ok"
    entry["target"] = _target(observed)
    entry["evidence"] = _evidence(observed)
    entry["faults"], entry["harmless"] = {}, {}
    for name in FAULTS:
        if name == "stale_second_call":
            actual = [observed.actual[0], *observed.actual[:-1]]
        else:
            plant = _fault(name, observed)
            if plant is None:
                entry["faults"][name] = {"applicable": False, "why": "no output of that kind"}
                continue
            actual = [plant(out) for out in observed.actual]
        change = _change_beyond_legit(observed.actual, actual, observed.expected, dtype)
        stands_out = _beyond_eager_error(observed, actual) if change > 1 else 0.0
        entry["faults"][name] = {
            "applicable": change > 1 and stands_out > 1,
            "change": change,
            "beyond_eager_error": stands_out,
            **_judged(observed, actual),
        }
    for name in HARMLESS:
        actual = _harmless(name, observed, found["reassociated"])
        if actual is None:
            why = found["reassociated_reason"]
            if name == "float64_recomputed":
                why = found["float64_reason"] or _untrusted(observed) or _chooses_otherwise(observed)
            entry["harmless"][name] = {"applicable": False, "why": why}
            continue
        change = _change_beyond_legit(observed.expected, actual, observed.expected, dtype)  # from eager
        verdict = _judged(observed) if name == "plain_default" else _judged(observed, actual)
        entry["harmless"][name] = {"applicable": True, "change": change, **verdict}
    entry["status"] = "ok"
    entry["seconds"] = round(time.perf_counter() - started, 1)
    return entry


# ---------------------------------------------------------------------------------------------- the parent


def _sample_ids(corpus: Path | None, expression: str | None) -> list[str]:
    from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES
    from pytest_inductor_templates.samples.graphnet import discover

    ids = [s.id for s in [*BUILTIN_SAMPLES, *_probes()]]
    if corpus is not None:
        ids += [f"{corpus.name}/{relative}" if relative != "." else corpus.name for relative in discover(corpus)]
    if expression:
        from _pytest.mark.expression import Expression

        compiled = Expression.compile(expression)
        ids = [i for i in ids if compiled.evaluate(lambda word, i=i: word in i)]
    return ids


def _weight_gib(sample_id: str, corpus: Path | None) -> float:
    """The sample's tensors in float64, in GiB (from the metadata, without building anything)."""
    if sample_id.startswith(("builtin/", "probe/")) or corpus is None:
        return 0.0
    from pytest_inductor_templates.samples.graphnet import GraphNetSample

    try:
        metas = GraphNetSample(corpus, sample_id.split("/", 1)[1]).metas
    except Exception:
        return 0.0
    return sum(math.prod(m.shape) for m in metas) * 8 / 2**30


def _run_child(sample_id: str, dtype: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """``child`` in a fresh process under the time limit: a crash or a hang ends that sample alone."""
    out = work / f"entry-{abs(hash((sample_id, dtype)))}.json"
    command = [
        sys.executable,
        __file__,
        "--child",
        sample_id,
        "--dtypes",
        dtype,
        "--device",
        args.device,
        "--entry-file",
        str(out),
    ]
    if args.corpus:
        command += ["--corpus", str(args.corpus)]
    if args.observations:
        command += ["--observations", str(args.observations)]
    base = {"sample": sample_id, "dtype": dtype, "device": args.device}
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=args.limit_seconds, check=False)
    except subprocess.TimeoutExpired:
        return {**base, "status": "timeout", "reason": f"over --limit-seconds {args.limit_seconds}"}
    if run.returncode != 0 or not out.exists():
        tail = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return {**base, "status": "crashed", "reason": f"exit code {run.returncode}: {tail}"[:300]}
    return json.loads(out.read_text())


def _fault_rows(ok: list[dict[str, Any]]) -> list[str]:
    lines = [f"  {'fault':18s} {'caught/applicable':>17s} {'hidden':>6s}  missed on (rule, change in legit units)"]
    for name in FAULTS:
        results = [(e, e["faults"][name]) for e in ok]
        applicable = [(e, r) for e, r in results if r.get("applicable")]
        hidden = [r for _, r in results if r.get("change", 0) > 1 and not r.get("applicable")]
        missed = [(e, r) for e, r in applicable if r["outcome"] == "pass"]
        shown = "; ".join(f"{e['sample']} ({r['rule']}, {r['change']:.3g})" for e, r in missed[:5])
        caught = f"{len(applicable) - len(missed)}/{len(applicable)}"
        lines.append(f"  {name:18s} {caught:>17s} {len(hidden):>6d}  {shown}")
    return lines


def _harmless_rows(ok: list[dict[str, Any]]) -> list[str]:
    lines = [f"  {'harmless change':18s} {'false alarms':>17s} {'max change':>10s}  on (rule)"]
    for name in HARMLESS:
        applicable = [e for e in ok if e["harmless"].get(name, {}).get("applicable")]
        alarms = [e for e in applicable if e["harmless"][name]["outcome"] != "pass"]
        largest = max((e["harmless"][name]["change"] for e in applicable), default=0.0)
        shown = "; ".join(f"{e['sample']} ({e['harmless'][name]['rule']})" for e in alarms[:5])
        lines.append(f"  {name:18s} {f'{len(alarms)}/{len(applicable)}':>17s} {largest:>10.3g}  {shown}")
    return lines


def _plain_rows(ok: list[dict[str, Any]]) -> list[str]:
    rules: dict[str, int] = {}
    for e in ok:
        plain = e["harmless"]["plain_default"]
        if plain["outcome"] == "pass":
            rules[plain["rule"]] = rules.get(plain["rule"], 0) + 1
    by_rule = ", ".join(f"{rule}: {n}" for rule, n in rules.items())
    lines = [f"  plain default: {sum(rules.values())}/{len(ok)} pass ({by_rule})"]
    for e in ok:
        plain = e["harmless"]["plain_default"]
        if plain["outcome"] == "pass":
            continue
        lines.append(f"  FAIL {e['sample']}: {plain['rule']}: {plain['reason'][:300]}")
        for row in e["evidence"]:
            if "compiled_vs_float64_rmse" in row:
                lines.append(
                    f"    call {row['call']} {row['output']}: max|eager| {row['max_abs_eager']:.3g}; against float64, "
                    f"compiled vs eager: RMSE {row['compiled_vs_float64_rmse']:.3g} vs "
                    f"{row['eager_vs_float64_rmse']:.3g}, worst {row['compiled_vs_float64_worst']:.3g} vs "
                    f"{row['eager_vs_float64_worst']:.3g}"
                )
    return lines


def _float64_rows(ok: list[dict[str, Any]]) -> list[str]:
    fine = sum(e["float64"] == "ok" for e in ok)
    lines = [f"  float64 run: a trusted second opinion on {fine}/{len(ok)}"]
    lines += [f"    {e['sample']}: {e['float64'][:200]}" for e in ok if e["float64"] != "ok"]
    return lines


def summarize(entries: list[dict[str, Any]], header: str) -> str:
    """The tables: caught/applicable per fault, false alarms per harmless change, plain default's failures."""
    lines = [header, "", "Legitimate reassociation error: a fault is applicable where it changes some element by more"]
    for dtype, (rtol, atol) in LEGIT.items():
        lines.append(
            f"  {dtype}: {rtol:g} x |eager| + {atol:g} x max|eager| of the output (at least its smallest normal)"
        )
    lines += [
        "and where the change stands out of eager's own error against float64 (more than 3x it, in the output's",
        "RMSE, its worst element or a slice); 'hidden' counts faults beyond the first bound but not the second.",
        "On CUDA, where the model runs a convolution or GEMM under its TF32 flag (cuDNN's is on by default),",
        "float32 is computed in TF32 there: eager's error then counts as at least TF32 rounding's (the float64 run",
        "from TF32-rounded inputs and weights), as in the second opinion, and faults within it are 'hidden'.",
        "'max change' is the largest distance from eager, in units of the legitimate error.",
    ]
    for dtype in dict.fromkeys(e["dtype"] for e in entries):
        rows = [e for e in entries if e["dtype"] == dtype]
        ok = [e for e in rows if e["status"] == "ok"]
        lines += ["", f"## {dtype} on {rows[0]['device']}: {len(rows)} samples, {len(ok)} compiled and ran", ""]
        lines += [f"  not run: {e['sample']}: {e['status']}: {e.get('reason', '')[:160]}" for e in rows if e not in ok]
        lines += ["", *_fault_rows(ok), "", *_harmless_rows(ok), "", *_plain_rows(ok), "", *_float64_rows(ok)]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, help="a GraphNet-format sample root (the built-ins always run)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--limit-seconds", type=int, default=900, help="per sample and dtype")
    parser.add_argument("--samples-k", help="a pytest -k style expression over sample ids")
    parser.add_argument("--max-gib", type=float, default=8.0, help="skip samples whose tensors take more in float64")
    parser.add_argument("--shard", default="1/1", help="I/N: run every Nth sample from the I-th (1-based)")
    parser.add_argument(
        "--budget-seconds",
        type=float,
        help="compile no sample after this long (0: only judge what --observations holds); summarize what ran",
    )
    parser.add_argument(
        "--observations",
        type=Path,
        help="keep each sample's outputs here; a later run judges them again without compiling",
    )
    parser.add_argument(
        "--done",
        type=Path,
        nargs="+",
        default=[],
        help="planted_faults JSON files of earlier runs (shards): their entries count here and are not run again "
        "(but for those that timed out)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--entry-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        entry = child(args.child, args.corpus, args.dtypes, args.device, args.observations)
        args.entry_file.write_text(json.dumps(entry))
        return 0
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="planted_faults-"))
    out.mkdir(parents=True, exist_ok=True)
    ids = _sample_ids(args.corpus, args.samples_k)
    import torch

    done_runs = [json.loads(path.read_text()) for path in args.done]
    retried = "timeout" if args.budget_seconds != 0 else None  # a run that may compile tries timeouts again
    done = {(e["sample"], e["dtype"]): e for run in done_runs for e in run["entries"] if e["status"] != retried}
    machine = f"planted_faults: {datetime.date.today()}, torch {torch.__version__}, device {args.device}" + (
        f" ({torch.cuda.get_device_name()})"
        if args.device == "cuda"
        else f" ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"
    )
    if done_runs and done_runs[0].get("header"):  # the machine that ran them
        machine = done_runs[0]["header"].split("; ")[0].rsplit(", ", 1)[0]
    header = f"{machine}, {len(ids)} samples"
    entries: list[dict[str, Any]] = []
    sizes = {sample_id: _weight_gib(sample_id, args.corpus) for sample_id in ids}
    index, count = (int(n) for n in args.shard.split("/"))
    mine = sorted(ids, key=lambda i: sizes[i])[index - 1 :: count]  # the cheap ones first
    name = "planted_faults" if count == 1 else f"planted_faults-shard{index}of{count}"
    deadline = time.monotonic() + args.budget_seconds if args.budget_seconds is not None else math.inf
    with tempfile.TemporaryDirectory() as work:
        for sample_id in mine:
            for dtype in args.dtypes.split(","):
                if (sample_id, dtype) in done:
                    entry = done[sample_id, dtype]
                elif sizes[sample_id] > args.max_gib:
                    why = f"its tensors take {sizes[sample_id]:.1f} GiB in float64 (--max-gib {args.max_gib:g})"
                    entry = {"sample": sample_id, "dtype": dtype, "device": args.device, "status": "skipped"}
                    entry["reason"] = why
                elif _stored(args.observations, sample_id, dtype, args.device).exists():
                    entry = child(sample_id, args.corpus, dtype, args.device, args.observations)  # nothing compiles
                elif time.monotonic() > deadline:
                    continue  # left for a later run
                else:
                    started = time.perf_counter()
                    entry = _run_child(sample_id, dtype, args, Path(work))
                    entry.setdefault("seconds", round(time.perf_counter() - started, 1))
                entries.append(entry)
                print(f"{dtype} {sample_id}: {entry['status']} {entry.get('seconds', '')}s", flush=True)
                document = {"header": header, "legit": LEGIT, "faults": FAULTS, "harmless": HARMLESS}
                (out / f"{name}.json").write_text(json.dumps({**document, "entries": entries}, indent=1))
    left = len(mine) * len(args.dtypes.split(",")) - len(entries)
    summary = summarize(entries, header + (f"; {left} left for a later run (--budget-seconds)" if left else ""))
    (out / f"{name}.md").write_text(summary + "\n")
    print(summary)
    print(f"\nwritten: {out / f'{name}.md'}, {out / f'{name}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
