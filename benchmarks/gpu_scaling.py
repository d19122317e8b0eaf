"""Wall time of one sample run spread out: over 1, 2, ... GPUs, one pytest-xdist worker per GPU (``--gpus``), or over
1, 2, 4, 8 pytest-xdist workers sharing one device (``--workers``).

    OUT=/tmp/scaling python benchmarks/gpu_scaling.py CORPUS [--gpus 1,2] [--templates default,cudagraphs]
        [--repeats 1] [--limit N] [--resume] [-- PYTEST ARGS]
    OUT=/tmp/scaling python benchmarks/gpu_scaling.py CORPUS --workers 1,2,4,8 [--device cuda|cpu] [...]
    OUT=/tmp/scaling-cpu python benchmarks/gpu_scaling.py --builtins --device cpu --workers 1,2 --templates default \\
        -- --benchmark-max-time=0.1

The samples: a GraphNet-format CORPUS, the built-in samples (``--builtins``), or both; --limit N takes N of them spread
evenly over the selection; PYTEST ARGS (after ``--``) go to every run (``-k EXPR`` narrows the samples). Every run
checks and times eager and the templates in pairs (the plugin's default timing unless PYTEST ARGS set a
``--benchmark-`` option), starts from cold Inductor and Triton caches of its own (TORCHINDUCTOR_CACHE_DIR and
TRITON_CACHE_DIR in a fresh temporary folder) and writes a results file and a lock log (``--inductor-lock-log``)
under $OUT: scaling-{G}gpu-r{R}.jsonl, or scaling-{W}w-{DEVICE}-r{R}.jsonl, each with its .lock.log and its
pytest output (.txt).

--gpus G1,G2,...: ``pytest -n G`` with CUDA_VISIBLE_DEVICES set to the first G GPUs, so that each xdist worker owns
one GPU (every item names ``cuda:0``, its worker's GPU). Prints the wall time per GPU count, the speedup over the
first count and the scaling efficiency (T1 / (G x TG)).

--workers 1,W2,...: ``pytest -n W`` on one device, GPU 0 (CUDA_VISIBLE_DEVICES=0, ``--inductor-devices=cuda``) or
the CPU (``--device cpu``: ``--inductor-devices=cpu``, no GPU visible); the workers share it, their timings take
turns and run beside nobody's work (the guide's "Several GPUs"). Prints per worker count the wall time, the speedup
over the one-worker run, the timing holds (the items' recorded ``timing_seconds`` summed, or for a run of an older
plugin the summed durations of the lock log's timing holds), and the floor that exclusive
timing sets: the run's timing holds + (the one-worker run's wall time - its timing holds) / W, the one-worker
run's other work spread perfectly over W workers; and wall / floor.

Both modes also print how many items ended with an outcome, and how many speedups agree with the first count's:
those whose change (the ratio of the two speedups) has a 95% interval, from both runs' intervals as ``compare``
computes it, that holds no change; the others are listed. With --repeats R each count runs R times (the counts
alternating) and the figures are medians; agreement is against the first count's first run.

Prints, and writes to $OUT/gpu_scaling.md, the table, then what ran. --resume keeps the runs an earlier invocation
finished in the same $OUT (their wall times in $OUT/walls.json): for a device whose calls are cut short, run again
with the folder brought back (a run stopped midway runs again, from cold caches).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from pytest_inductor_templates.runs.compare import compare_runs
from pytest_inductor_templates.runs.files import Run, RunError, load
from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES
from pytest_inductor_templates.samples.graphnet import discover
from pytest_inductor_templates.tables import render, seconds, speedup_text
from pytest_inductor_templates.timing.host_lock import COMPILE, TIMING, WORK

DEFAULT_TIMING: list[str] = []  # the plugin's default timing


@dataclass
class Measured:
    """One pytest run: its wall time, its results (None without a readable file), its timing holds' summed seconds
    and their number (None without a lock log)."""

    wall: float
    run: Run | None
    timing: float | None
    holds: int


def spread(samples: list[str], limit: int | None) -> list[str]:
    """``limit`` samples spread evenly over ``samples`` (all of them without a limit)."""
    if limit is None or limit >= len(samples):
        return samples
    step = len(samples) / limit
    return [samples[int(i * step)] for i in range(limit)]


def timing_holds(log: Path) -> tuple[float | None, int]:
    """The summed durations of the timing holds in a lock log (``PID GROUP DETAIL START END`` lines), and their
    number; None for the sum where the run wrote no log (it timed nothing under xdist)."""
    if not log.exists():
        return None, 0
    spans = [line.split() for line in log.read_text().splitlines() if line.strip()]
    timings = [float(end) - float(start) for _, group, _, start, end in spans if group == TIMING]
    return sum(timings), len(timings)


def busy_profile(log: Path, own: set[int]) -> str | None:
    """Where a run's span went, from its lock log: timing and work holds summed (work split into the items' own
    processes, ``own``, and the others: timing repeats, a diagnosis's processes), and the seconds of the span by how
    many processes held work at once (``1 (own)``: one of the items' own processes alone, the others waiting: a
    timing asked behind its work holds back every new work); None without a log."""
    if not log.exists():
        return None
    spans = [line.split() for line in log.read_text().splitlines() if line.strip()]
    holds = [(int(pid), group, float(start), float(end)) for pid, group, _, start, end in spans]
    if not holds:
        return None
    work = [(pid, start, end) for pid, group, start, end in holds if group == WORK]
    timing = sum(end - start for _, group, start, end in holds if group == TIMING)
    mine = sum(end - start for pid, start, end in work if pid in own)
    events = sorted([(start, 1, pid) for pid, start, _ in work] + [(end, -1, pid) for pid, _, end in work])
    by_count: Counter[str] = Counter()
    at_work: Counter[int] = Counter()
    last = min(start for *_, start, _ in holds)
    for moment, step, pid in events:
        busy = [p for p, n in at_work.items() if n > 0]
        if len(busy) == 1:
            key = "1 (own)" if busy[0] in own else "1 (other)"
        else:
            key = str(len(busy)) if len(busy) < 5 else "5-9" if len(busy) < 10 else "10+"
        by_count[key] += moment - last
        at_work[pid] += step
        last = moment
    final = max(end for *_, end in holds)
    by_count["0"] += final - last  # after the last work: timings alone
    span = final - min(start for *_, start, _ in holds)
    order = ["0", "1 (own)", "1 (other)", "2", "3", "4", "5-9", "10+"]
    profile = " | ".join(f"{key}: {by_count[key]:.0f}" for key in order if by_count[key] >= 0.5)
    compiles = [(start, end) for _, group, start, end in holds if group == COMPILE]
    timings = [(start, end) for _, group, start, end in holds if group == TIMING]
    beside = sum(max(0.0, min(end, stop) - max(start, begin)) for start, end in compiles for begin, stop in timings)
    compiled = (
        f"; compiles beside timings (--inductor-compile-beside-timing) {sum(e - s for s, e in compiles):.0f} s, "
        f"{beside:.0f} s of it during a timing"
        if compiles
        else ""
    )
    return (
        f"span {span:.0f} s; timing {timing:.0f} s; work {sum(end - start for _, start, end in work):.0f} s "
        f"({mine:.0f} s in the items' own processes); seconds by processes at work: {profile}{compiled}"
    )


def recorded_timing(run: Run | None) -> tuple[float | None, int]:
    """The summed ``timing_seconds`` of a run's items (the wall time each held its device's timing slot), and how
    many items recorded it; None for the sum where none did (a run of an older plugin: then the lock log's)."""
    held = [r.timing_seconds for r in run.records if r.timing_seconds is not None] if run is not None else []
    return (sum(held), len(held)) if held else (None, 0)


def timing_args(extra: list[str]) -> list[str]:
    """How long each item is timed: the default, unless the pytest arguments set a pytest-benchmark option."""
    return [] if any(a.startswith("--benchmark-") for a in extra) else DEFAULT_TIMING


def measured_run(results: Path, wall: float) -> tuple[Measured, str]:
    """What a finished run measured, read from its results file and lock log; a line on a results file that could
    not be read (else empty)."""
    try:
        run: Run | None = load(str(results))
    except RunError as error:
        run, problem = None, f" (no results: {error})"
    else:
        problem = ""
    recorded = recorded_timing(run)
    held = recorded if recorded[0] is not None else timing_holds(results.with_suffix(".lock.log"))
    return Measured(wall, run, *held), problem


def run_once(
    selection: list[str],
    workers: int,
    visible: str,
    templates: str,
    extra: list[str],
    results: Path,
    env_extra: dict[str, str] | None = None,
    conftest: str | None = None,
    caches: Path | None = None,
) -> tuple[float, str]:
    """One pytest run with ``workers`` xdist workers and ``visible`` as CUDA_VISIBLE_DEVICES: its wall time and
    pytest's last line (its whole output goes to a .txt beside ``results``, written as it runs). ``env_extra`` goes
    into its environment (PYTHONPATH: another version of the plugin); ``conftest`` is the source of a conftest.py
    the run loads (a planted fault); ``caches`` a folder for its Inductor and Triton caches that outlives the run
    (default: a fresh temporary one, so cold)."""
    lock_log = results.with_suffix(".lock.log")
    lock_log.unlink(missing_ok=True)
    results.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "no_tests").mkdir()
        if conftest is not None:
            (Path(tmp) / "no_tests" / "conftest.py").write_text(conftest)
        env = dict(
            os.environ,
            CUDA_VISIBLE_DEVICES=visible,
            TORCHINDUCTOR_CACHE_DIR=f"{caches or tmp}/inductor",
            TRITON_CACHE_DIR=f"{caches or tmp}/triton",
            **(env_extra or {}),
        )
        command = [
            sys.executable, "-m", "pytest", f"{tmp}/no_tests", "-c", "/dev/null", "-q", "-p", "no:cacheprovider",
            "-p", "no:randomly", "-W", "ignore", "-n", str(workers), *selection, f"--inductor-template={templates}",
            f"--inductor-results={results}", f"--inductor-lock-log={lock_log}", *timing_args(extra), *extra,
        ]  # fmt: skip
        output = results.parent / f"{results.stem}.txt"
        start = time.perf_counter()
        with output.open("w") as written:  # as it runs: a run stopped midway leaves its output
            subprocess.run(command, stdout=written, stderr=subprocess.STDOUT, env=env, check=False)
        wall = time.perf_counter() - start
    lines = output.read_text().strip().splitlines()
    return wall, lines[-1] if lines else "no output"


