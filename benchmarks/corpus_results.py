"""A GraphNet corpus under eager, default and cudagraphs; docs/results/corpus-results.md from the plugin's report.

OUT=/tmp/corpus python benchmarks/corpus_results.py run CORPUS [--shard I/N] [--templates default,cudagraphs]
    [--devices cuda:0] [--workers W] [--warm-workers K [--warm-only]] [--diagnose N] [--resume] [-- PYTEST ARGS]
    One pytest run (sample items only) writing $OUT/corpus-I.jsonl (the results file) and $OUT/corpus-I.json
    (pytest-benchmark JSON), with the plugin's default timing; --shard I/N runs every N-th sample from the I-th
    (1-based), so that shards fit a time limit or run on several machines. --workers W times with W pytest-xdist
    workers sharing the device (the plugin keeps each timing apart from every other worker's work).
    $OUT/shard-I.json records the plugin's commit, the machine, the date and each pass's wall time: every shard of a
    published run comes from one commit (``doc`` lists them).
    --resume: a shard cut short (its results file partial) goes on with the samples it has not finished, into
    $OUT/corpus-I-partK.jsonl; ``doc`` takes each sample from the last part that ran it.
    --diagnose N: after the timed run, an untimed pass (never beside a timing) over its failing checks alone, with
    --inductor-diagnose and a cap of N, writes $OUT/diag-I.jsonl and each repro under $OUT/repros-I; each repro.py
    then runs on its own, its exit code in $OUT/repro-exits-I.json (1: the compiler's fault, shown without the
    plugin). ``doc`` puts the diagnoses into the timed records.
    With --warm-workers K, an untimed checks-only pass over the
    same selection with K pytest-xdist workers comes first ($OUT/warm-I.jsonl): it compiles every sample in
    parallel, so the timed run finds Inductor's on-disk caches warm (the same compiled code, loaded in a
    second or two instead of compiled in ten or more; its compile times are then those of a warm cache). Both
    passes use one intra-op thread count (Inductor's CPU code is cached per count): on a CPU every usable CPU, on
    GPUs the CPUs shared among the warm-up workers (with --warm-only, give the timed run the same
    --inductor-timing-threads; the warm-up pass prints it).
    --warm-only stops after it (to warm the caches while other untimed work runs; time later with the same OUT).
    A cell (sample, template) whose check timed out or crashed in the warm-up pass is not run again in the timed
    run (it would spend the same timeout there, one sample at a time; where eager's did, the whole sample): the
    timed run lists them in not-timed-I.txt, and `doc` takes their warm-up outcomes from warm-I.jsonl.
python benchmarks/corpus_results.py doc RESULTS... [--doc docs/results/corpus-results.md] [--note TEXT]
    Merges the shards (pytest-inductor-templates merge: one eager row) and writes the page: pass rate per
    template, the geomean speedup over the samples every template passed, the failing items grouped by cause
    with their diagnoses and whose fault each is shown to be (``corpus_page``), timeouts and skips with their
    reasons, the shards, speedups (pytest-inductor-templates report), and the worker's memory before each triple
    (flat when nothing leaks).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from corpus_page import (
    MANIFEST,
    REPRO_EXITS,
    common_geomeans,
    ended_early_and_skipped,
    failures_by_cause,
    read_json,
    shards_table,
)  # fmt: skip

from pytest_inductor_templates.diagnose.request import DIAGNOSED
from pytest_inductor_templates.outcomes import ENDED_EARLY, FAILURES, Outcome
from pytest_inductor_templates.record import EAGER, SECTION, ItemRecord
from pytest_inductor_templates.runs.files import Run, RunError, from_data, load, merge
from pytest_inductor_templates.runs.markdown import as_markdown
from pytest_inductor_templates.samples.graphnet import GraphNetSample, discover
from pytest_inductor_templates.tables import render
from pytest_inductor_templates.timing.threads import usable_cpus

SHARD_FILE = re.compile(r"corpus-(\d+)(?:-part(\d+))?\.jsonl$")  # a shard's timed results: its first file or a part


def beside(path: str | Path, pattern: str) -> Path | None:
    """A file ``run`` wrote beside a shard's timed results (``pattern`` with the shard's index), or None for a file
    that is no shard's."""
    match = SHARD_FILE.search(Path(path).name)
    return Path(path).with_name(pattern.format(index=match[1])) if match else None


