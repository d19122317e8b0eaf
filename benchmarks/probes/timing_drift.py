"""How a speedup drifts while it is timed, and between the models and processes that time it (GPU machine).

The plugin's speedup is the median of per-round ratios (eager block / compiled block) over a window of about
0.1-1 s. Its interval covers the noise within that window; run-to-run spreads on the H200 were larger than the
intervals. This script times one entry for much longer than the plugin does, with the plugin's own block timer
and round structure (``timing.paired``: alternating order, an untimed call before each block), and tells where
the variation lives:

- within a window: the median of every 10 consecutive rounds (what a short plugin window would report), their
  spread, and the first half against the second half of the rounds; and how often the interval from 10, 20 or 40
  consecutive rounds holds the median of all of them, the bootstrap alone against the plugin's interval;
- between models: each repeat builds the model and its inputs again (as a new triple does), after IDLE seconds
  in which the GPU does nothing (as during another item's compile);
- between processes: run the script several times (each run one process) and compare; ``--cpus 15`` pins the
  timing thread to the CPUs listed (comma-separated) while it times, to see whether where it runs matters;
- what the machine did meanwhile: the CPU the timing thread ran on, and the GPU's SM clock, utilisation and
  power from ``nvidia-smi`` sampled every 50 ms (when it is there).

On a machine without CUDA it times on the CPU (no device time, no clocks): a dry run of the script.
Usage: OUT=/tmp/drift python benchmarks/probes/timing_drift.py --builtins -k "launch_bound or conv_bn" \\
           --templates default,cudagraphs --seconds 4 --repeats 3 --idle 3 [--tag p1]
Writes drift-TAG.json (every round) and drift-TAG.txt (the summary) under $OUT (default ./timing-drift).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: the scripts this probe shares code with
from corpus_selection import add_arguments
from cpu_steadiness import current_cpu
from speedup_crosscheck import compile_options, samples

from pytest_inductor_templates.timing.measure import CPU_BLOCK_SECONDS
from pytest_inductor_templates.timing.paired import (
    BlockTimer,
    bootstrap_median,
    calibrate,
    speedup_interval,
    without_gc,
)
from pytest_inductor_templates.timing.timers import (
    CUDA_MIN_ROUND_SECONDS,
    block_timer,
    cuda_synchronized_perf_counter,
    warm_up,
)

WINDOW = 10  # rounds: the plugin's minimum, and what a short window reports
CLOCK_QUERY = "timestamp,clocks.sm,utilization.gpu,power.draw,temperature.gpu"


def start_clock_log(path: Path) -> subprocess.Popen[bytes] | None:
    """``nvidia-smi`` sampling the GPU every 50 ms into ``path``; None where there is no nvidia-smi."""
    device = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    try:
        with path.open("wb") as log:  # the child keeps its own descriptor
            return subprocess.Popen(
                [
                    "nvidia-smi",
                    f"--id={device}",
                    f"--query-gpu={CLOCK_QUERY}",
                    "--format=csv,noheader,nounits",
                    "-lms",
                    "50",
                ],
                stdout=log,
                stderr=subprocess.DEVNULL,
            )
    except OSError:
        return None


def clock_samples(path: Path) -> list[tuple[float, float, float, float]]:
    """(epoch seconds, SM MHz, utilisation %, watts) per nvidia-smi sample."""
    rows = []
    for row in csv.reader(path.read_text().splitlines()):
        try:
            stamp = time.mktime(time.strptime(row[0].strip().split(".")[0], "%Y/%m/%d %H:%M:%S"))
            stamp += float("0." + row[0].strip().split(".")[1]) if "." in row[0] else 0.0
            rows.append((stamp, float(row[1]), float(row[2]), float(row[3])))
        except (IndexError, ValueError):
            continue
    return rows


def time_rounds(eager: Any, compiled: Any, seconds: float, cuda: bool) -> list[dict[str, float]]:
    """Paired rounds as the plugin times them (garbage collector held off), for ``seconds``: per round, epoch
    time, per-call wall and device seconds of each side, and the CPU the timing thread ran on."""
    timer = block_timer(cuda_synchronized_perf_counter, cuda=True) if cuda else block_timer(time.perf_counter, False)
    block = CUDA_MIN_ROUND_SECONDS if cuda else CPU_BLOCK_SECONDS
    rounds: list[dict[str, float]] = []
    start = time.perf_counter()
    with without_gc():
        iterations = (calibrate(eager, timer, block), calibrate(compiled, timer, block))
        while time.perf_counter() - start < seconds:
            rounds.append(time_round((eager, compiled), iterations, timer, odd=len(rounds) % 2 == 1))
    return rounds


def time_round(
    sides: tuple[Callable[[], Any], Callable[[], Any]], iterations: tuple[int, int], timer: BlockTimer, odd: bool
) -> dict[str, float]:
    """One round: each side's block, eager first in even rounds, each after an untimed call."""
    entry: dict[str, float] = {"epoch": time.time()}
    for side in (1, 0) if odd else (0, 1):
        sides[side]()
        wall, device = timer(sides[side], iterations[side])
        name = ("eager", "compiled")[side]
        entry[name] = wall / iterations[side]
        entry[name + "_device"] = (device or 0.0) / iterations[side]
    entry["cpu"] = current_cpu()
    return entry


