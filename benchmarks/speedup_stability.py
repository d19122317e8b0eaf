"""Run-to-run stability of the plugin's speedups, its cost, and the compare gate on same-commit and slowed pairs.

Runs one selection N times (N >= 3) with the plugin and prints, per entry (sample, template, device), each run's
speedup with its interval and the run-to-run spread (largest / smallest speedup - 1); per template the median and
largest spread (targets on the H200: <= 3% and <= 10%), over every entry and over those marked unstable in no run
(the figures the plugin vouches for); for each entry spreading more than 10%, how each side's time changed between
the runs of its lowest and highest speedup (one side moving alone: the machine changed under it); each run's wall
time and the load average; and how steady the CPU's speed was over the runs (``cpu_steadiness.py`` probing beside
them: a fixed Python loop every 2 s, logged to cpu-speed.txt; it sees the runs' own load as well).

  --baseline-ref REF   also time the same selection once with the plugin as of REF (git archive; speedups from the
                       eager row, as before paired timing): the cost ratio (target <= 1.3), warm caches on both sides;
                       --baseline-src DIR does the same with a copy unpacked already (where there is no .git)
  --workers G          run under pytest-xdist with G workers, one per GPU (as many as the host has): each worker
                       times the items on its own GPU; each run is then a results file (--inductor-results)
  --resume             keep the runs that an earlier invocation, stopped midway, finished in the same $OUT
  -- PYTEST ARGS        passed to every run but the baseline (e.g. -- --inductor-speedup-precision=0.005); any
                       argument this script does not know goes there too
  --gate P             P same-commit pairs (run i against run i+1) and P pairs whose new side has a planted
                       slowdown through `compare --fail-on speedup:LIMIT`: how many pass, how many fail (needs
                       --runs >= P + 1). The slowdown is planted for real in the timed model: a conftest wraps
                       torch.compile's result so that every compiled call busy-waits SLOWDOWN of its own time more
                       (CPU only: the wait does not see the GPU).

Usage (H200):  OUT=/tmp/stability python benchmarks/speedup_stability.py --builtins --templates default,cudagraphs
               OUT=/tmp/stability python benchmarks/speedup_stability.py --corpus PATH --samples 20 --templates default
Usage (CPU):   OUT=/tmp/gate python benchmarks/speedup_stability.py --builtins --devices cpu --runs 11 --gate 10 \\
                   --threads 1 --timer time.process_time
Writes run-*.json / run-*.txt and summary.txt under $OUT (default ./speedup-stability).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
from io import BytesIO
from pathlib import Path

from corpus_selection import add_arguments, pytest_selection
from cpu_steadiness import read_log, summary

from pytest_inductor_templates.record import EAGER, ItemRecord
from pytest_inductor_templates.runs.files import load
from pytest_inductor_templates.tables import percent, speedup_text

REPOSITORY = Path(__file__).resolve().parent.parent
WIDE_SPREAD = 0.10  # the H200 target for the largest spread
PLANTED_SLOWDOWN = """
import os
import time

import torch

SLOWDOWN = float(os.environ["PLANTED_SLOWDOWN"])
_compile = torch.compile


def slowed_compile(*args, **kwargs):
    compiled = _compile(*args, **kwargs)

    def run(*call_args, **call_kwargs):
        start = time.perf_counter()
        out = compiled(*call_args, **call_kwargs)
        spent = time.perf_counter() - start
        while time.perf_counter() - start < (1 + SLOWDOWN) * spent:
            pass
        return out

    return run


