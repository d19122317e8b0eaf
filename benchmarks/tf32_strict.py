"""Does the strict check see a small fault on a GPU? A planted fault (output channel 0 of the first output x1.001,
after Inductor compiled the graph) through real runs of the plugin, with TF32 as torch leaves it and with
``--inductor-tf32=off``; and the same samples unplanted under ``--inductor-tf32=off`` (they must still pass).

    python benchmarks/tf32_strict.py CORPUS [--samples-k EXPR] [--workers N] [--out DIR]

Prints one line per run: how many sample items ended in each outcome. The plant is a torch.compile backend that a
conftest.py registers (the sample worker imports it too), so the plugin runs unchanged.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

PLANT = '''
import torch
from torch._dynamo import register_backend
from torch._inductor.compile_fx import compile_fx


@register_backend
def planted_channel(graph_module, example_inputs):
    """Inductor, then output channel 0 of the graph's first floating output times 1.001."""
    compiled = compile_fx(graph_module, example_inputs)

    def run(*args):
        outputs = list(compiled(*args))
        for index, out in enumerate(outputs):
            if isinstance(out, torch.Tensor) and out.is_floating_point() and out.dim() >= 2 and out.shape[1] > 1:
                out = out.clone()
                out[:, 0] *= 1.001
                outputs[index] = out
                break
        return outputs

    return run
'''


def run(folder: Path, corpus: Path, extra: list[str], name: str, args: argparse.Namespace) -> Counter[str]:
    results = folder / f"{name}.jsonl"
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "-W", "ignore",
        f"--inductor-samples={corpus}", "--inductor-template=default", "--inductor-devices=cuda", "--benchmark-skip",
        "-m", "inductor_sample", f"--inductor-results={results}", "-n", str(args.workers), *extra,
    ]  # fmt: skip
    if args.samples_k:
        command += ["-k", args.samples_k]
    subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    records = [json.loads(line).get("record") for line in results.read_text().splitlines() if line.strip()]
    checks = [r for r in records if r and r["kind"] == "check" and r["template"] != "eager"]
    return Counter(r["outcome"] for r in checks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--samples-k", default=None)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="tf32-strict-"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "conftest.py").write_text(PLANT)
    corpus = args.corpus.resolve()
    for name, extra in (
        ("planted, TF32 as torch leaves it", ["--inductor-backend=planted_channel"]),
        ("planted, --inductor-tf32=off", ["--inductor-backend=planted_channel", "--inductor-tf32=off"]),
        ("unplanted, --inductor-tf32=off", ["--inductor-tf32=off"]),
    ):
        counts = run(folder, corpus, extra, name.split(",")[0] + ("-strict" if "off" in name else ""), args)
        print(
            f"{name}: {sum(counts.values())} compiled check items: "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