def warm_pass_of(results: str | Path) -> Path | None:
    """The warm-up pass's results file of a timed run's shard (corpus-I.jsonl, corpus-I-partK.jsonl: warm-I.jsonl),
    if there is one."""
    warm = beside(results, "warm-{index}.jsonl")
    return warm if warm is not None and warm.exists() else None


def not_timed_list(results: str | Path) -> Path | None:
    """Where ``run`` lists the (sample, template) cells it left to the warm-up pass (not-timed-I.txt beside
    corpus-I.jsonl); None for any other file (a warm-up pass's own results name no such list)."""
    path = Path(results)
    if not path.name.startswith("corpus-"):
        return None
    return path.with_name(path.name.replace("corpus-", "not-timed-", 1).rsplit(".", 1)[0] + ".txt")


REPRO_SECONDS = 600  # a repro that runs longer is recorded as "timeout", not as an exit
K_WORD = re.compile(r"^[\w:+\-.\[\]\\/]+$")  # what pytest's -k takes as one word


def not_timed_cells(results: str | Path) -> set[tuple[str, str]]:
    """The (sample, template) cells a timed run's not-timed list names (template ``*``: the whole sample)."""
    listed = not_timed_list(results)
    if listed is None or not listed.exists():
        return set()
    return {
        (sample, template)
        for sample, template in (line.split("\t") for line in listed.read_text().splitlines() if line)
    }


def left_to_warm_up(warm: Run) -> set[tuple[str, str]]:
    """The (sample, template) cells whose check timed out or crashed in the warm-up pass; template ``*`` for the
    whole sample where that was eager's (every cell builds the model that failed), or where the sample id is no
    single -k word."""
    ended = {(r.sample, r.template) for r in warm.records if r.kind == "check" and r.outcome in ENDED_EARLY}
    whole = {sample for sample, template in ended if template == EAGER or not K_WORD.match(sample)}
    return {(sample, "*") for sample in whole} | {(s, t) for s, t in ended if s not in whole}


def _deselection(cells: set[tuple[str, str]]) -> list[str]:
    """-k for the single cells (both their check and bench items), none for whole samples (left off the list)."""
    single = sorted(f"({sample} and [{template}-)" for sample, template in cells if template != "*")
    return ["-k", f"not ({' or '.join(single)})"] if single else []


def finished_samples(results: list[Path], templates: list[str]) -> set[str]:
    """The sample ids of a shard's results files whose every cell (eager's and each template's) has both its check
    and its bench item's record, or was left to the warm-up pass (not timed: its not-timed list): what a resumed
    shard does not run again."""
    items: dict[tuple[str, str], set[str]] = defaultdict(set)
    left: set[tuple[str, str]] = set()
    for path in results:
        for r in load(str(path)).records:
            if r.outcome is not None:
                items[r.sample, r.template].add(r.kind)
        left |= not_timed_cells(path)
    samples = {sample for sample, _ in items}

    def done(sample: str, template: str) -> bool:
        return {"check", "bench"} <= items[sample, template] or (sample, template) in left or (sample, "*") in left

    return {sample for sample in samples if all(done(sample, t) for t in (EAGER, *templates))}


def _parts(out: Path, index: int) -> dict[int, Path]:
    """A shard's parts by number: corpus-I-partK.jsonl (``SHARD_FILE``)."""
    found = {p: SHARD_FILE.search(p.name) for p in out.glob(f"corpus-{index}-part*.jsonl")}
    return {int(m[2]): p for p, m in found.items() if m and m[2] and int(m[1]) == index}


