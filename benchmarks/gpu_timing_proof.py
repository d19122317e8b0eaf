"""The GPU-timing figures on one device, from one selection: how stable the default speedups are, whether a repeat run
lands inside their bands, whether the compare gate stays quiet on a same-commit pair and fails a planted 10% compiled
slowdown, how the wall time falls with workers sharing the GPU, and what the timing costs against an older plugin.

    OUT=/tmp/proof python benchmarks/gpu_timing_proof.py CORPUS [--samples benchmarks/gpu_timing_samples.txt]
        [--workers 1,4,8] [--best W] [--baseline-src DIR] [--steps baseline,scaling,repeat,gate] [--resume]
        [--warm-repeat]
        [-- PYTEST ARGS]

Every run is ``gpu_scaling.py``'s: eager + ``--templates`` (default ``default``) on GPU 0 with W xdist workers, from
cold Inductor and Triton caches of its own, checked and timed with the plugin's default timing, a results file and a
lock log under $OUT. The runs (each kept by --resume once finished, wall times in $OUT/walls.json):

- ``baseline-1w``: the plugin as unpacked in --baseline-src (PYTHONPATH), one worker: the cost's base.
- ``run-Ww`` for each --workers count: the scaling table (wall time, speed over one worker, the floor: the items'
  recorded timing seconds + the one-worker run's other time / W, and wall / floor, outcomes, agreement with one
  worker by ``compare``'s rule).
- ``repeat-Bw``: the best count (--best, else the fastest count) again (with --warm-repeat from ``run-Bw``'s
  caches, kept under $OUT/caches: the same compiled code and autotune choices, compiled once; else cold): each
  speedup's change against ``run-Bw``,
  by the record's ``launch_bound``, and whether the repeat's speedup lies inside the first run's band.
- ``slowed-Bw``: the best count with a planted slowdown of every compiled call (a conftest wraps torch.compile's
  result): a tenth of the call's own time (its median synchronized time over its first 10 calls) spent both on the
  GPU (``torch.cuda._sleep``) and on the host (a busy wait), so that the call is slower whichever side bounds it
  (with --warm-repeat, from ``run-Bw``'s caches too).
  ``compare --fail-on speedup:5%`` of ``run-Bw`` against ``repeat-Bw`` (should pass) and against ``slowed-Bw``
  (should fail each slowed entry).

- ``recount`` (no run; needs --best): ``run-Bw`` and ``repeat-Bw`` as an earlier invocation left them in $OUT,
  each compiled entry's band made again from its timings' figures by this plugin's band rule (records with each
  timing's probe); also written to $OUT/recount.md.

Stable: over ``run-1w`` and ``run-Bw``, the share of speedups whose band's half-width is within 2% (bound by the GPU)
or 4% (launch-bound), and the median half-width of each; and what 3, 4, 5 or 8 timings give (each entry's band over
its first K timings' speedups, loads or processes, the spread between them), so one run at the default count says
whether fewer would do. Per run, where its span went
(its lock log: timing, work in the items' own processes and in repeats, seconds by how many processes worked at
once). Prints everything and writes it to $OUT/summary.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import gpu_scaling as scaling

from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.runs.files import Run, load
from pytest_inductor_templates.student import band_floor
from pytest_inductor_templates.tables import render, seconds
from pytest_inductor_templates.timing.paired import Interval
from pytest_inductor_templates.timing.processes import across_processes, at_full_speed, spread_band, widened

GPU_BOUND_TARGET, LAUNCH_BOUND_TARGET = 0.02, 0.04
KINDS = (("bound by the GPU", False, GPU_BOUND_TARGET), ("launch-bound", True, LAUNCH_BOUND_TARGET))
SLOWDOWN = 0.10
PLANTED_SLOWDOWN = f"""
import statistics
import time

import torch

SLOWDOWN = {SLOWDOWN}
CALIBRATION_CALLS = 10  # the first calls (the check's, the warm-up's) measure the call's own synchronized time
_compile = torch.compile
_cycles: list[float] = []


def cycles_per_second() -> float:
    if not torch.cuda.is_available():  # a dry run on the CPU: the host's share alone
        return 0.0
    if not _cycles:
        torch.cuda.synchronize()
        start = time.perf_counter()
        torch.cuda._sleep(20_000_000)
        torch.cuda.synchronize()
        _cycles.append(20_000_000 / (time.perf_counter() - start))
    return _cycles[0]