def change_text(change: float | None, interval: tuple[float, float] | None) -> str:
    if change is None:
        return "n/a"
    return f"{change:+.1%}" + (f" [{interval[0]:+.1%}, {interval[1]:+.1%}]" if interval else " (no interval)")


def agreement(base: Run, other: Run) -> tuple[int, int, list[list[str]]]:
    """(speedups that agree with the base run's, speedups in both runs, a row for each that does not). They agree
    when the 95% interval of their change, from both runs' intervals (``compare``'s), holds no change; a change
    without an interval (a run gave its speedup none) does not count as agreeing."""
    agree, both, rows = 0, 0, []
    for template in compare_runs(base, other).templates:
        for row in template.compared:
            both += 1
            interval = row.change_interval
            if interval is not None and interval[0] <= 0 <= interval[1]:
                agree += 1
            else:
                assert row.base is not None and row.new is not None  # compared: a speedup in both
                rows.append(
                    [
                        f"{row.sample} / {template.template} / {row.device}",
                        speedup_text(row.base),
                        speedup_text(row.new),
                        change_text(row.speedup_change, interval),
                    ]
                )
    return agree, both, rows


def ended(run: Run) -> tuple[int, int]:
    """(items with an outcome, items) of a run."""
    return sum(1 for r in run.records if r.outcome is not None), len(run.records)


