"""Which samples a session runs: the built-ins and GraphNet-format roots, filtered by a sample list."""

from __future__ import annotations

from pathlib import Path

from ..option_table import BUILTIN_SAMPLES
from ..settings import Settings, Sourced
from .base import Sample
from .builtin import BUILTIN_SAMPLES as BUILTINS
from .cast import CastSample
from .graphnet import GraphNetSample, discover


def select_samples(settings: Settings) -> list[Sample]:
    """The samples the options ask for (cast to ``--inductor-sample-dtype``), in a stable order."""
    samples = _listed_samples(settings)
    if settings.sample_dtype is None:
        return samples
    return [CastSample(sample, settings.sample_dtype) for sample in samples]


def largest_graphs_first(samples: list[Sample]) -> list[Sample]:
    """The samples with the largest graphs first (those of unknown size last), each size in its given order: under
    pytest-xdist, whose scheduler hands samples out in this order, the longest compiles start first."""
    return sorted(samples, key=lambda sample: -(sample.graph_size or 0))


def weights_line(samples: list[Sample]) -> str | None:
    """The header's line on how the GraphNet samples' weights are passed (``--inductor-sample-weights``), or None
    when no GraphNet sample runs."""
    mode = next((mode for sample in samples if (mode := sample.weights_mode) is not None), None)
    if mode is None:
        return None
    if mode == "parameters":
        return (
            "GraphNet sample weights: parameters (the module's own parameters and buffers, as deployed; "
            "--inductor-sample-weights=inputs passes them as forward inputs, as GraphNet does)"
        )
    return (
        f"GraphNet sample weights: {mode} (forward inputs, as GraphNet runs them: freezing cannot fold them and CUDA "
        "graphs copy them on every call; the default, parameters, binds them as a deployed model holds them)"
    )


def _root_samples(value: Sourced[str], weights: str) -> list[GraphNetSample]:
    """Every sample under one root; a root that is not a directory, or holds no sample, is a usage error."""
    hint = (
        " (--inductor-samples PATH takes PATH as a sample root: for the built-in samples beside test paths, "
        "write --inductor-samples=builtin)"
        if value.from_command_line
        else ""
    )
    root = value.path().resolve()
    if not root.is_dir():
        kind = "a file" if root.is_file() else "not a directory"
        raise value.usage_error(f"sample root {value.value!r} is {kind}{hint}")
    found = [GraphNetSample(root, relative, weights) for relative in discover(root)]
    if not found:
        raise value.usage_error(f"sample root {value.value!r} holds no sample (no directory with a model.py){hint}")
    return found


def _listed_samples(settings: Settings) -> list[Sample]:
    samples: dict[str, Sample] = {}
    roots: dict[Path, Sourced[str]] = {}
    for value in settings.all("inductor_samples"):
        if value.value == BUILTIN_SAMPLES:
            samples.update((s.id, s) for s in BUILTINS)
            continue
        if value.path().resolve() in roots:  # the same root twice: its samples once
            continue
        roots[value.path().resolve()] = value
        for sample in _root_samples(value, settings.sample_weights):
            other = samples.get(sample.id)
            if other is not None:
                where = other.root if isinstance(other, GraphNetSample) else "the built-in samples"
                raise value.usage_error(
                    f"sample id {sample.id!r} is found twice, in {where} and in {sample.root}: "
                    "rename one root folder (sample ids start with the root's folder name)"
                )
            samples[sample.id] = sample
    listed = settings.get("inductor_sample_list")
    if listed is None:
        return list(samples.values())
    path = listed.path()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise listed.usage_error(f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise listed.usage_error(f"{path} is not UTF-8: {error.reason} at byte {error.start}") from None
    entries = [line.strip().strip("/") for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not entries:
        raise listed.usage_error(f"{path.name} lists no sample")
    by_entry = {}
    for sample in samples.values():
        by_entry[sample.id] = sample
        if isinstance(sample, GraphNetSample):
            by_entry[sample.relative] = sample
    unknown = [e for e in entries if e not in by_entry]
    if unknown:
        raise listed.usage_error(
            f"{path.name} lists {len(unknown)} sample(s) found under no root: {', '.join(unknown[:5])}"
        )
    return list({by_entry[e].id: by_entry[e] for e in entries}.values())