def slowed_compile(*args, **kwargs):
    compiled = _compile(*args, **kwargs)
    spent: list[float] = []

    def run(*call_args, **call_kwargs):
        sync = torch.cuda.synchronize if torch.cuda.is_available() else lambda: None
        if len(spent) < CALIBRATION_CALLS:
            sync()
            start = time.perf_counter()
            out = compiled(*call_args, **call_kwargs)
            sync()
            spent.append(time.perf_counter() - start)
            return out
        extra = SLOWDOWN * statistics.median(spent)
        out = compiled(*call_args, **call_kwargs)
        if cycles_per_second():
            torch.cuda._sleep(int(extra * cycles_per_second()))  # a call bound by the GPU waits for this
        start = time.perf_counter()  # ... one bound by the host for this, after its own host time
        while time.perf_counter() - start < extra:
            pass
        return out

    return run


torch.compile = slowed_compile
"""


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    else:
        extra = []
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--samples", type=Path, default=Path(__file__).with_name("gpu_timing_samples.txt"))
    parser.add_argument("--templates", default="default")
    parser.add_argument("--device", default="cuda", help="cuda (GPU 0), or cpu for a dry run of the script")
    parser.add_argument("--workers", default="1,4,8")
    parser.add_argument("--best", type=int, help="the worker count of the repeat and gate runs (default: fastest)")
    parser.add_argument("--baseline-src", type=Path, help="an older plugin, unpacked: the cost's base")
    parser.add_argument("--steps", default="baseline,scaling,repeat,gate", help="and recount: see the docstring")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--warm-repeat", action="store_true", help="repeat and gate runs from run-Bw's caches")
    return parser.parse_args(argv), extra


def half_width(record: ItemRecord) -> float | None:
    if record.speedup is None or record.speedup_low is None or record.speedup_high is None:
        return None
    return (record.speedup_high - record.speedup_low) / 2 / record.speedup


def compiled_bench(run: Run) -> dict[tuple[str, str, str], ItemRecord]:
    return {r.key: r for r in run.records if r.kind == "bench" and r.template != "eager" and r.speedup is not None}


def stable_lines(name: str, run: Run) -> list[str]:
    lines = []
    entries = compiled_bench(run).values()
    counts = Counter(r.timing_processes or 1 for r in entries if r.speedup is not None)
    if len(counts) > 1:  # more processes where a band was wide
        timed = ", ".join(f"{n} in {k}" for k, n in sorted(counts.items()))
        lines.append(f"{name}: timed in processes: {timed} (of {sum(counts.values())} speedups)")
    for label, launch, target in KINDS:
        widths = [w for r in entries if bool(r.launch_bound) is launch and (w := half_width(r)) is not None]
        if not widths:
            lines.append(f"{name}: {label}: none")
            continue
        within = sum(w <= target for w in widths)
        lines.append(
            f"{name}: {label}: {within} of {len(widths)} within ±{target:.0%} ({within / len(widths):.0%}); median "
            f"half-width ±{statistics.median(widths):.1%}, largest ±{max(widths):.1%}"
        )
    return lines


def within_parts(widths: dict[bool, list[float]]) -> str:
    """``launch-bound 13 of 18 within ±4% (median ±1.7%)`` for each kind with bands (``widths``: half-widths by
    whether the entry is launch-bound), joined by ``; ``."""
    return "; ".join(
        f"{label} {sum(w <= target for w in widths[launch])} of {len(widths[launch])} within ±{target:.0%} "
        f"(median ±{statistics.median(widths[launch]):.1%})"
        for label, launch, target in KINDS
        if widths[launch]
    )


def process_lines(name: str, run: Run) -> list[str]:
    """Each entry's band over its timings (loads, processes): each timing's speedup and median CPU-speed probe over
    the mark of full speed, and how many timings met too few full-speed rounds."""
    lines = [
        f"{name}: each timing's speedup (its median probe / the mark; - where the band left it out); timings with too "
        "few full-speed rounds:"
    ]
    for record in sorted(compiled_bench(run).values(), key=lambda r: -(half_width(r) or 0)):
        speedups, probes = record.process_speedups or [record.speedup], record.process_probe_ms or []
        mark = record.full_speed_mark_ms
        counted = record.process_counted or [True] * len(speedups)
        figures = [
            f"{speedup:.3f}" + (f" ({probe / mark:.2f})" if mark and probe else "") + ("" if kept else "-")
            for speedup, probe, kept in zip(speedups, probes or [None] * len(speedups), counted, strict=True)
        ]
        width = half_width(record)
        band = f"±{width:.1%}" if width is not None else "no band"
        slow = f" [{record.slow_cpu_processes} slow]" if record.slow_cpu_processes else ""
        lines.append(
            f"  {record.sample.split('/')[-1][:30]:30} {record.speedup:.3f} {band:>7}  {', '.join(figures)}{slow}"
        )
    return lines


def band_over_first(timings: list[tuple[float, int]], count: int) -> Interval | None:
    """The band over the first ``count`` processes of ``timings`` (speedup, pid; each process with all its loads),
    as the plugin makes it; None where there are fewer processes."""
    order = list(dict.fromkeys(pid for _, pid in timings))
    if len(order) < count:
        return None
    kept = [(s, pid) for s, pid in timings if pid in order[:count]]
    return across_processes([Interval(s, s, s) for s, _ in kept], [pid for _, pid in kept])


def first_processes_band(record: ItemRecord, count: int) -> Interval | None:
    """The entry's band over its first ``count`` processes' timings (all their loads; in one process, its first
    ``count`` loads, each as its own); None where it has fewer."""
    speedups = record.process_speedups or []
    pids = record.process_pids or list(range(len(speedups)))
    if len(set(pids)) > 1:
        return band_over_first(list(zip(speedups, pids, strict=True)), count)
    return band_over_first([(s, load) for load, s in enumerate(speedups)], count)


def first_processes_lines(name: str, run: Run, counts: tuple[int, ...] = (2, 3, 4, 6, 8, 12)) -> list[str]:
    """What K processes give (K loads, for entries timed in one process): each entry's band over its first K
    processes' timings (over the processes' means, or over one process's loads, their 20%-trimmed mean's from six
    on; every timing counted, no floor), for each K, against the stable targets."""
    entries = [r for r in compiled_bench(run).values() if r.process_speedups]
    lines = []
    for count in counts:
        widths: dict[bool, list[float]] = {False: [], True: []}
        for record in entries:
            if (band := first_processes_band(record, count)) is not None:
                widths[bool(record.launch_bound)].append(band.half_width)
        if parts := within_parts(widths):
            lines.append(f"{name}: over the first {count} processes (loads in one): {parts}")
    return lines


def own_process_lines(name: str, run: Run, counts: tuple[int, ...] = (3, 4, 5, 7)) -> list[str]:
    """The item's own process (which compiled the sample, cold in a cold run, and checked it) against the others:
    its speedup's median offset from theirs, and what K of the other processes alone would give, for each K."""
    entries = [r for r in compiled_bench(run).values() if r.process_speedups and r.process_pids]
    offsets, lines = [], []
    for record in entries:
        own = [s for s, pid in zip(record.process_speedups, record.process_pids, strict=True) if pid == record.pid]
        others = [s for s, pid in zip(record.process_speedups, record.process_pids, strict=True) if pid != record.pid]
        if own and others:
            offsets.append(statistics.geometric_mean(own) / statistics.geometric_mean(others) - 1)
    if offsets:
        low = sum(o < 0 for o in offsets)
        lines.append(
            f"{name}: the item's own process against the others: median {statistics.median(offsets):+.1%}, "
            f"lower in {low} of {len(offsets)}, from {min(offsets):+.1%} to {max(offsets):+.1%}"
        )
    for count in counts:
        widths: dict[bool, list[float]] = {False: [], True: []}
        for record in entries:
            pairs = zip(record.process_speedups, record.process_pids, strict=True)
            if (band := band_over_first([(s, pid) for s, pid in pairs if pid != record.pid], count)) is not None:
                widths[bool(record.launch_bound)].append(band.half_width)
        if parts := within_parts(widths):
            lines.append(f"{name}: over {count} processes besides the item's own: {parts}")
    return lines


