"""A GraphNet corpus under eager, default and cudagraphs, and docs/corpus-results.md from the plugin's own report.

OUT=/tmp/corpus python benchmarks/corpus_results.py run CORPUS [--shard I/N] [--templates default,cudagraphs]
    [--devices cuda:0] [--warm-workers K [--warm-only]] [-- PYTEST ARGS]
    One pytest run (sample items only) writing $OUT/corpus-I.jsonl (the results file) and $OUT/corpus-I.json
    (pytest-benchmark JSON); --shard I/N runs every N-th sample from the I-th (1-based), so that shards
    fit a time limit or run on several machines. With --warm-workers K, an untimed checks-only pass over the
    same selection with K pytest-xdist workers comes first ($OUT/warm-I.jsonl): it compiles every sample in
    parallel, so the timed run finds Inductor's on-disk caches warm (the same compiled code, loaded in a
    second or two instead of compiled in ten or more; its compile times are then those of a warm cache). Its
    workers use the timed run's intra-op thread count: Inductor's CPU code is cached per thread count.
    --warm-only stops after it (to warm the caches while other untimed work runs; time later with the same OUT).
    A sample with a check item that timed out or crashed in the warm-up pass is not run again in the timed run
    (it would spend the same timeout there, one sample at a time): its warm-up outcomes stand, and `doc` takes
    them from warm-I.jsonl.
python benchmarks/corpus_results.py doc RESULTS... [--doc docs/corpus-results.md] [--note TEXT]
    Merges the shards (pytest-inductor-templates merge: one eager row) and writes the page: pass rate per
    template, each failure's reason, speedups (pytest-inductor-templates report), and the worker's memory
    before each triple (flat when nothing leaks).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pytest_inductor_templates.record import EAGER, ENDED_EARLY, FAILURES, Outcome
from pytest_inductor_templates.runs.files import Run, RunError, from_data, load, merge
from pytest_inductor_templates.runs.markdown import as_markdown
from pytest_inductor_templates.runs.tables import render
from pytest_inductor_templates.samples.graphnet import GraphNetSample, discover
from pytest_inductor_templates.timing.threads import usable_cpus


def warm_pass_of(results: str | Path) -> Path | None:
    """The warm-up pass's results file beside a timed run's (corpus-I.jsonl: warm-I.jsonl), if there is one."""
    path = Path(results)
    warm = path.with_name(path.name.replace("corpus-", "warm-", 1))
    return warm if path.name.startswith("corpus-") and warm.exists() else None


def ended_early(warm: Run) -> set[str]:
    """The samples with a check item that timed out or crashed in the warm-up pass."""
    return {r.sample for r in warm.records if r.kind == "check" and r.outcome in ENDED_EARLY}


def run(args: argparse.Namespace, extra: list[str]) -> int:
    out = Path(os.environ.get("OUT", "/tmp/corpus"))
    out.mkdir(parents=True, exist_ok=True)
    index, count = (int(part) for part in args.shard.split("/"))
    samples = discover(Path(args.corpus))[index - 1 :: count]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "no_tests").mkdir()
        listed = Path(tmp) / "samples.txt"
        listed.write_text("\n".join(samples) + "\n")
        command = [
            sys.executable, "-m", "pytest", f"{tmp}/no_tests", "-c", "/dev/null", "-q", "-p", "no:cacheprovider",
            "-W", "ignore", f"--inductor-samples={args.corpus}", f"--inductor-sample-list={listed}",
            f"--inductor-template={args.templates}", f"--inductor-devices={args.devices}",
        ]  # fmt: skip
        if args.warm_workers:
            warm = [
                *command,
                "-n",
                str(args.warm_workers),
                "--benchmark-skip",
                f"--inductor-results={out}/warm-{index}.jsonl",
            ]
            if not any("inductor-timing-threads" in a or "inductor_timing_threads" in a for a in extra):
                warm.append(f"--inductor-timing-threads={usable_cpus()}")  # CPU code is cached per thread count
            started = time.perf_counter()
            warmed = subprocess.run([*warm, *extra], check=False, capture_output=True, text=True)
            (out / f"warm-{index}.txt").write_text(warmed.stdout + warmed.stderr)
            seconds = time.perf_counter() - started
            print(
                f"warm-up pass ({args.warm_workers} workers, untimed): {seconds:.0f} s, exit {warmed.returncode}",
                flush=True,
            )
            if warmed.returncode not in (0, 1):  # 1: a check failed, which the timed run reports too
                print(f"the warm-up pass did not run (see {out}/warm-{index}.txt)", file=sys.stderr)
                return warmed.returncode
            if args.warm_only:
                return 0
        warm_file = out / f"warm-{index}.jsonl"
        if warm_file.exists():  # this run's warm-up pass, or one run earlier with --warm-only
            settled = ended_early(load(str(warm_file)))
            root = Path(args.corpus).resolve()
            left = [sample for sample in samples if GraphNetSample(root, sample).id not in settled]
            if len(left) < len(samples):
                print(f"not timed (timed out or crashed in the warm-up pass): {', '.join(sorted(settled))}")
                if not left:
                    return 0
                listed.write_text("".join(f"{sample}\n" for sample in left))
        command += [
            f"--inductor-results={out}/corpus-{index}.jsonl", f"--benchmark-json={out}/corpus-{index}.json",
            "--benchmark-max-time=0.25", *extra,
        ]  # fmt: skip
        print(" ".join(command), flush=True)
        done = subprocess.run(command, check=False, capture_output=True, text=True)
    (out / f"corpus-{index}.txt").write_text(done.stdout + done.stderr)
    print("\n".join(done.stdout.splitlines()[-30:]))
    return 0 if done.returncode in (0, 1) else done.returncode


MEMORY_MIN_TRIPLES = 20  # a worker process with fewer gives no meaningful growth per triple


def _memory(shards: list[Run]) -> list[str]:
    """One row per worker process of each shard (a new one after recycling, a crash or a timeout): its resident and
    CUDA memory before its first triple, its 11th and its last, and the growth per triple after the first ten (the
    least-squares slope, once Inductor and the first models are loaded): about 0 when nothing leaks."""
    rows, short = [], 0
    for shard in shards:
        by_worker: dict[int, list[Any]] = defaultdict(list)
        for r in shard.records:
            if r.kind == "check" and r.source == "sample" and r.pid is not None:
                by_worker[r.pid].append(r)
        for pid, checks in by_worker.items():
            rss = [r.rss_mib for r in checks if r.rss_mib is not None]
            cuda = [r.cuda_mib for r in checks if r.cuda_mib is not None]
            if len(checks) < MEMORY_MIN_TRIPLES or len(rss) < MEMORY_MIN_TRIPLES:
                short += 1
                continue
            slope = statistics.linear_regression(range(len(rss) - 10), rss[10:]).slope
            cuda_cells = [f"{cuda[0]:.0f}", f"{cuda[-1]:.0f}"] if cuda else ["-", "-"]
            figures = (rss[0], rss[10], rss[-1], max(rss))
            name = f"{Path(shard.path).name} {pid}"
            rows.append([name, str(len(checks)), *(f"{v:.0f}" for v in figures), f"{slope:+.2f}", *cuda_cells])
    if not rows and not short:
        return []
    header = ["shard, worker", "triples", "RSS first", "RSS 11th", "RSS last", "RSS highest", "MiB a triple after 10",
              "CUDA first", "CUDA last"]  # fmt: skip
    lines = ["Memory (MiB) of each worker process before each of its triples:", ""]
    lines += render(header, rows, markdown=True) if rows else []
    if short:
        lines += ["", f"{short} worker process(es) ran fewer than {MEMORY_MIN_TRIPLES} triples: not shown."]
    return lines


def _settled_in_warm_pass(paths: list[str]) -> tuple[list[Run], list[str]]:
    """For each timed run with a warm-up pass beside it, the warm-up records of the samples it did not run again
    (they timed out or crashed there), as a run to merge, and those samples."""
    runs, samples = [], []
    for path in paths:
        if (warm_file := warm_pass_of(path)) is None:
            continue
        warm, timed = load(str(warm_file)), load(path)
        settled = ended_early(warm) - {r.sample for r in timed.records}
        if settled:
            runs.append(Run(warm.path, warm.data, [r for r in warm.records if r.sample in settled]))
            samples += sorted(settled)
    return runs, samples


def doc(args: argparse.Namespace) -> int:
    settled_runs, settled = _settled_in_warm_pass(args.results)
    timed = [load(path) for path in args.results]
    shards = timed + settled_runs
    merged = from_data("merged", merge(shards)[0]) if len(shards) > 1 else shards[0]
    records = [r for r in merged.records if r.source == "sample"]
    checks = [r for r in records if r.kind == "check"]
    counts: dict[str, Counter[Outcome]] = defaultdict(Counter)
    for r in checks:
        if r.outcome is not None:
            counts[r.template][r.outcome] += 1
    outcomes = [o for o in Outcome if any(c[o] for c in counts.values())]
    rows = []
    for template, c in counts.items():
        ran = sum(c.values()) - c[Outcome.SKIPPED]
        rows.append(
            [
                template,
                str(sum(c.values())),
                *(str(c[o]) for o in outcomes),
                f"{c[Outcome.PASS] / ran:.0%}" if ran else "-",
            ]
        )
    info = merged.data.get("machine_info", {})
    samples = len({r.sample for r in checks})
    lines = [
        "# GraphNet corpus results",
        "",
        f"{samples} real GraphNet samples (MIT) under eager, "
        f"{', '.join(t for t in counts if t != EAGER)}; {info.get('gpu') or 'CPU'}, torch {info.get('torch')}, "
        f"Triton {info.get('triton')}; generated {datetime.now().date()} by `benchmarks/corpus_results.py` from the "
        "plugin's results files (`--inductor-results`), each sample in the plugin's worker process.",
        "",
        "Every item ended with an outcome: "
        f"{sum(1 for r in records if r.outcome is not None)} of {len(records)} items.",
    ]
    if merged.partial:
        lines.append(f"\n**Partial**: {merged.partial}")
    if any(warm_pass_of(path) for path in args.results):
        lines += ["", "Inductor's caches were warmed first by an untimed checks-only pass (`run --warm-workers`): the "
                  "compiled code is the same, and its compile times are those of a warm cache."]  # fmt: skip
    if settled:
        lines += ["", f"{len(settled)} sample(s) timed out or crashed in that pass and were not run again in the "
                  f"timed run; their outcomes are the warm-up pass's, untimed: {', '.join(settled)}."]  # fmt: skip
    if args.note:
        lines += ["", args.note]
    lines += ["", "## Pass rate per template", ""]
    lines += render(["template", "checks", *(o.value for o in outcomes), "pass rate"], rows, markdown=True)
    failing = sum(1 for r in checks if r.outcome in FAILURES)
    lines += ["", f"{failing} failing checks; each one's reason is listed under the table at the end."]
    if memory := _memory(timed):
        lines += ["", "## Memory over the run", "", *memory]
    lines += ["", "## Outcome, effect and speedup per sample", "", "From `pytest-inductor-templates report`:", ""]
    lines += [as_markdown(merged)]
    Path(args.doc).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.doc}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run")
    run_parser.add_argument("corpus")
    run_parser.add_argument("--shard", default="1/1")
    run_parser.add_argument("--templates", default="default,cudagraphs")
    run_parser.add_argument("--devices", default="cuda:0")
    run_parser.add_argument("--warm-workers", type=int, default=0, help="an untimed pass with K xdist workers first")
    run_parser.add_argument("--warm-only", action="store_true", help="the warm-up pass alone (beside other work)")
    doc_parser = commands.add_parser("doc")
    doc_parser.add_argument("results", nargs="+")
    doc_parser.add_argument("--doc", default="docs/corpus-results.md")
    doc_parser.add_argument("--note", help="a paragraph for the top of the page (what the run covers, and why)")
    args, extra = parser.parse_known_args()
    if args.command == "run" and args.warm_only and not args.warm_workers:
        parser.error("--warm-only needs --warm-workers K")
    try:
        return run(args, [a for a in extra if a != "--"]) if args.command == "run" else doc(args)
    except RunError as error:  # an unreadable results file
        print(f"corpus_results.py: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
