"""Is this machine's CPU speed steady enough to trust a speedup? (any machine; no torch, no GPU)

A speedup whose eager side is bound by the CPU (one kernel launch after another) and whose compiled side is not
(one CUDA graph replay) moves with the CPU's speed; pairing the two sides round by round cancels only what moves
both. Some virtual machines run a vCPU at two speeds, switching every few seconds, with nothing in the guest
showing it (no steal time, a fixed clock in /proc/cpuinfo): another tenant on the same physical core, say.

This script times a fixed pure-Python loop (about 5-30 ms) on each listed CPU, one probe process pinned to
each, 0.5 s apart (``--interval``), and prints per CPU the fastest, 10th, 50th and 90th percentile and slowest
time, and the share of samples more than 30% slower than the fastest. A steady machine keeps that share near 0
and the 90th percentile within a few percent of the 10th; then a run-to-run spread of speedups larger than their
intervals is not the CPU's doing.

``--log FILE`` runs one probe (pinned with ``--pin CPU``; ``--seconds 0``: until killed), appending
``epoch ms CPU`` lines; ``speedup_stability.py`` runs one beside its runs, every 2 s (it sees their load too).
``--summarize FILE`` prints such a log's line.

Usage: python benchmarks/cpu_steadiness.py [--seconds 60] [--cpus 0,5,10,15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pytest_inductor_templates.cpu_speed import LOOP, SLOW, loop_ms, slow_share


def current_cpu() -> int:
    """The CPU this thread last ran on (field 39 of /proc/thread-self/stat), or -1."""
    try:
        return int(Path("/proc/thread-self/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return -1


def probe(log: Path, seconds: float, interval: float, cpu: int | None) -> None:
    """Append ``epoch ms CPU`` to ``log``, ``interval`` s apart, for ``seconds`` (0: until killed or its parent
    process ends), pinned to ``cpu``."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    end = time.time() + seconds if seconds else float("inf")
    parent = os.getppid()
    with log.open("a", buffering=1) as out:
        while time.time() < end and os.getppid() == parent:  # a parent killed outright leaves no orphan probing
            out.write(f"{time.time():.2f} {loop_ms():.3f} {current_cpu()}\n")
            time.sleep(interval)


def read_log(log: Path) -> list[float]:
    """The loop times (ms) a probe logged (none where it logged nothing); a line cut short by a kill is skipped."""
    times: list[float] = []
    for line in (log.read_text() if log.exists() else "").split("\n")[:-1]:  # the last: "" or a partial line
        try:
            epoch, ms, cpu = line.split()
            float(epoch), int(cpu)
            times.append(float(ms))
        except ValueError:  # a line cut short, with the next one appended to it
            continue
    return times


def summary(times: list[float]) -> str:
    """Fastest, percentiles, slowest and the slow share of one probe's loop times."""
    if len(times) < 2:
        return f"{len(times)} sample(s): too few"
    ordered = sorted(times)
    deciles = statistics.quantiles(ordered, n=10, method="inclusive")
    slow = slow_share(ordered)
    return (
        f"{len(ordered)} samples: fastest {ordered[0]:.1f} ms, p10 {deciles[0]:.1f}, median "
        f"{statistics.median(ordered):.1f}, p90 {deciles[-1]:.1f}, slowest {ordered[-1]:.1f}; "
        f"{slow:.0%} more than {SLOW}x the fastest"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to probe (default 60)")
    parser.add_argument("--cpus", help="CPUs to probe, comma-separated (default: up to 4 spread over this process's)")
    parser.add_argument("--log", type=Path, help="run one probe, appending to this file (--seconds 0: until killed)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between samples (default 0.5)")
    parser.add_argument("--pin", type=int, help="with --log: the CPU to pin the probe to")
    parser.add_argument("--summarize", type=Path, help="print the summary of a --log file and exit")
    args = parser.parse_args()
    if args.interval < 0:
        parser.error("--interval must be 0 or more")
    if args.summarize:
        print(summary(read_log(args.summarize)))
        return 0
    if args.log:
        probe(args.log, args.seconds, args.interval, args.pin)
        return 0
    if args.seconds <= 0:
        parser.error("--seconds must be above 0 (0 runs a --log probe until it is killed)")
    allowed = sorted(os.sched_getaffinity(0))
    try:
        cpus = [int(c) for c in args.cpus.split(",")] if args.cpus else allowed[:: max(1, len(allowed) // 4)][:4]
    except ValueError:
        parser.error(f"--cpus takes CPU numbers, comma-separated, not {args.cpus!r}")
    if unknown := [c for c in cpus if c not in allowed]:
        parser.error(f"--cpus {unknown} not among this process's CPUs {allowed}")
    folder = Path(os.environ.get("OUT", "cpu-steadiness")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    logs = {cpu: folder / f"cpu-{cpu}.txt" for cpu in cpus}
    for log in logs.values():
        log.unlink(missing_ok=True)
    command = [sys.executable, __file__, "--seconds", str(args.seconds), "--interval", str(args.interval)]
    probes = [subprocess.Popen([*command, "--log", str(log), "--pin", str(cpu)]) for cpu, log in logs.items()]
    if failed := [cpu for cpu, process in zip(logs, probes, strict=True) if process.wait() != 0]:
        print(f"the probe(s) on CPU(s) {failed} failed (the error above)", file=sys.stderr)
        return 1
    print(
        f"a fixed {LOOP:,}-iteration Python loop, {args.interval:g} s apart for {args.seconds:g} s, one probe per CPU:"
    )
    for cpu, log in logs.items():
        print(f"  CPU {cpu}: {summary(read_log(log))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