def time_entry(
    sample: Any, template: str, device: torch.device, seconds: float, cpus: set[int] | None
) -> list[dict[str, float]]:
    """One entry as a new triple times it: the model and inputs built again, compiled (warm cache), warmed up; timed
    on ``cpus`` (None: wherever the scheduler puts the thread)."""
    torch._dynamo.reset()
    inputs = sample.make_inputs(device)[0]
    model = sample.make_model(device)
    compiled = torch.compile(sample.make_model(device), options=compile_options(template))
    cuda = device.type == "cuda"
    synchronize = torch.cuda.synchronize if cuda else None
    with torch.no_grad():
        eager_run = lambda: model(*inputs.args, **inputs.kwargs)  # noqa: E731
        compiled_run = lambda: compiled(*inputs.args, **inputs.kwargs)  # noqa: E731
        warm_up(compiled_run, synchronize)
        warm_up(eager_run, synchronize)
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cpus or before)
        try:
            return time_rounds(eager_run, compiled_run, seconds, cuda)
        finally:
            os.sched_setaffinity(0, before)


def coverage(ratios: list[float], window: int) -> str:
    """How often an interval from ``window`` consecutive rounds holds the median of all the rounds: the bootstrap
    alone against the plugin's interval (bootstrap and batch means together)."""
    overall, starts = statistics.median(ratios), range(0, len(ratios) - window + 1, window)
    held = [0, 0]
    for start in starts:
        chunk = ratios[start : start + window]
        for k, interval in enumerate((bootstrap_median(chunk), speedup_interval(chunk))):
            held[k] += interval.low <= overall <= interval.high
    return f"{window} rounds: bootstrap {held[0]}/{len(starts)}, plugin {held[1]}/{len(starts)}"


def summary(name: str, rounds: list[dict[str, float]], clocks: list[tuple[float, float, float, float]]) -> str:
    ratios = [r["eager"] / r["compiled"] for r in rounds]
    if len(ratios) < 2 * WINDOW:
        return f"{name}: {len(rounds)} rounds, too few to compare windows"
    windows = [statistics.median(ratios[i : i + WINDOW]) for i in range(0, len(ratios) - WINDOW + 1, WINDOW)]
    half = len(ratios) // 2
    overall = statistics.median(ratios)
    eager_us = [r["eager"] * 1e6 for r in rounds]
    compiled_us = [r["compiled"] * 1e6 for r in rounds]
    span = (rounds[0]["epoch"], rounds[-1]["epoch"])
    during = [c for c in clocks if span[0] <= c[0] <= span[1]]
    sm = f"SM {min(c[1] for c in during):.0f}-{max(c[1] for c in during):.0f} MHz" if during else "SM clock -"
    if during:
        sm += f", util {statistics.median(c[2] for c in during):.0f}%, {statistics.median(c[3] for c in during):.0f} W"
    return (
        f"{name}: {len(rounds)} rounds, speedup {overall:.3f}; {WINDOW}-round windows "
        f"{min(windows):.3f}-{max(windows):.3f} (spread {max(windows) / min(windows) - 1:.1%}), first window "
        f"{windows[0]:.3f}; halves {statistics.median(ratios[:half]):.3f} / {statistics.median(ratios[half:]):.3f}; "
        f"eager {statistics.median(eager_us):.1f} us ({min(eager_us):.1f}-{max(eager_us):.1f}), compiled "
        f"{statistics.median(compiled_us):.1f} us ({min(compiled_us):.1f}-{max(compiled_us):.1f}); "
        f"CPUs {sorted({int(r['cpu']) for r in rounds})}; {sm}; the whole median inside the intervals of "
        + ", ".join(coverage(ratios, window) for window in (10, 20, 40) if len(ratios) >= 2 * window)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--seconds", type=float, default=4.0, help="how long each entry is timed (default 4)")
    parser.add_argument("--repeats", type=int, default=3, help="each entry's model built again this many times")
    parser.add_argument("--idle", type=float, default=3.0, help="seconds the GPU idles before each repeat")
    parser.add_argument("--tag", default=str(os.getpid()), help="names this process's files")
    parser.add_argument("--cpus", help="pin the timing thread to these CPUs while it times (e.g. 15 or 2,3)")
    args = parser.parse_args()
    try:
        cpus = {int(cpu) for cpu in args.cpus.split(",")} if args.cpus else None
    except ValueError:
        parser.error(f"--cpus: expected CPU numbers such as 15 or 2,3, got {args.cpus!r}")
    if cpus and not cpus <= os.sched_getaffinity(0):
        parser.error(f"--cpus: {args.cpus} are not all among this process's CPUs {sorted(os.sched_getaffinity(0))}")
    cuda = torch.cuda.is_available()
    out = Path(os.environ.get("OUT", "timing-drift")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    clock_path = out / f"clocks-{args.tag}.csv"
    sampler = start_clock_log(clock_path) if cuda else None
    device = torch.device("cuda" if cuda else "cpu")
    results: list[dict[str, Any]] = []
    try:
        for sample in samples(args):
            if args.keyword and not any(word.strip() in sample.id for word in args.keyword.split(" or ")):
                continue
            for template in args.templates.split(","):
                for repeat in range(args.repeats):
                    time.sleep(args.idle)
                    rounds = time_entry(sample, template, device, args.seconds, cpus)
                    results.append({"sample": sample.id, "template": template, "repeat": repeat, "rounds": rounds})
    finally:
        if sampler is not None:
            sampler.terminate()
            sampler.wait()
    (out / f"drift-{args.tag}.json").write_text(json.dumps(results))  # first: every round, whatever follows
    clocks = clock_samples(clock_path) if sampler is not None else []
    machine = torch.cuda.get_device_name() if cuda else "the CPU"
    where = f"timing thread on CPUs {args.cpus}" if args.cpus else "timing thread not pinned"
    lines = [f"process {args.tag} on {machine}, {len(os.sched_getaffinity(0))} usable CPUs, {where}"]
    for entry in results:
        name = f"{entry['sample']} [{entry['template']}] repeat {entry['repeat']}"
        lines.append(summary(name, entry["rounds"], clocks))
    (out / f"drift-{args.tag}.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
