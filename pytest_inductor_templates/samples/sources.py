"""Which samples a session runs: the built-ins and GraphNet-format roots, filtered by a sample list."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..options import Sourced, effective
from .base import Sample
from .builtin import BUILTIN_SAMPLES
from .cast import CastSample
from .graphnet import GraphNetSample, discover

BUILTIN = "builtin"
DTYPES = ("float16", "bfloat16", "float32", "float64")


def _roots(config: pytest.Config) -> list[Sourced[str]]:
    cli = config.getoption("inductor_samples")
    if cli is not None:
        return [Sourced(v, "--inductor-samples", "inductor_samples", True, config.inipath) for v in cli]
    ini = config.getini("inductor_samples") or []
    return [Sourced(v, "--inductor-samples", "inductor_samples", False, config.inipath) for v in ini]


def _base(config: pytest.Config, value: Sourced[str]) -> Path:
    if value.from_command_line or config.inipath is None:
        return config.invocation_params.dir
    return config.inipath.parent


def _sample_list(config: pytest.Config) -> tuple[Sourced[str], Path, list[str]] | None:
    cli = config.getoption("inductor_sample_list")
    raw = cli if cli is not None else (config.getini("inductor_sample_list") or None)
    if raw is None:
        return None
    value = Sourced(raw, "--inductor-sample-list", "inductor_sample_list", cli is not None, config.inipath)
    path = _base(config, value) / raw
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise pytest.UsageError(f"{value.origin}: cannot read {path}: {error.strerror}") from None
    entries = [line.strip().strip("/") for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return value, path, entries


def select_samples(config: pytest.Config) -> list[Sample]:
    """The samples the options ask for (cast to ``--inductor-sample-dtype``), in a stable order."""
    samples = _listed_samples(config)
    raw = effective(config, "--inductor-sample-dtype", "inductor_sample_dtype")
    if raw is None:
        return samples
    if raw.value not in DTYPES:
        raise pytest.UsageError(f"{raw.origin}: expected one of {', '.join(DTYPES)}, got {raw.value!r}")
    return [CastSample(sample, raw.value) for sample in samples]


def _listed_samples(config: pytest.Config) -> list[Sample]:
    samples: dict[str, Sample] = {}
    for value in _roots(config):
        if value.value == BUILTIN:
            samples.update((s.id, s) for s in BUILTIN_SAMPLES)
            continue
        root = (_base(config, value) / value.value).resolve()
        if not root.is_dir():
            raise pytest.UsageError(f"{value.origin}: sample root {value.value!r} is not a directory")
        samples.update((s.id, s) for s in (GraphNetSample(root, rel) for rel in discover(root)))
    listed = _sample_list(config)
    if listed is None:
        return list(samples.values())
    value, path, entries = listed
    by_entry = {}
    for sample in samples.values():
        by_entry[sample.id] = sample
        if isinstance(sample, GraphNetSample):
            by_entry[sample.relative] = sample
    unknown = [e for e in entries if e not in by_entry]
    if unknown:
        raise pytest.UsageError(
            f"{value.origin}: {path.name} lists {len(unknown)} sample(s) found under no root: {', '.join(unknown[:5])}"
        )
    return list({by_entry[e].id: by_entry[e] for e in entries}.values())