def wall_text(walls: list[float]) -> str:
    text = seconds(statistics.median(walls))
    return text + (f" ({min(walls):.0f}-{max(walls):.0f})" if len(walls) > 1 else "")


def timing_threads(measured: list[Measured]) -> str:
    """The intra-op thread counts the runs timed with (their results' ``machine_info``)."""
    counts = {str(m.run.data.get("machine_info", {}).get("timing_threads")) for m in measured if m.run is not None}
    return "/".join(sorted(counts)) or "n/a"


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def cpu_name() -> str:
    """The CPU's model name (Linux), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "CPU"


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The script's arguments, and the pytest arguments: those after ``--``, and any it does not know."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", help="a GraphNet-format sample root")
    parser.add_argument("--builtins", action="store_true", help="the built-in samples (beside CORPUS, or alone)")
    counts = parser.add_mutually_exclusive_group()
    counts.add_argument("--gpus", help="GPU counts, one xdist worker per GPU (default: 1,2)")
    counts.add_argument("--workers", help="xdist worker counts on one device, starting with 1 (1,2,4,8)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="--workers: GPU 0 or the CPU")
    parser.add_argument("--templates", default="default,cudagraphs")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument(
        "--resume", action="store_true", help="keep the runs an earlier invocation finished in the same $OUT"
    )
    cut = argv.index("--") if "--" in argv else len(argv)
    args, unknown = parser.parse_known_args(argv[:cut])
    if args.corpus is None and not args.builtins:
        parser.error("choose the samples: CORPUS, --builtins, or both")
    if args.workers is not None and not args.workers.startswith("1,") and args.workers != "1":
        parser.error("--workers starts with 1: the one-worker run is the base of the speedups and the floor")
    if args.workers is None and args.device == "cpu":
        parser.error("--device cpu needs --workers (--gpus spreads over GPUs)")
    return args, unknown + argv[cut + 1 :]


def main() -> int:
    args, extra = parse(sys.argv[1:])
    out = Path(os.environ.get("OUT") or tempfile.mkdtemp(prefix="gpu-scaling-")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    found = [s.id for s in BUILTIN_SAMPLES] if args.builtins else []
    found += discover(Path(args.corpus)) if args.corpus else []
    samples = spread(found, args.limit)
    listed = out / "samples.txt"
    listed.write_text("\n".join(samples) + "\n")
    selection = (["--inductor-samples=builtin"] if args.builtins else []) + (
        [f"--inductor-samples={Path(args.corpus).resolve()}"] if args.corpus else []
    )
    selection.append(f"--inductor-sample-list={listed}")
    by_workers = args.workers is not None
    counts = [int(c) for c in (args.workers if by_workers else args.gpus or "1,2").split(",")]
    if by_workers:
        selection.append(f"--inductor-devices={args.device}")
    measured: dict[int, list[Measured]] = {c: [] for c in counts}
    log = []
    walls_file = out / "walls.json"  # each finished run's wall time, for --resume
    walls = json.loads(walls_file.read_text()) if args.resume and walls_file.exists() else {}
    for repeat in range(args.repeats):
        for count in counts:
            if by_workers:
                name, visible = f"scaling-{count}w-{args.device}-r{repeat + 1}", "0" if args.device == "cuda" else ""
                what = f"{plural(count, 'worker')} on {'GPU 0' if args.device == 'cuda' else 'the CPU'}"
            else:
                name, visible = f"scaling-{count}gpu-r{repeat + 1}", ",".join(str(i) for i in range(count))
                what = plural(count, "GPU")
            results = out / f"{name}.jsonl"
            if name in walls and results.exists():  # --resume: finished by an earlier invocation
                summary = "kept from an earlier invocation"
            else:
                walls[name], summary = run_once(selection, count, visible, args.templates, extra, results)
                walls_file.write_text(json.dumps(walls, indent=1) + "\n")
            one, problem = measured_run(results, walls[name])
            summary += problem
            measured[count].append(one)
            log.append(f"repeat {repeat + 1}: {what} {one.wall:7.1f} s   {summary}")
            print(log[-1], flush=True)
    import torch

    first = counts[0]
    base_wall = statistics.median(m.wall for m in measured[first])
    base_run = measured[first][0].run
    base_timings = [m.timing for m in measured[first] if m.timing is not None]
    rows, differing = [], []
    for count in counts:
        walls = [m.wall for m in measured[count]]
        median = statistics.median(walls)
        runs = [m.run for m in measured[count] if m.run is not None]
        agree = [agreement(base_run, run) for run in runs] if base_run is not None else []
        if count != first:
            differing += [(count, rows_) for _, _, rows_ in agree if rows_]
        row = [
            str(count),
            wall_text(walls),
            f"{base_wall / median:.2f}x",
            ", ".join(f"{a} of {n}" for a, n in map(ended, runs)) or "no results file",
            "-" if count == first else ", ".join(f"{a} of {n}" for a, n, _ in agree) or "-",
        ]
        if by_workers:
            timings = [m.timing for m in measured[count] if m.timing is not None]
            if timings and base_timings:
                timing = statistics.median(timings)
                floor = timing + (base_wall - statistics.median(base_timings)) / count
                holds = statistics.median(m.holds for m in measured[count])
                row += [f"{seconds(timing)} ({holds:.0f})", seconds(floor), f"{median / floor:.2f}"]
            else:
                row += ["no lock log", "-", "-"]
        else:
            row.insert(3, f"{base_wall * first / (count * median):.2f}")
        rows.append(row)
    if by_workers:
        header = ["workers", "wall time", "speed", "items with an outcome", f"speedups agreeing with {first} worker",
                  "timing holds (n)", "floor", "wall / floor"]  # fmt: skip
        device = "GPU 0" if args.device == "cuda" else "the CPU"
        how = f"1 to {counts[-1]} xdist workers sharing {device}, their timings exclusive"
    else:
        header = ["GPUs", "wall time", "speed", "efficiency", "items with an outcome", "speedups agreeing with 1 GPU"]
        how = "one xdist worker per GPU"
    on_gpu = torch.cuda.is_available() and (not by_workers or args.device == "cuda")
    machine = torch.cuda.get_device_name(0) if on_gpu else cpu_name()
    what = " + ".join(
        (["the built-ins"] if args.builtins else []) + ([f"the corpus {Path(args.corpus).name}"] if args.corpus else [])
    )
    lines = [  # the table first, then what ran
        *render(header, rows, markdown=True),
        "",
        f"{len(samples)} samples of {what}" + (" spread evenly over it" if len(samples) < len(found) else "")
        + f", eager + {args.templates}, checked and timed in pairs ({' '.join(timing_args(extra) + extra)}), {how}, "
        f"cold caches, {args.repeats} repeat(s); {machine}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{date.today()}.",
    ]  # fmt: skip
    if by_workers:
        lines.append(
            f"floor = the run's timing holds + ({first}-worker wall {seconds(base_wall)} - its timing holds "
            f"{seconds(statistics.median(base_timings)) if base_timings else 'n/a'}) / workers."
        )
    if by_workers and args.device == "cpu":  # each worker times with its share of the CPUs
        shares = [f"{timing_threads(measured[c])} with {plural(c, 'worker')}" for c in counts]
        lines.append(f"Intra-op threads while timing: {', '.join(shares)}.")
    unit = "worker" if by_workers else "GPU"
    for count, differ in differing:
        title = f"Speedups that changed significantly ({plural(first, unit)} vs {count}; the change's 95% interval):"
        lines += ["", title, ""]
        lines += render(["item", plural(first, unit), plural(count, unit), "change"], differ, markdown=True)
    text = "\n".join(lines)
    print(text)
    (out / "gpu_scaling.md").write_text("\n".join(log) + "\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
