"""One sample in one dtype: compiled and called once (or read back from --observations), then every fault and
harmless change judged by the plugin's own check."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .changes import FAULTS, HARMLESS, fault, harmless, reductions_reversed
from .measures import beyond_eager_error, change_beyond_legit, chooses_otherwise, evidence, untrusted
from .outputs import largest_floating, leaves


def probes() -> list[Any]:
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


def build(sample_id: str, corpus: Path | None, dtype: str) -> Any:
    from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES
    from pytest_inductor_templates.samples.cast import CastSample
    from pytest_inductor_templates.samples.graphnet import GraphNetSample

    if sample_id.startswith(("builtin/", "probe/")):
        sample = next(s for s in [*BUILTIN_SAMPLES, *probes()] if s.id == sample_id)
    else:
        assert corpus is not None
        sample = GraphNetSample(corpus, sample_id.split("/", 1)[1])
    return sample if sample.dtype == dtype else CastSample(sample, dtype)


def judged(observed: Any, actual: list[Any] | None = None) -> dict[str, Any]:
    """The check's verdict on ``observed`` with the compiled outputs replaced by ``actual``."""
    import dataclasses

    from pytest_inductor_templates.check.runner import judge

    if actual is not None:
        observed = dataclasses.replace(observed, actual=actual, first_after=actual[0])
    result = judge(observed)
    return {"outcome": result.outcome.value, "rule": result.rule, "reason": result.reason}


def storable(outputs: list[Any]) -> list[Any]:
    """Outputs that ``torch.save`` can keep: as they are, or (a class defined in a function) by path."""
    import io
    import pickle

    import torch

    try:
        torch.save(outputs, io.BytesIO())
        return outputs
    except (pickle.PicklingError, AttributeError, TypeError):
        return [dict(leaves(out)) for out in outputs]


def observe(sample_id: str, corpus: Path | None, dtype: str, device_name: str) -> dict[str, Any]:
    """Compile the sample with plain Inductor and make the check's calls once: eager's, the compiled model's,
    the float64 run's, and eager's with every reduction reversed. A failure to run is an ``entry``."""
    import torch

    from pytest_inductor_templates.check.result import CheckResult
    from pytest_inductor_templates.check.runner import CheckSubject, observe
    from pytest_inductor_templates.compile.compiled import CompiledModel
    from pytest_inductor_templates.compile.isolation import isolated_compile_state
    from pytest_inductor_templates.engine.triples import call_without_grad
    from pytest_inductor_templates.templates.selection import Selection

    device = torch.device(device_name)
    started = time.perf_counter()
    try:
        sample = build(sample_id, corpus, dtype)
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
        with reductions_reversed():
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


def stored_path(keep: Path | None, sample_id: str, dtype: str, device: str) -> Path:
    return (keep or Path("/nonexistent")) / f"{sample_id.replace('/', '__')}@{dtype}@{device}.pt"


def observations(sample_id: str, corpus: Path | None, dtype: str, device: str, keep: Path | None) -> dict[str, Any]:
    """``observe``'s result, from ``keep`` when an earlier run left it there (then nothing compiles)."""
    import torch

    stored = stored_path(keep, sample_id, dtype, device) if keep else None
    if stored is not None and stored.exists():
        # a GPU's observations are judged on a machine without one on the CPU (judging copies to the CPU anyway)
        return torch.load(stored, weights_only=False, map_location=None if torch.cuda.is_available() else "cpu")
    found = observe(sample_id, corpus, dtype, device)
    if stored is not None:
        stored.parent.mkdir(parents=True, exist_ok=True)
        keys = ("expected", "actual", "float64", "tf32", "reassociated")
        kept = {k: storable(v) if k in keys and v is not None else v for k, v in found.items()}
        if "first_after" in kept:
            kept["first_after"] = storable([kept["first_after"]])[0]
        torch.save(kept, stored)
    return found


def child(sample_id: str, corpus: Path | None, dtype: str, device: str, keep: Path | None) -> dict[str, Any]:
    """Everything about one sample in one dtype: the plain verdict with its evidence, every fault, every
    harmless change."""
    from pytest_inductor_templates.check.float64 import Float64Run
    from pytest_inductor_templates.check.runner import Observed

    entry: dict[str, Any] = {"sample": sample_id, "dtype": dtype, "device": device}
    started = time.perf_counter()
    found = observations(sample_id, corpus, dtype, device, keep)
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
    entry["float64"] = found["float64_reason"] or untrusted(observed) or "ok"
    entry["target"] = largest_floating(observed)
    entry["evidence"] = evidence(observed)
    entry["faults"], entry["harmless"] = {}, {}
    for name in FAULTS:
        if name == "stale_second_call":
            actual = [observed.actual[0], *observed.actual[:-1]]
        else:
            plant = fault(name, observed)
            if plant is None:
                entry["faults"][name] = {"applicable": False, "why": "no output of that kind"}
                continue
            actual = [plant(out) for out in observed.actual]
        change = change_beyond_legit(observed.actual, actual, observed.expected, dtype)
        stands_out = beyond_eager_error(observed, actual) if change > 1 else 0.0
        entry["faults"][name] = {
            "applicable": change > 1 and stands_out > 1,
            "change": change,
            "beyond_eager_error": stands_out,
            **judged(observed, actual),
        }
    for name in HARMLESS:
        actual = harmless(name, observed, found["reassociated"])
        if actual is None:
            why = found["reassociated_reason"]
            if name == "float64_recomputed":
                why = found["float64_reason"] or untrusted(observed) or chooses_otherwise(observed)
            entry["harmless"][name] = {"applicable": False, "why": why}
            continue
        change = change_beyond_legit(observed.expected, actual, observed.expected, dtype)  # from eager
        verdict = judged(observed) if name == "plain_default" else judged(observed, actual)
        entry["harmless"][name] = {"applicable": True, "change": change, **verdict}
    entry["status"] = "ok"
    entry["seconds"] = round(time.perf_counter() - started, 1)
    return entry
