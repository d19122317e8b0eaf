"""Which samples a session runs: the built-ins and GraphNet-format roots, filtered by a sample list."""

from __future__ import annotations

from ..settings import BUILTIN_SAMPLES, Settings
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


def _listed_samples(settings: Settings) -> list[Sample]:
    samples: dict[str, Sample] = {}
    for value in settings.all("inductor_samples"):
        if value.value == BUILTIN_SAMPLES:
            samples.update((s.id, s) for s in BUILTINS)
            continue
        root = value.path().resolve()
        if not root.is_dir():
            raise value.usage_error(f"sample root {value.value!r} is not a directory")
        samples.update((s.id, s) for s in (GraphNetSample(root, rel) for rel in discover(root)))
    listed = settings.get("inductor_sample_list")
    if listed is None:
        return list(samples.values())
    path = listed.path()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise listed.usage_error(f"cannot read {path}: {error.strerror}") from None
    entries = [line.strip().strip("/") for line in lines if line.strip() and not line.lstrip().startswith("#")]
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