def repeat_lines(first: Run, second: Run) -> list[str]:
    one, two = compiled_bench(first), compiled_bench(second)
    rows, lines = [], []
    for launch, label, limit in ((False, "bound by the GPU", 0.05), (True, "launch-bound", 0.08)):
        keys = [k for k in one if k in two and bool(one[k].launch_bound) is launch]
        if not keys:
            continue
        changes = [abs(two[k].speedup / one[k].speedup - 1) for k in keys]
        inside = sum(one[k].speedup_low <= two[k].speedup <= one[k].speedup_high for k in keys)
        lines.append(
            f"repeat: {label}: {len(keys)} entries; change median {statistics.median(changes):.1%}, largest "
            f"{max(changes):.1%} (target {limit:.0%}); the repeat inside the first run's band: {inside} of {len(keys)}"
        )
        rows += [
            [k[0], label, f"{one[k].speedup:.3g}x ±{half_width(one[k]):.1%}", f"{two[k].speedup:.3g}x", f"{c:+.1%}"]
            for k, c in zip(keys, [two[k].speedup / one[k].speedup - 1 for k in keys], strict=True)
        ]
    keys = [k for k in one if k in two]
    if keys:
        changes = [abs(two[k].speedup / one[k].speedup - 1) for k in keys]
        inside = sum(one[k].speedup_low <= two[k].speedup <= one[k].speedup_high for k in keys)
        lines.append(
            f"repeat: all: change median {statistics.median(changes):.1%}, largest {max(changes):.1%}; inside the "
            f"first run's band: {inside} of {len(keys)} ({inside / len(keys):.0%})"
        )
    return [*lines, "", *render(["sample", "kind", "first run", "repeat", "change"], rows, markdown=True)]


