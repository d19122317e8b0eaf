"""The sample selection the speedup benchmarks share: built-ins and/or the K smallest samples of a GraphNet corpus."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_inductor_templates.samples.graphnet import discover


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--builtins", action="store_true", help="include the built-in samples")
    parser.add_argument("--corpus", type=Path, help="a GraphNet-format sample root")
    parser.add_argument("--samples", type=int, default=20, help="how many corpus samples (the smallest model.py)")
    parser.add_argument("--templates", default="default", help="templates, comma-separated (default: default)")
    parser.add_argument("--devices", default="cuda", help="--inductor-devices (default: cuda)")
    parser.add_argument("-k", dest="keyword", help="a pytest -k expression to narrow the samples")


def corpus_samples(corpus: Path, count: int) -> list[str]:
    """The ``count`` sample directories of ``corpus`` with the smallest ``model.py`` (fastest to compile),
    as paths relative to it, sorted."""
    sizes = {relative: (corpus / relative / "model.py").stat().st_size for relative in discover(corpus)}
    return sorted(sorted(sizes, key=lambda relative: (sizes[relative], relative))[:count])


def pytest_selection(args: argparse.Namespace, out: Path) -> list[str]:
    """The pytest arguments that select the samples, templates and devices (a sample list written to ``out``)."""
    if not args.builtins and args.corpus is None:
        raise SystemExit("choose samples: --builtins and/or --corpus PATH")
    selection = [f"--inductor-template={args.templates}", f"--inductor-devices={args.devices}", "-m", "inductor_sample"]
    if args.builtins:
        selection.append("--inductor-samples")
    if args.corpus is not None:
        corpus = args.corpus.resolve()
        lines = corpus_samples(corpus, args.samples)
        if args.builtins:  # a sample list filters every root: name the built-ins too
            from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES

            lines += [sample.id for sample in BUILTIN_SAMPLES]
        listed = out / "samples.txt"
        listed.write_text("\n".join(lines) + "\n")
        selection += [f"--inductor-samples={corpus}", f"--inductor-sample-list={listed}"]
    return selection + (["-k", args.keyword] if args.keyword else [])
