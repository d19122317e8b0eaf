"""Inner pytest runs that tests in several files read, each made once a session (``conftest.builtin_runs``).

The built-in runs: real runs of built-in samples on the CPU (a worker process each, real Inductor compiles), saved as
pytest-benchmark JSON (``NAME.json``), with their output (``NAME.out``) and exit code (``NAME.returncode``); the base
run also as a results file (``base.jsonl``). Read by tests/test_compare_cli.py (compare, merge, report, plot),
tests/test_memory_peak.py (the base run) and tests/test_records.py (the aten shard).
"""

from __future__ import annotations

from pathlib import Path

from conftest import FAST, QUIET, run_pytest

SAMPLES = ("--inductor-samples", "--inductor-template=default", "--inductor-devices=cpu", "-W", "ignore")
# The runs the speedup gate compares (base, rerun, slowed) are timed by a planted clock (PLANTED_CLOCK): what they
# measure is fixed, so that the gate's verdicts hold on a machine however loaded (another test run beside this one
# moved real timings by more than the gate's 20%). The clock is pytest-benchmark's timer and so paired timing's.
GATED = ("--benchmark-max-time=0.4", "--benchmark-timer=planted_clock.now", "-p", "no:cacheprovider")
GATE = ("--fail-on", "speedup:20%")

# A clock that moves 1 ms at each module call made outside compiled code (each of an eager model's modules, the one
# OptimizedModule of a compiled model), by what the slowed backend adds, and 1 ns at each read (pytest-benchmark
# reads the timer's resolution from it); nothing else moves it. On it the embedding sample's eager call takes 3 ms
# (its model and two submodules), the compiled call 1 ms.
PLANTED_CLOCK = """
import torch

NOW = [0.0]
MODULE_CALL = 1e-3


def now():
    NOW[0] += 1e-9
    return NOW[0]


def advance(seconds):
    NOW[0] += seconds


def _module_call(module, args):
    if not torch.compiler.is_compiling():
        NOW[0] += MODULE_CALL


torch.nn.modules.module.register_module_forward_pre_hook(_module_call)
"""

# Backends that compile with Inductor and then add 0.5 to the first output element of the embedding sample (a real,
# planted miscompile), or make every compiled call take twice as long on the planted clock (a planted slowdown).
PLANTED_FAULT = """
import planted_clock
import torch


def shifted(gm, example_inputs):
    compiled = torch._inductor.compile(gm, example_inputs)
    if not any(t.dtype == torch.int64 for t in example_inputs if isinstance(t, torch.Tensor)):
        return compiled

    def run(*args):
        out = list(compiled(*args))
        out[0] = out[0] + 0.5
        return out

    return run


torch._dynamo.register_backend(name="shifted")(shifted)


def slowed(gm, example_inputs):  # Inductor's program, taking as long again on the planted clock
    compiled = torch._inductor.compile(gm, example_inputs)

    def run(*args):
        planted_clock.advance(planted_clock.MODULE_CALL)
        return compiled(*args)

    return run


torch._dynamo.register_backend(name="slowed")(slowed)
"""


_K = ("-k", "launch_bound or embedding")
_BY_TEMPLATE = tuple(a if a != "--inductor-template=default" else "--inductor-template=aten" for a in SAMPLES)
BUILTIN_RUNS = {
    "base": (*SAMPLES, *_K, "--inductor-results=base.jsonl", *GATED),  # also a results file
    "rerun": (*SAMPLES, "-k", "embedding", *GATED),  # the same commit again
    "failing": (*SAMPLES, *_K, "--inductor-backend=shifted", *FAST, *QUIET),  # a planted miscompile
    "slowed": (*SAMPLES, "-k", "embedding", "--inductor-backend=slowed", *GATED),  # a planted slowdown
    "shard1": (*SAMPLES, "-k", "launch_bound", *FAST, *QUIET),  # two shards split by template, each with its
    "shard2": (*_BY_TEMPLATE, "-k", "launch_bound", *FAST, *QUIET),  # eager row (as one CI job a template runs them)
}


def make_builtin_run(name: str, root: Path) -> None:
    """Built-in run ``name`` in ``root``, beside the planted clock and backends."""
    (root / "planted_clock.py").write_text(PLANTED_CLOCK)
    (root / "conftest.py").write_text(PLANTED_FAULT)
    result = run_pytest(root, *BUILTIN_RUNS[name], f"--benchmark-json={name}.json")
    (root / f"{name}.out").write_text(result.stdout + result.stderr)
    (root / f"{name}.returncode").write_text(str(result.returncode))