def rebanded(run: Run) -> Run:
    """``run`` with each compiled entry's speedup and band made again from its timings' figures by this plugin's
    rule (``at_full_speed``, ``spread_band``, then ``band_floor``): an earlier run recounted."""
    for record in compiled_bench(run).values():
        speedups = record.process_speedups
        if not speedups or record.process_probe_ms is None:
            continue
        pids = record.process_pids or list(range(len(speedups)))
        counted = at_full_speed(record.process_probe_ms, record.full_speed_mark_ms, pids, record.launch_bound)
        spread = spread_band([Interval(s, s, s) for s in speedups], pids, counted)
        band = widened(spread, band_floor(record.launch_bound))
        record.speedup, record.speedup_low, record.speedup_high = band.median, band.low, band.high
        record.process_counted = counted
    return run


def recount_lines(out: Path, best: int) -> list[str]:
    """The stable and repeat figures of ``run-Bw`` and ``repeat-Bw`` in ``out`` (an earlier invocation's) under this
    plugin's band rule."""
    first, second = (out / f"{name}-{best}w.jsonl" for name in ("run", "repeat"))
    if not first.exists():
        return [f"recount: no {first.name} in {out}"]
    one = rebanded(load(str(first)))
    lines = [f"recount of {first.name} by this plugin's band:", *stable_lines(f"run-{best}w", one)]
    if second.exists():
        two = rebanded(load(str(second)))
        lines += [*stable_lines(f"repeat-{best}w", two), *repeat_lines(one, two)]
    return lines


def gate_lines(base: Path, same: Path, slowed: Path) -> list[str]:
    command = [sys.executable, "-m", "pytest_inductor_templates.runs.cli", "compare"]
    lines = []
    for label, new in (("same-commit pair", same), ("planted 10% slowdown", slowed)):
        done = subprocess.run(
            [*command, str(base), str(new), "--fail-on", "speedup:5%"], capture_output=True, text=True
        )
        failed = done.stdout.split("\nFAILED:\n")[1].splitlines() if "\nFAILED:\n" in done.stdout else []
        failed = [line for line in failed if line.startswith("- ") and "speedup on" in line]
        lines.append(f"gate, {label}: exit {done.returncode}; {len(failed)} entries failed the gate")
        lines += [f"  {line}" for line in failed[:40]]
    total = len(compiled_bench(load(str(base))))
    lines.append(f"(compiled entries with a speedup in the base run: {total})")
    return lines


