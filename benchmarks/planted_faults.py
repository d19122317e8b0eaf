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
import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from planted.changes import FAULTS, HARMLESS
from planted.measures import LEGIT
from planted.observe import child, probes, stored_path
from planted.summary import summarize


def _sample_ids(corpus: Path | None, expression: str | None) -> list[str]:
    from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES
    from pytest_inductor_templates.samples.graphnet import discover

    ids = [s.id for s in [*BUILTIN_SAMPLES, *probes()]]
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
        "(but for those that timed out); of two entries for one sample and dtype, one that ran beats a timeout, "
        "and a later file's beats an earlier one's",
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
    done: dict[tuple[str, str], dict[str, Any]] = {}
    rank = {"ok": 2, "timeout": 0}  # a try that ran beats one that failed otherwise, which beats a timeout;
    for entry in (e for run in done_runs for e in run["entries"] if e["status"] != retried):  # then the later file
        key = (entry["sample"], entry["dtype"])
        if key not in done or rank.get(entry["status"], 1) >= rank.get(done[key]["status"], 1):
            done[key] = entry
    if args.device == "cpu":
        where = f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"
    else:  # without a GPU here, only kept observations are judged
        where = torch.cuda.get_device_name() if torch.cuda.is_available() else "kept observations, judged on a CPU"
    machine = f"planted_faults: {datetime.date.today()}, torch {torch.__version__}, device {args.device} ({where})"
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
                elif stored_path(args.observations, sample_id, dtype, args.device).exists():
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