torch.compile = slowed_compile
"""


def load_average() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def run_once(name: str, selection: list[str], args: argparse.Namespace, out: Path, env: dict[str, str]) -> Path:
    """One pytest run of the selection in its own folder; returns its JSON. With --resume, a run already in ``out``
    (its JSON and its wall time in walls.json) is kept."""
    walls_file = out / "walls.json"
    if args.resume and (out / (name + ".json")).exists() and walls_file.exists():
        walls = json.loads(walls_file.read_text())
        if name in walls:
            WALLS[name] = walls[name]
            print(f"{name}: kept from an earlier invocation ({walls[name]:.0f} s)", flush=True)
            return out / (name + ".json")
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    if env.get("PLANTED_SLOWDOWN"):
        (folder / "conftest.py").write_text(PLANTED_SLOWDOWN)
    command = [sys.executable, "-m", "pytest", *selection]
    if args.workers > 1:  # pytest-xdist, one worker per GPU: each times its CUDA items; outcomes in a results file
        command += ["-n", str(args.workers), f"--inductor-results={out / (name + '.json')}"]
    else:
        command.append(f"--benchmark-json={out / (name + '.json')}")
    command += [f"--benchmark-max-time={args.max_time}", "-p", "no:cacheprovider", "-p", "no:randomly", "-W", "ignore"]
    if args.timer:
        command.append(f"--benchmark-timer={args.timer}")
    if "PYTHONPATH" not in env:  # the baseline predates the options the extra arguments may name
        command += args.extra
    if args.threads and "PYTHONPATH" not in env:  # the baseline predates the option: it gets OMP_NUM_THREADS
        command.append(f"--inductor-timing-threads={args.threads}")
    before = load_average()
    start = time.perf_counter()
    with (out / (name + ".txt")).open("w") as log:  # written as it runs: a run stopped midway leaves its log
        subprocess.run(command, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    wall = time.perf_counter() - start
    output = (out / (name + ".txt")).read_text()
    summary = next((line for line in reversed(output.splitlines()) if " in " in line), "?")
    print(f"{name}: {wall:.0f} s, {summary.strip('= ')}; {before} before", flush=True)
    WALLS[name] = wall
    walls_file.write_text(json.dumps(WALLS))
    return out / (name + ".json")


WALLS: dict[str, float] = {}


def speedups(path: Path) -> dict[tuple[str, str, str], ItemRecord]:
    run = load(str(path))
    return {
        key: cell.bench
        for key, cell in run.cells.items()
        if key[1] != EAGER and cell.bench is not None and cell.speedup is not None
    }


def stability(paths: list[Path]) -> list[str]:
    runs = [speedups(p) for p in paths]
    keys = sorted(set.intersection(*(set(r) for r in runs)))
    lines = [f"{len(keys)} entries timed in all {len(runs)} runs (speedup ±half-width of the 95% interval per run)"]
    spreads: dict[str, list[float]] = {}
    trusted: dict[str, list[float]] = {}  # entries whose interval met the target in every run
    for key in keys:
        values = [r[key].speedup or 0.0 for r in runs]
        spread = max(values) / min(values) - 1
        spreads.setdefault(key[1], []).append(spread)
        if not any(r[key].unstable for r in runs):
            trusted.setdefault(key[1], []).append(spread)
        cells = "  ".join(speedup_text(r[key]) for r in runs)
        lines.append(f"  {key[0]} [{key[2]}] {key[1]}: {cells}  spread {percent(spread)}")
    for template, values in spreads.items():
        lines.append(
            f"template {template}: median spread {percent(statistics.median(values))}, largest "
            f"{percent(max(values))} over {len(values)} entries (targets on the H200: <= 3%, <= 10%)"
        )
        if stable := trusted.get(template):
            lines.append(
                f"  of them unstable in no run: median spread {percent(statistics.median(stable))}, largest "
                f"{percent(max(stable))} over {len(stable)} entries"
            )
    unstable = sum(bool(r[k].unstable) for r in runs for k in keys)
    lines.append(f"entries marked unstable: {unstable} of {len(keys) * len(runs)}")
    return lines + sides_that_moved(runs, keys)


def sides_that_moved(runs: list[dict[tuple[str, str, str], ItemRecord]], keys: list[tuple[str, str, str]]) -> list[str]:
    """For each entry spreading more than 10%: how each side's time per call changed from the run of its lowest
    speedup to the run of its highest (the paired blocks' medians; pytest-benchmark's for compiled in runs saved
    without them). One side moving alone is the machine changing under the side it binds (a CPU-bound eager
    against a GPU-bound CUDA graph), which pairing within a run cannot cancel."""
    lines = []
    for key in keys:
        ordered = sorted((r[key] for r in runs), key=lambda record: record.speedup or 0.0)
        low, high = ordered[0], ordered[-1]
        if (high.speedup or 0.0) / (low.speedup or 1.0) - 1 <= WIDE_SPREAD:
            continue
        compiled = [record.compiled_median or record.median or 0.0 for record in (low, high)]
        eager = [record.eager_median or 0.0 for record in (low, high)]
        if not (all(compiled) and all(eager)):
            lines.append(f"  {key[0]} [{key[2]}] {key[1]}: a run lacks a side's time")
            continue
        lines.append(
            f"  {key[0]} [{key[2]}] {key[1]}: compiled time {compiled[1] / compiled[0] - 1:+.0%}, "
            f"eager time {eager[1] / eager[0] - 1:+.0%}"
        )
    if lines:
        lines.insert(
            0,
            f"spreading more than {WIDE_SPREAD:.0%}, each side's time from the lowest speedup's run to the highest's:",
        )
    return lines


def compare(base: Path, new: Path, limit: str) -> tuple[int, str]:
    command = [sys.executable, "-m", "pytest_inductor_templates.runs.cli", "compare", str(base), str(new)]
    result = subprocess.run([*command, "--fail-on", f"speedup:{limit}"], capture_output=True, text=True, check=False)
    flagged = [line for line in result.stdout.splitlines() if line.startswith("- ")]
    return result.returncode, "; ".join(flagged) or result.stderr.strip()


def gate(runs: list[Path], slowed: list[Path], limit: str) -> list[str]:
    lines = []
    same = [compare(runs[i], runs[i + 1], limit) for i in range(len(slowed))]
    planted = [compare(runs[i], slowed[i], limit) for i in range(len(slowed))]
    lines.append(f"same-commit pairs: {sum(rc == 0 for rc, _ in same)} of {len(same)} passed --fail-on speedup:{limit}")
    lines += [f"  pair {i}: exit {rc} {why}" for i, (rc, why) in enumerate(same)]
    lines.append(f"planted-slowdown pairs: {sum(rc == 1 for rc, _ in planted)} of {len(planted)} failed")
    lines += [f"  pair {i}: exit {rc} {why[:300]}" for i, (rc, why) in enumerate(planted)]
    return lines


def baseline_source(ref: str, out: Path) -> Path:
    """The repository as of ``ref``, unpacked under ``out`` (for PYTHONPATH)."""
    archive = subprocess.run(["git", "-C", str(REPOSITORY), "archive", ref], capture_output=True, check=True).stdout
    target = out / "baseline-src"
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def all_runs(
    selection: list[str], args: argparse.Namespace, out: Path, env: dict[str, str]
) -> tuple[list[Path], list[Path], Path | None]:
    """The N runs, the baseline after the first (warm caches on both sides) and the slowed runs for the gate."""
    runs, slowed, baseline = [], [], None
    for i in range(args.runs):
        runs.append(run_once(f"run-{i}", selection, args, out, env))
        if i == 0 and (args.baseline_ref or args.baseline_src):  # after the first run: both sides find warm caches
            source = args.baseline_src.resolve() if args.baseline_src else baseline_source(args.baseline_ref, out)
            threads = {"OMP_NUM_THREADS": str(args.threads)} if args.threads else {}
            baseline = run_once("baseline", selection, args, out, {**env, **threads, "PYTHONPATH": str(source)})
        if i < args.gate:
            planted = {**env, "PLANTED_SLOWDOWN": str(args.slowdown)}
            slowed.append(run_once(f"slowed-{i}", selection, args, out, planted))
    return runs, slowed, baseline


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-time", type=float, default=1.0, help="--benchmark-max-time (default 1.0)")
    parser.add_argument("--threads", type=int, help="--inductor-timing-threads")
    parser.add_argument("--timer", help="--benchmark-timer, e.g. time.process_time (CPU time: blind to other load)")
    parser.add_argument(
        "--workers", type=int, default=1, help="pytest-xdist workers, one per GPU (each then times its own items)"
    )
    parser.add_argument("--gate", type=int, default=0, metavar="P", help="same-commit and slowed pairs to compare")
    parser.add_argument("--slowdown", type=float, default=0.25, help="the planted slowdown (default 0.25)")
    parser.add_argument("--limit", default="10%", help="the gate's limit (default 10%%)")
    parser.add_argument("--baseline-ref", help="also time the selection once with the plugin as of this git ref")
    parser.add_argument("--baseline-src", type=Path, help="... or as unpacked in this folder")
    parser.add_argument(
        "--resume", action="store_true", help="keep the runs an earlier, interrupted invocation left in $OUT"
    )
    args, extra = parser.parse_known_args()
    args.extra = [a for a in extra if a != "--"]
    if args.runs < 3 or (args.gate and args.runs < args.gate + 1):
        parser.error("--runs must be >= 3 and >= --gate + 1")
    out = Path(os.environ.get("OUT", "speedup-stability")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    selection = pytest_selection(args, out)
    env = {**os.environ, "PLANTED_SLOWDOWN": ""}
    print(f"selection: {' '.join(selection)}; {load_average()}; writing to {out}", flush=True)
    cpu_log = out / "cpu-speed.txt"
    if not args.resume:  # a new invocation's probe starts a new log; a resumed one adds to it
        cpu_log.unlink(missing_ok=True)
    probe = [sys.executable, str(Path(__file__).with_name("cpu_steadiness.py")), "--seconds", "0", "--interval", "2"]
    cpu_probe = subprocess.Popen([*probe, "--log", str(cpu_log)])
    try:
        runs, slowed, baseline = all_runs(selection, args, out, env)
    finally:
        cpu_probe.terminate()
        cpu_probe.wait()
    lines = [f"selection: {' '.join(selection)}", *stability(runs)]
    walls = [WALLS[f"run-{i}"] for i in range(args.runs)]
    lines.append("wall time per run: " + ", ".join(f"{w:.0f} s" for w in walls))
    if baseline is not None:
        warm = statistics.median(walls[1:])
        lines.append(
            f"cost: {warm:.0f} s (median of the warm runs) against {WALLS['baseline']:.0f} s as of "
            f"{args.baseline_ref or args.baseline_src}: {warm / WALLS['baseline']:.2f}x (target <= 1.3x)"
        )
    if args.gate:
        lines += gate(runs, slowed, args.limit)
    lines.append(f"at the end: {load_average()}")
    lines.append(f"the CPU's speed beside the runs (cpu_steadiness.py): {summary(read_log(cpu_log))}")
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