def shard_parts(out: Path, index: int) -> list[Path]:
    """A shard's timed results files in the order they ran: corpus-I.jsonl, then corpus-I-part2.jsonl, ..."""
    first = out / f"corpus-{index}.jsonl"
    parts = _parts(out, index)
    return ([first] if first.exists() else []) + [parts[k] for k in sorted(parts)]


def next_part(out: Path, index: int) -> Path:
    """The file a resumed shard's next part goes to: one past the highest part there is."""
    return out / f"corpus-{index}-part{max(_parts(out, index), default=1) + 1}.jsonl"


def clear_shard(out: Path, index: int) -> None:
    """Remove what an earlier run of the shard left that a fresh run would otherwise be read with: its parts, its
    diagnosis pass and its repros' exits."""
    stale = [*out.glob(f"corpus-{index}-part*"), out / f"diag-{index}.jsonl", out / REPRO_EXITS.format(index=index)]
    for path in stale:
        path.unlink(missing_ok=True)
    shutil.rmtree(out / f"repros-{index}", ignore_errors=True)


@functools.cache
def commit() -> str:
    """The plugin checkout's commit (``+`` where its tracked files differ from it), or ``unknown``."""
    root = Path(__file__).resolve().parent.parent
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
    if head.returncode != 0:
        return os.environ.get("PLUGIN_COMMIT", "unknown")  # a copy without .git: the caller says which
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=root).returncode != 0
    return head.stdout.strip() + ("+" if dirty else "")


@functools.cache
def machine() -> str:
    """The host and its GPUs, in one line."""
    gpus = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    ) if shutil.which("nvidia-smi") else None  # fmt: skip
    names = sorted(set(gpus.stdout.split("\n")) - {""}) if gpus and gpus.returncode == 0 else []
    return f"{platform.node()} ({', '.join(names) or 'no GPU'}; {usable_cpus()} CPUs)"