def main() -> int:
    args, extra = parse(sys.argv[1:])
    if "recount" in args.steps.split(",") and not args.best:
        sys.exit("--steps recount needs --best: the worker count of the runs to recount")
    if args.warm_repeat and not args.best:
        sys.exit("--warm-repeat needs --best: the run whose caches the repeats start from")
    out = Path(os.environ.get("OUT") or "gpu-timing-proof").resolve()
    out.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus.resolve()
    selection = [
        f"--inductor-samples={corpus}",
        f"--inductor-sample-list={args.samples.resolve()}",
        f"--inductor-devices={args.device}",
    ]
    steps = set(args.steps.split(","))
    counts = [int(c) for c in args.workers.split(",")]
    visible = "0" if args.device == "cuda" else ""
    walls_file = out / "walls.json"
    walls: dict[str, float] = json.loads(walls_file.read_text()) if args.resume and walls_file.exists() else {}

    warm_from = args.best if args.warm_repeat else None  # the count whose caches the repeats start from
    best_caches = out / "caches" / f"run-{warm_from}w" if warm_from else None
    warm_runs = {f"repeat-{warm_from}w", f"slowed-{warm_from}w"}  # not baseline-1w, even where the count is 1

    def run(name: str, workers: int, env: dict[str, str] | None = None, conftest: str | None = None) -> Path:
        results = out / f"{name}.jsonl"
        if name in walls and results.exists():
            print(f"{name}: kept from an earlier invocation ({walls[name]:.0f} s)", flush=True)
            return results
        caches = None
        if best_caches is not None and name == f"run-{warm_from}w":
            shutil.rmtree(best_caches, ignore_errors=True)  # cold, as every scaling run; kept for the repeats
            caches = best_caches
        elif best_caches is not None and best_caches.exists() and name in warm_runs:
            caches = best_caches  # warm from run-Bw
        walls[name], last = scaling.run_once(
            selection, workers, visible, args.templates, extra, results, env, conftest, caches
        )
        walls_file.write_text(json.dumps(walls, indent=1) + "\n")
        print(f"{name}: {walls[name]:.0f} s, {last}", flush=True)
        return results

    if "baseline" in steps and args.baseline_src:  # the older plugin's own default timing (--benchmark-max-time 1)
        run("baseline-1w", 1, {"PYTHONPATH": str(args.baseline_src.resolve())})
    measured: dict[int, scaling.Measured] = {}
    if "scaling" in steps:
        for count in counts:
            path = run(f"run-{count}w", count)
            measured[count] = scaling.measured_run(path, walls[f"run-{count}w"])[0]
    best = args.best or (min(measured, key=lambda c: measured[c].wall) if measured else counts[-1])
    lines = [
        f"selection: {len(scaling_samples(args.samples))} samples of {args.samples.name}, eager + {args.templates}"
    ]
    if measured:
        base = measured[counts[0]]
        rows = []
        for count, m in measured.items():
            floor = (m.timing or 0) + (base.wall - (base.timing or 0)) / count
            agree = scaling.agreement(base.run, m.run) if base.run and m.run and count != counts[0] else None
            rows.append([
                str(count), seconds(m.wall), f"{m.wall / base.wall:.2f}x", seconds(m.timing or 0), seconds(floor),
                f"{m.wall / floor:.2f}", "{} of {}".format(*scaling.ended(m.run)) if m.run else "-",
                f"{agree[0]} of {agree[1]}" if agree else "-",
            ])  # fmt: skip
        header = ["workers", "wall", "of one worker", "timing (recorded)", "floor", "wall / floor",
                  "items with an outcome", "speedups agreeing with one worker"]  # fmt: skip
        lines += ["", *render(header, rows, markdown=True), ""]
        for count, m in measured.items():
            own = {r.pid for r in m.run.records if r.pid is not None} if m.run is not None else set()
            if (busy := scaling.busy_profile(out / f"run-{count}w.lock.log", own)) is not None:
                lines.append(f"run-{count}w: lock log: {busy}")
            if m.run is not None:
                lines += stable_lines(f"run-{count}w", m.run)
                lines += process_lines(f"run-{count}w", m.run)
                lines += first_processes_lines(f"run-{count}w", m.run)
                lines += own_process_lines(f"run-{count}w", m.run)
    if "baseline-1w" in walls and f"run-{counts[0]}w" in walls:
        new, old = walls[f"run-{counts[0]}w"], walls["baseline-1w"]
        lines.append(f"cost: one worker {new:.0f} s against {old:.0f} s with {args.baseline_src}: {new / old:.2f}x")
    first = out / f"run-{best}w.jsonl"
    if "repeat" in steps and first.exists():
        repeat = run(f"repeat-{best}w", best)
        state = f"warm: run-{best}w's caches" if best_caches is not None else "cold caches"
        lines += ["", f"repeat at {best} workers ({state}):", *repeat_lines(load(str(first)), load(str(repeat)))]
    if "gate" in steps and first.exists():
        slowed = run(f"slowed-{best}w", best, conftest=PLANTED_SLOWDOWN)
        same = out / f"repeat-{best}w.jsonl"
        if same.exists():
            lines += ["", *gate_lines(first, same, slowed)]
    if "recount" in steps:
        recounted = recount_lines(out, best)
        (out / "recount.md").write_text("\n".join(recounted) + "\n")
        lines += ["", *recounted]
    text = "\n".join(lines)
    print(text)
    if steps != {"recount"}:  # a recount alone leaves the runs' summary as it was
        (out / "summary.md").write_text(text + "\n")
    return 0


def scaling_samples(listed: Path) -> list[str]:
    return [line.strip() for line in listed.read_text().splitlines() if line.strip() and not line.startswith("#")]


if __name__ == "__main__":
    sys.exit(main())
