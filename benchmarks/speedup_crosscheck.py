"""An independent reference for the plugin's speedups: eager and ``torch.compile`` timed interleaved with
``torch.utils.benchmark.Timer``, no plugin code in the timed path (the plugin only builds the samples).

For each sample and template: a fresh eager model and one compiled with ``torch.compile(options=...)`` (the
template's settings), both warmed up under ``no_grad``; then R repetitions, each timing a block of eager calls
and a block of compiled calls with ``Timer.timeit`` (the order alternating; a block lasts at least 5 ms on CUDA,
1 ms on the CPU; Timer synchronizes CUDA around it). The reference speedup is median(eager) / median(compiled)
over the repetitions, as PyTorch's dynamo benchmark harness computes it.

With --plugin-run RUN (the plugin's pytest-benchmark JSON or results file over the same selection, e.g. a run of
speedup_stability.py), each plugin speedup is checked against the reference: inside the plugin's 95% interval or
not (target: at least 90% of them), and the ratio plugin / reference.

Usage (H200):
  OUT=/tmp/crosscheck python benchmarks/speedup_crosscheck.py --builtins --corpus PATH --samples 20 \\
      --templates default,cudagraphs --plugin-run /tmp/stability/run-0.json
Writes crosscheck.json and crosscheck.txt under $OUT (default ./speedup-crosscheck).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from corpus_selection import add_arguments, corpus_samples
from torch.utils.benchmark import Timer

from pytest_inductor_templates.runs.files import RunError, load

REPETITIONS = 40


def block_seconds(device: torch.device) -> float:
    return 0.005 if device.type == "cuda" else 0.001


def calibrate(timer: Timer, seconds: float) -> int:
    number = 1
    while (elapsed := timer.timeit(number).raw_times[0]) < seconds and number < 1_000_000:
        number = max(number + 1, int(number * seconds / max(elapsed, 1e-9) * 1.2))
    return number


def reference(model: Any, compiled: Any, inputs: Any, device: torch.device, repetitions: int) -> dict[str, float]:
    """Interleaved Timer blocks of eager and compiled; median(eager) / median(compiled), and the median ratio."""
    stmt = "model(*inputs.args, **inputs.kwargs)"
    timers = [Timer(stmt, globals={"model": m, "inputs": inputs}) for m in (model, compiled)]
    with torch.no_grad():
        for m in (model, compiled):
            for _ in range(5):
                m(*inputs.args, **inputs.kwargs)
        numbers = [calibrate(t, block_seconds(device)) for t in timers]
        times: list[list[float]] = [[], []]
        for repetition in range(repetitions):
            for side in (0, 1) if repetition % 2 == 0 else (1, 0):
                times[side].append(timers[side].timeit(numbers[side]).raw_times[0] / numbers[side])
    eager, compiled_times = statistics.median(times[0]), statistics.median(times[1])
    ratios = [e / c for e, c in zip(*times, strict=True)]
    return {
        "eager": eager,
        "compiled": compiled_times,
        "speedup": eager / compiled_times,
        "median_ratio": statistics.median(ratios),
    }


def samples(args: argparse.Namespace) -> list[Any]:
    from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES
    from pytest_inductor_templates.samples.graphnet import GraphNetSample

    chosen: list[Any] = list(BUILTIN_SAMPLES) if args.builtins else []
    if args.corpus is not None:
        root = args.corpus.resolve()
        chosen += [GraphNetSample(root, relative) for relative in corpus_samples(root, args.samples)]
    return chosen


def compile_options(template: str) -> dict[str, Any] | None:
    from pytest_inductor_templates.templates.registry import TemplateRegistry

    found = TemplateRegistry()[template]
    if found.config_patches:
        raise SystemExit(f"template {template!r} needs a scoped config patch; this reference times plain options")
    return dict(found.compile_options) or None


def plugin_speedups(path: Path) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The plugin's speedups and intervals per (sample, template, device), from its pytest-benchmark JSON or its
    results file (what speedup_stability.py --workers writes)."""
    run = load(str(path))
    return {
        key: {
            "speedup": cell.bench.speedup,
            "speedup_low": cell.bench.speedup_low,
            "speedup_high": cell.bench.speedup_high,
        }
        for key, cell in run.cells.items()
        if cell.bench is not None and cell.bench.speedup is not None
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    parser.add_argument("--repetitions", type=int, default=REPETITIONS)
    parser.add_argument(
        "--plugin-run",
        type=Path,
        action="append",
        default=[],
        help="the plugin's pytest-benchmark JSON or results file (repeatable)",
    )
    parser.add_argument("--threads", type=int, help="torch.set_num_threads (as the plugin's --inductor-timing-threads)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(os.environ.get("OUT", "speedup-crosscheck")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if args.devices.startswith("cuda") and torch.cuda.is_available() else "cpu")
    plugin: dict[tuple[str, str, str], dict[str, Any]] = {}
    for path in args.plugin_run:
        try:
            plugin.update(plugin_speedups(path))
        except RunError as error:
            print(error, file=sys.stderr)
            return 2
    results, lines = [], []
    started = time.perf_counter()
    for sample in samples(args):
        if args.keyword and args.keyword not in sample.id:
            continue
        try:
            inputs = sample.make_inputs(device)[0]
            model = sample.make_model(device)
        except Exception as error:  # a sample that cannot be built here is reported, not fatal
            lines.append(f"{sample.id}: not built: {type(error).__name__}: {str(error)[:120]}")
            continue
        for template in args.templates.split(","):
            torch._dynamo.reset()
            try:
                compiled = torch.compile(sample.make_model(device), options=compile_options(template))
                figures = reference(model, compiled, inputs, device, args.repetitions)
            except Exception as error:
                lines.append(f"{sample.id} {template}: failed: {type(error).__name__}: {str(error)[:120]}")
                continue
            key = (sample.id, template, "cuda:0" if device.type == "cuda" else "cpu")
            entry: dict[str, Any] = {"sample": key[0], "template": template, "device": key[2], **figures}
            line = f"{key[0]} [{key[2]}] {template}: reference {figures['speedup']:.3g}x"
            line += f" (eager {figures['eager'] * 1e6:.1f} us, compiled {figures['compiled'] * 1e6:.1f} us)"
            if key in plugin:
                record = plugin[key]
                inside = record["speedup_low"] <= figures["speedup"] <= record["speedup_high"]
                entry |= {"plugin": record["speedup"], "plugin_low": record["speedup_low"]}
                entry |= {"plugin_high": record["speedup_high"], "inside": inside}
                line += f"; plugin {record['speedup']:.3g}x [{record['speedup_low']:.3g}, {record['speedup_high']:.3g}]"
                line += f" ({record['speedup'] / figures['speedup']:.3f} of it): {'inside' if inside else 'OUTSIDE'}"
            results.append(entry)
            lines.append(line)
            print(line, flush=True)
        del model
    matched = [r for r in results if "inside" in r]
    if matched:
        inside = sum(r["inside"] for r in matched)
        ratios = sorted(abs(r["plugin"] / r["speedup"] - 1) for r in matched)
        lines.append(
            f"{inside} of {len(matched)} plugin speedups ({inside / len(matched):.0%}) have the reference inside their "
            f"95% interval (target >= 90%); |plugin / reference - 1|: median {statistics.median(ratios):.1%}, "
            f"largest {ratios[-1]:.1%}"
        )
    machine = torch.cuda.get_device_name() if device.type == "cuda" else "the CPU"
    lines.append(f"{len(results)} references in {time.perf_counter() - started:.0f} s on {machine}")
    (out / "crosscheck.json").write_text(json.dumps(results, indent=2))
    (out / "crosscheck.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-2:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