def diagnose_failures(
    command: list[str], results: list[Path], ids: dict[str, str], out: Path, index: int, most: int, extra: list[str]
) -> float:
    """The untimed diagnosis pass over the first ``most`` failing checks of ``results`` (their samples listed
    alone: ``ids`` maps a sample id to its directory), then each repro run on its own; the pass's wall time."""
    failing = sorted(
        {(r.sample, r.template) for path in results for r in load(str(path)).records
         if r.kind == "check" and r.outcome is not None and r.outcome.value in DIAGNOSED and r.sample in ids}
    )[:most]  # fmt: skip
    if not failing:
        print("diagnose: no failing check to diagnose")
        return 0.0
    listed = out / f"diagnose-{index}.txt"
    listed.write_text("".join(f"{ids[sample]}\n" for sample in sorted({sample for sample, _ in failing})))
    chosen = " or ".join(f"({sample} and check[{template}-)" for sample, template in failing)
    repros = out / f"repros-{index}"
    results_file = out / f"diag-{index}.jsonl"
    diagnose = [
        *[a for a in command if not a.startswith("--inductor-sample-list=")], f"--inductor-sample-list={listed}",
        "--benchmark-skip", "--inductor-diagnose", f"--inductor-diagnose-max={most}", f"--inductor-repro-dir={repros}",
        f"--inductor-results={results_file}", *extra, "-k", chosen,
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(diagnose, check=False, capture_output=True, text=True)
    (out / f"diag-{index}.txt").write_text(done.stdout + done.stderr)
    if done.returncode not in (0, 1) or not results_file.exists():
        print(f"diagnose pass: exit {done.returncode}, no diagnoses (see {out}/diag-{index}.txt)", file=sys.stderr)
        return time.perf_counter() - started
    exits: dict[str, int | str] = {}
    for r in load(str(results_file)).records:
        if r.repro and r.repro not in exits:
            try:
                ran = subprocess.run([sys.executable, r.repro], capture_output=True, timeout=REPRO_SECONDS)
                exits[r.repro] = ran.returncode
            except subprocess.TimeoutExpired:
                exits[r.repro] = "timeout"
    (out / REPRO_EXITS.format(index=index)).write_text(json.dumps(exits, indent=1) + "\n")
    seconds = time.perf_counter() - started
    print(f"diagnose pass ({len(failing)} failing checks, cap {most}): {seconds:.0f} s, exit {done.returncode}; "
          f"repros run on their own: {len(exits)}, exit 1 in {sum(c == 1 for c in exits.values())}")  # fmt: skip
    return seconds


class Manifest:
    """A shard's manifest (shard-I.json): the shard, its templates, and each pass with the plugin's commit, the
    machine, the date and its wall time."""

    def __init__(self, path: Path, shard: str, templates: str, keep: bool) -> None:
        self.path = path
        found = read_json(path) if keep else None
        self.data = found or {"shard": shard, "templates": templates, "passes": []}

    def differs(self, shard: str, templates: str) -> str | None:
        """Why this shard may not go on here: another selection or another commit began it; or None."""
        if (self.data.get("shard"), self.data.get("templates")) != (shard, templates):
            return f"it began as shard {self.data.get('shard')} of {self.data.get('templates')}"
        commits = {p["commit"] for p in self.data["passes"]}
        if commits - {commit()}:
            return f"it began at {', '.join(sorted(commits))}, this checkout is at {commit()}"
        return None

    def add(self, name: str, seconds: float) -> None:
        stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.data["passes"].append(
            {"pass": name, "seconds": round(seconds, 1), "commit": commit(), "machine": machine(), "date": stamp}
        )
        self.path.write_text(json.dumps(self.data, indent=1) + "\n")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    out = Path(os.environ.get("OUT", "/tmp/corpus"))
    out.mkdir(parents=True, exist_ok=True)
    index, count = (int(part) for part in args.shard.split("/"))
    shard = discover(Path(args.corpus))[index - 1 :: count]
    root = Path(args.corpus).resolve()
    ids = {GraphNetSample(root, relative).id: relative for relative in shard}
    warm_file = out / f"warm-{index}.jsonl"
    earlier = shard_parts(out, index) if args.resume else []
    warm_now = bool(args.warm_workers) and not (args.resume and warm_file.exists())
    # a fresh run keeps only a --warm-only pass run just before it; a resumed one goes on with its manifest
    manifest = Manifest(out / MANIFEST.format(index=index), args.shard, args.templates,
                        keep=args.resume or (not warm_now and warm_file.exists()))  # fmt: skip
    if args.resume and (why := manifest.differs(args.shard, args.templates)):
        print(f"--resume: shard {args.shard} cannot go on here: {why}; run it again without --resume")
        return 2
    if not args.resume:
        clear_shard(out, index)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "no_tests").mkdir()
        listed = Path(tmp) / "samples.txt"
        listed.write_text("\n".join(shard) + "\n")
        command = [
            sys.executable, "-m", "pytest", f"{tmp}/no_tests", "-c", "/dev/null", "-q", "-p", "no:cacheprovider",
            "-W", "ignore", f"--inductor-samples={args.corpus}", f"--inductor-sample-list={listed}",
            f"--inductor-template={args.templates}", f"--inductor-devices={args.devices}",
        ]  # fmt: skip
        threads: list[str] = []  # the same intra-op thread count in both passes: CPU code is cached per count
        chose_threads = any("inductor-timing-threads" in a or "inductor_timing_threads" in a for a in extra)
        if args.warm_workers and not chose_threads:
            # on a CPU, the timed run's default (every usable CPU); on GPUs, the CPUs shared among the warm-up
            # pass's workers (every worker with every CPU oversubscribed a 32-core host 12 times over)
            count = usable_cpus() if "cpu" in args.devices else max(1, usable_cpus() // args.warm_workers)
            threads = [f"--inductor-timing-threads={count}"]
        if warm_now:
            warm = [*command, "-n", str(args.warm_workers), "--benchmark-skip", f"--inductor-results={warm_file}",
                    *threads]  # fmt: skip
            started = time.perf_counter()
            warmed = subprocess.run([*warm, *extra], check=False, capture_output=True, text=True)
            (out / f"warm-{index}.txt").write_text(warmed.stdout + warmed.stderr)
            seconds = time.perf_counter() - started
            manifest.add("warm-up (untimed)", seconds)
            print(
                f"warm-up pass ({args.warm_workers} workers, untimed): {seconds:.0f} s, exit {warmed.returncode}",
                flush=True,
            )
            if warmed.returncode not in (0, 1):  # 1: a check failed, which the timed run reports too
                print(f"the warm-up pass did not run (see {out}/warm-{index}.txt)", file=sys.stderr)
                return warmed.returncode
            if args.warm_only:
                if threads:
                    print(f"time it with the same thread count: run ... -- {threads[0]}")
                return 0
        results = out / f"corpus-{index}.jsonl"
        samples = list(shard)
        if earlier:  # go on where the shard was cut short, into a part of its own
            done_ids = finished_samples(earlier, args.templates.split(","))
            samples = [relative for sample_id, relative in ids.items() if sample_id not in done_ids]
            results = next_part(out, index)
            into = f", into {results.name}" if samples else ""
            print(f"--resume: {len(samples)} of {len(shard)} samples left{into}")
        deselect: list[str] = []
        if samples and warm_file.exists():  # this run's warm-up pass, or one run earlier with --warm-only
            warm_run = load(str(warm_file))
            if not {r.sample for r in warm_run.records} <= ids.keys():
                print(f"{warm_file} is not this shard's warm-up pass (other samples): every sample is timed")
            elif cells := left_to_warm_up(warm_run):
                whole = {sample for sample, template in cells if template == "*"}
                wanted = {relative for sample_id, relative in ids.items() if sample_id not in whole}
                left_out = {(s, t) for s, t in cells if ids.get(s) in samples or t == "*"}
                not_timed = not_timed_list(results)
                assert not_timed is not None  # a timed run's results are corpus-I.jsonl or a part of it
                not_timed.write_text("".join(f"{s}\t{t}\n" for s, t in sorted(left_out)))
                print(f"left to the warm-up pass (timed out or crashed there; {not_timed}):")
                print("".join(f"  {sample} [{template}]\n" for sample, template in sorted(left_out)), end="")
                samples = [relative for relative in samples if relative in wanted]
                if "-k" in extra:
                    print("your -k replaces the deselection of single cells: they are timed again")
                else:
                    deselect = _deselection({c for c in left_out if c[1] != "*"})
        if samples:
            listed.write_text("".join(f"{relative}\n" for relative in samples))
            workers = ["-n", str(args.workers)] if args.workers > 1 else []
            timed = [
                *command, f"--inductor-results={results}", f"--benchmark-json={results.with_suffix('.json')}",
                *workers, *threads, *deselect, *extra,
            ]  # fmt: skip
            print(" ".join(timed), flush=True)
            started = time.perf_counter()
            done = subprocess.run(timed, check=False, capture_output=True, text=True)
            manifest.add(f"timed ({results.stem}, {args.workers} worker(s))", time.perf_counter() - started)
            results.with_suffix(".txt").write_text(done.stdout + done.stderr)
            print("\n".join(done.stdout.splitlines()[-30:]))
            if done.returncode not in (0, 1):
                return done.returncode
        elif not earlier:
            print(f"nothing left to time: give {warm_file} to doc")
        if args.diagnose:
            extra_args = [a for i, a in enumerate(extra) if "-k" not in extra[max(i - 1, 0) : i + 1]]  # its own -k
            seconds = diagnose_failures(command, shard_parts(out, index), ids, out, index, args.diagnose,
                                        [*threads, *extra_args])  # fmt: skip
            manifest.add("diagnose (untimed)", seconds)
    return 0


MEMORY_MIN_TRIPLES = 20  # a worker process with fewer gives no meaningful growth per triple


def _memory(shards: list[Run]) -> list[str]:
    """One row per worker process of each shard (a new one after recycling, a crash or a timeout): its resident and
    CUDA memory before its first triple, its 11th and its last, and the growth per triple after the first ten (the
    least-squares slope, once Inductor and the first models are loaded): about 0 when nothing leaks."""
    rows, short, envelopes = [], 0, []
    for shard in shards:
        ordered = [r for r in shard.records if r.kind == "check" and r.source == "sample" and r.pid is not None]
        by_worker: dict[int, list[Any]] = defaultdict(list)
        for r in ordered:
            by_worker[r.pid].append(r)
        envelopes += _envelope(Path(shard.path).name, ordered)
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
    return lines + (["", *envelopes] if envelopes else [])


def _envelope(name: str, checks: list[Any]) -> list[str]:
    """A shard's resident memory over the whole run, all its worker processes together (``checks`` in the order
    the results file has them: as they ended): the highest before a triple in the first half and in the second
    half; with recycling, flat means the second half's highest is no higher than the first's."""
    rss = [r.rss_mib for r in checks if r.rss_mib is not None]
    if len(rss) < 2 * MEMORY_MIN_TRIPLES:
        return []
    half = len(rss) // 2
    processes = len({r.pid for r in checks})
    return [
        f"- {name}: {len(rss)} triples in {processes} worker process(es); highest RSS before a triple "
        f"{max(rss[:half]):.0f} MiB in the first half, {max(rss[half:]):.0f} MiB in the second."
    ]


def _left_to_warm_up(paths: list[str]) -> tuple[list[Run], list[str]]:
    """For each shard whose timed files' not-timed lists name cells left to its warm-up pass, those cells'
    warm-up records (one run per shard to merge: the warm-up file's own cut-off, if any, is not the timed run's),
    and the cells named."""
    cells_of: dict[Path, set[tuple[str, str]]] = defaultdict(set)
    for path in paths:
        if not (cells := not_timed_cells(path)):
            continue
        if (warm_file := warm_pass_of(path)) is None:
            raise RunError(f"{not_timed_list(path)} names cells left to the warm-up pass, but the warm-up pass's "
                           "results are missing")  # fmt: skip
        cells_of[warm_file] |= cells
    runs, named = [], []
    for warm_file, cells in cells_of.items():
        warm = load(str(warm_file))
        data = copy.deepcopy(warm.data)
        data[SECTION].pop("partial", None)
        wanted = [r for r in warm.records if (r.sample, "*") in cells or (r.sample, r.template) in cells]
        runs.append(Run(warm.path, data, wanted))
        named += [f"{sample}" if template == "*" else f"{sample} [{template}]" for sample, template in sorted(cells)]
    return runs, named


DIAGNOSIS_FIELDS = [
    f.name for f in dataclasses.fields(ItemRecord) if f.name.startswith("diagnosis") or f.name == "repro"
]


def resumed(paths: list[str]) -> list[Run]:
    """The timed runs, each sample's records taken from the last part of its shard that ran it (a shard cut short
    and resumed: ``run --resume``); a run a later part went on from is no longer partial."""
    runs = [load(path) for path in paths]
    order = [(int(m[1]), int(m[2] or 1)) if (m := SHARD_FILE.search(Path(p).name)) else (-i, 1)
             for i, p in enumerate(paths)]  # fmt: skip
    kept: list[Run] = []
    for (shard, part), run in zip(order, runs, strict=True):
        later = [r for (s, q), r in zip(order, runs, strict=True) if s == shard and q > part]
        if not later:
            kept.append(run)
            continue
        again = {rec.sample for r in later for rec in r.records}
        data = copy.deepcopy(run.data)
        data[SECTION].pop("partial", None)
        kept.append(Run(run.path, data, [rec for rec in run.records if rec.sample not in again]))
    return kept


def with_diagnoses(run: Run, path: str) -> Run:
    """``run`` with the diagnoses of its shard's untimed diagnosis pass (diag-I.jsonl) written into its records."""
    diagnosed = beside(path, "diag-{index}.jsonl")
    if diagnosed is None or not diagnosed.exists():
        return run
    found = {(r.key, r.kind): r for r in load(str(diagnosed)).records if r.diagnosis}
    for record in run.records:
        if (source := found.get((record.key, record.kind))) is not None and source.outcome == record.outcome:
            for name in DIAGNOSIS_FIELDS:
                setattr(record, name, getattr(source, name))
    return run


def doc(args: argparse.Namespace) -> int:
    timed = [with_diagnoses(run, path) for run, path in zip(resumed(args.results), args.results, strict=True)]
    repro_exits: dict[str, int | str] = {}
    manifests: dict[str, Any] = {}  # by shard file: its manifest, or None where it has none
    for path in args.results:
        exits = beside(path, REPRO_EXITS)
        repro_exits.update((read_json(exits) or {}) if exits is not None else {})
        manifest = beside(path, MANIFEST)
        if manifest is not None:
            manifests.setdefault(manifest.name, read_json(manifest))
    warm_runs, left = _left_to_warm_up(args.results)
    shards = timed + warm_runs
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
    failing = sum(1 for r in checks if r.outcome in FAILURES)
    # the table first; how the run went follows in a few lines
    lines = ["# GraphNet corpus results", "", "## Pass rate per template", ""]
    lines += render(["template", "checks", *(o.value for o in outcomes), "pass rate"], rows, markdown=True)
    means, common = common_geomeans(merged.cells)
    if means:
        lines += ["", f"Geomean speedup over the {common} samples every compiled template passed and timed: "
                  + ", ".join(f"{t} {m:.3g}x" for t, m in means.items()) + " (the summary per template in the "
                  "report below is each template's own geomean, over the samples it timed)."]  # fmt: skip
    elif any(t != EAGER for _, t, _ in merged.cells):
        lines += ["", "No sample passed and was timed under every compiled template: no common geomean."]
    lines += ["", f"{failing} failing checks, grouped by cause below."]
    lines += [
        "",
        "## How the run went",
        "",
        f"- {samples} real GraphNet samples (MIT) under eager, {', '.join(t for t in counts if t != EAGER)}; "
        f"{info.get('gpu') or 'CPU'}, torch {info.get('torch')}, Triton {info.get('triton')}; written "
        f"{datetime.now().date()} by `benchmarks/corpus_results.py doc` from the plugin's results files, each "
        "sample in the plugin's worker process.",
        "- Every item ended with an outcome: "
        f"{sum(1 for r in records if r.outcome is not None)} of {len(records)} items.",
    ]
    if merged.partial:
        lines.append(f"- **Partial**: {merged.partial}")
    if any(warm_pass_of(path) for path in args.results):
        lines.append("- Inductor's caches were warmed first by an untimed checks-only pass (`run --warm-workers`): "
                     "the same compiled code, with a warm cache's compile times.")  # fmt: skip
    if left:
        lines.append(
            f"- Timed out or crashed in that pass, so not timed (their warm-up outcomes stand): {', '.join(left)}."
        )
    if args.note:
        lines.append(f"- {args.note}")
    if manifests:
        lines += ["", "## The shards", "", *shards_table(manifests)]
    lines += ["", "## Failing items by cause", "", *failures_by_cause(merged.cells, repro_exits)]
    lines += ["", "## Timed out, crashed or skipped", "", *ended_early_and_skipped(merged.cells)]
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
    run_parser.add_argument("--workers", type=int, default=1, help="pytest-xdist workers sharing the device")
    run_parser.add_argument("--diagnose", type=int, default=0, metavar="N", help="diagnose up to N failing checks")
    run_parser.add_argument("--resume", action="store_true", help="go on with a shard that was cut short")
    doc_parser = commands.add_parser("doc")
    doc_parser.add_argument("results", nargs="+")
    doc_parser.add_argument("--doc", default="docs/results/corpus-results.md")
    doc_parser.add_argument("--note", help="a line on how the run went (listed under the table)")
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
