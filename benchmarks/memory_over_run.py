"""GPU memory over a long matrix run: is it flat once each triple's compiled model is released?

Runs the built-in samples plus two synthetic GraphNet samples under the given templates on CUDA
(check and bench items, benchmarks disabled so each bench item runs once), and records
``torch.cuda.memory_allocated()`` after every item and the peak within every triple. The samples run in
this process (``--inductor-isolation=none``), where the probe can see their memory; in the worker process
the check records' ``cuda_mib`` carries the same figure (``benchmarks/corpus_results.py`` reports it).
Usage (on a GPU machine):
    python benchmarks/memory_over_run.py [TEMPLATES] [--synthetic N] [extra pytest args]
(N synthetic GraphNet samples beside the built-ins, default 2.)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from graphnet_tree import write_sample

MiB = 1024 * 1024


class MemoryProbe:
    def __init__(self) -> None:
        self.after_release: list[tuple[str, float, float]] = []
        self.items = 0
        self.triple_peak = 0.0

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        self.items += 1
        self.triple_peak = max(self.triple_peak, torch.cuda.max_memory_allocated() / MiB)
        props = dict(item.user_properties)
        following = dict(nextitem.user_properties) if nextitem else {}
        key = (props.get("inductor_sample"), props.get("inductor_template"))
        if key != (following.get("inductor_sample"), following.get("inductor_template")):
            row = (f"{key[0]}[{key[1]}]", torch.cuda.memory_allocated() / MiB, self.triple_peak)
            self.after_release.append(row)
            print(
                f"\nMEM item {self.items}: {row[0]} after release {row[1]:.1f} MiB, peak {row[2]:.1f} MiB", flush=True
            )
            torch.cuda.reset_peak_memory_stats()
            self.triple_peak = 0.0


def main(templates: str, synthetic: int, extra: list[str]) -> int:
    probe = MemoryProbe()
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(synthetic):
            write_sample(Path(tmp) / "corpus" / "synthetic" / f"tiny_{index}")
        (Path(tmp) / "no_tests").mkdir()
        code = pytest.main(
            [
                str(Path(tmp) / "no_tests"),
                "-q",
                "-p",
                "no:cacheprovider",
                "--inductor-samples",
                f"--inductor-samples={tmp}/corpus",
                f"--inductor-template={templates}",
                "--inductor-devices=cuda",
                "--benchmark-disable",
                "--inductor-isolation=none",
                "-W",
                "ignore::DeprecationWarning",
                "-c",
                "/dev/null",
                *extra,
            ],
            plugins=[probe],
        )
    rows = probe.after_release
    print(f"\n{'triple':48} {'after release MiB':>18} {'peak in triple MiB':>19}")
    for name, after, peak in rows:
        print(f"{name:48} {after:18.1f} {peak:19.1f}")
    after = [a for _, a, _ in rows]
    print(
        f"\n{probe.items} items, {len(rows)} triples; allocated after each release: min {min(after):.1f} MiB, "
        f"max {max(after):.1f} MiB, last {after[-1]:.1f} MiB; highest peak within a triple "
        f"{max(p for _, _, p in rows):.1f} MiB; reserved at the end {torch.cuda.memory_reserved() / MiB:.1f} MiB"
    )
    return int(code)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("templates", nargs="?", default="default,cudagraphs")
    parser.add_argument("--synthetic", type=int, default=2, help="synthetic GraphNet samples to add")
    known, rest = parser.parse_known_args()
    sys.exit(main(known.templates, known.synthetic, rest))
