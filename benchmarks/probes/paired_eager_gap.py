"""Why the paired rounds' eager blocks on CUDA can be slower than eager timed alone in the same process.

For each sample, in one process, with the plugin's own block timer and paired rounds: eager model A timed alone
before any compile (E0), a model compiled with the default template (C), A alone again (E1), a fresh eager model F
built after the compile, alone (F), F paired with C in blocks of 5 ms (P5) and of 50 ms (P50), A paired with C (PA),
C alone, and A alone at the end (E2). Every block is preceded by the CPU-speed probe the paired rounds use, so each
phase says how fast the CPU ran while it was timed. The whole sequence runs twice.

Usage (H200): python benchmarks/probes/paired_eager_gap.py CORPUS SAMPLE [SAMPLE ...]
"""

from __future__ import annotations

import functools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from pytest_inductor_templates.cpu_speed import loop_ms
from pytest_inductor_templates.engine.triples import call_without_grad
from pytest_inductor_templates.samples.graphnet import GraphNetSample
from pytest_inductor_templates.timing.paired import PROBE_LOOP, PairedPlan, time_paired
from pytest_inductor_templates.timing.timers import block_timer, cuda_synchronized_perf_counter, host_share, warm_up

CUDA = torch.cuda.is_available()
TIMER = cuda_synchronized_perf_counter if CUDA else time.perf_counter
SYNC = torch.cuda.synchronize if CUDA else None
SECONDS = 0.8  # each phase, as one of five processes timed a paired item by default when this probe ran


def alone(run: Any, block_seconds: float) -> tuple[float, float]:
    """ms per call (median over blocks) and the probes' median ms, timing ``run`` alone for SECONDS."""
    time_block = block_timer(TIMER, CUDA)
    iterations = 1
    while time_block(run, iterations)[0] < block_seconds:
        iterations += 1
    per_call, probes = [], []
    start = time.perf_counter()
    while time.perf_counter() - start < SECONDS:
        probes.append(loop_ms(PROBE_LOOP))
        per_call.append(time_block(run, iterations)[0] / iterations)
    return 1e3 * statistics.median(per_call), statistics.median(probes)


def paired(eager: Any, compiled: Any, block_seconds: float) -> tuple[float, float, float, float]:
    """Eager's and compiled's ms per call, the speedup, the probes' median ms: the plugin's paired rounds."""
    plan = PairedPlan(block_seconds=block_seconds, min_rounds=10, max_seconds=SECONDS, target=0.0, min_seconds=SECONDS)
    timing = time_paired(eager, compiled, block_timer(TIMER, CUDA), plan)
    return (
        1e3 * timing.eager_median,
        1e3 * timing.compiled_median,
        timing.all_rounds.median,
        statistics.median(timing.probes),
    )


def probe_sample(sample: GraphNetSample) -> None:
    device = torch.device("cuda" if CUDA else "cpu")
    inputs = sample.make_inputs(device)[0]

    def caller(model: Any) -> Any:
        return functools.partial(call_without_grad, model, inputs)  # as the plugin calls a sample

    eager_a = caller(sample.make_model(device))
    warm_up(eager_a, SYNC)
    e0, p0 = alone(eager_a, 0.005)
    lines = [f"E0 A alone before compile {e0:.3f} ms (probe {p0:.3f})"]
    start = time.perf_counter()
    compiled = caller(torch.compile(sample.make_model(device)))
    warm_up(compiled, SYNC)
    lines.append(
        f"compile {time.perf_counter() - start:.1f} s; host share eager "
        f"{host_share(eager_a) if CUDA else '-'}, compiled {host_share(compiled) if CUDA else '-'}"
    )
    fresh = caller(sample.make_model(device))
    warm_up(fresh, SYNC)
    for sequence in (1, 2):
        e1, p1 = alone(eager_a, 0.005)
        f, pf = alone(fresh, 0.005)
        c, pc = alone(compiled, 0.005)
        lines.append(
            f"[{sequence}] E1 A alone {e1:.3f} ms (probe {p1:.3f}); F alone {f:.3f} (probe {pf:.3f}); "
            f"C alone {c:.3f} (probe {pc:.3f}); alone ratio {e1 / c:.3f}"
        )
        for name, eager, block in (
            ("P5 F+C 5ms", fresh, 0.005),
            ("P50 F+C 50ms", fresh, 0.05),
            ("PA A+C 5ms", eager_a, 0.005),
        ):
            e, cc, ratio, probe = paired(eager, compiled, block)
            lines.append(
                f"[{sequence}] {name:13} eager {e:.3f} ms, compiled {cc:.3f} ms, speedup {ratio:.3f}, "
                f"probe {probe:.3f}; eager / E1 {e / e1:.2f}"
            )
        e2, p2 = alone(eager_a, 0.005)
        lines.append(f"[{sequence}] E2 A alone {e2:.3f} ms (probe {p2:.3f})")
    print(f"== {sample.id}", *lines, sep="\n  ", flush=True)


def main() -> int:
    corpus = Path(sys.argv[1]).resolve()
    for relative in sys.argv[2:]:
        try:
            probe_sample(GraphNetSample(corpus, relative))
        except Exception as error:  # one sample's failure does not end the probe
            print(f"== {relative}: {type(error).__name__}: {error}", flush=True)
        torch._dynamo.reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
