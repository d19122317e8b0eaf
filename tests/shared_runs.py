"""Inner pytest runs that tests read, each made once a session on first use (``conftest.shared_runs``): real runs
of built-in samples on the CPU (real Inductor compiles; the timed run in a sample worker, the others in the pytest
process), saved as pytest-benchmark JSON (``NAME.json``), with their output (``NAME.out``) and exit code
(``NAME.returncode``).

- The built-in runs (base, rerun, failing, slowed, shard1, shard2), beside a planted clock and planted backends: read
  by tests/test_compare_cli.py (compare, merge, report, plot), tests/test_memory_peak.py (base, also saved as a
  results file) and tests/test_records.py (shard2, the aten shard).
- The timed run (timed): two built-ins and a user test under default and freezing, timed in pairs: read by
  tests/test_timing.py and tests/test_samples.py.

A new test that needs a real run of a selection one of these runs already makes reads it; a run several tests read
goes here.
"""

from __future__ import annotations

from pathlib import Path

from inner_runs import run_pytest_warm

from conftest import FAST, QUIET

# The built-in runs test what reads a run (compare, merge, report, plot), not isolation: in the pytest process, with no
# sample worker to start (a torch import each). The timed run keeps its worker: its tests read the worker's timing.
SAMPLES = ("--inductor-samples", "--inductor-template=default", "--inductor-devices=cpu", "-W", "ignore")
SAMPLES = (*SAMPLES, "--inductor-isolation=none")
# The runs the speedup gate compares (base, rerun, slowed) are timed by a planted clock (PLANTED_CLOCK): what they
# measure is fixed, so that the gate's verdicts hold on a machine however loaded (another test run beside this one
# moved real timings by more than the gate's 20%). The clock is pytest-benchmark's timer and so paired timing's.
GATED = ("--benchmark-max-time=0.4", "--benchmark-timer=planted_clock.now", "-p", "no:cacheprovider")
GATED = (*GATED, "--inductor-cpu-probe=0")  # its timings are planted: no CPU-speed probe (a second of CPU)
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


TIMED_USER_TESTS = """
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(32, 32)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2


def test_block_speed(inductor_benchmark):
    torch.manual_seed(0)
    with torch.no_grad():
        inductor_benchmark(Block().eval(), torch.randn(8, 32))
"""
PLANTED = {"planted_clock.py": PLANTED_CLOCK, "conftest.py": PLANTED_FAULT}

_K = ("-k", "launch_bound or embedding")
_BY_TEMPLATE = tuple(a if a != "--inductor-template=default" else "--inductor-template=aten" for a in SAMPLES)
_TIMED = ("--inductor-samples", "--inductor-template=default,freezing", "--inductor-devices=cpu")
_TIMED = (*_TIMED, "-k", "launch_bound or norm_softmax or block_speed", "--inductor-timing-min-seconds=0.3")
RUNS: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {  # name: (the files in its folder, its arguments)
    "base": (PLANTED, (*SAMPLES, *_K, "--inductor-results=base.jsonl", *GATED)),  # also a results file
    "rerun": (PLANTED, (*SAMPLES, "-k", "embedding", *GATED)),  # the same commit again
    "failing": (PLANTED, (*SAMPLES, *_K, "--inductor-backend=shifted", *FAST, *QUIET)),  # a planted miscompile
    "slowed": (PLANTED, (*SAMPLES, "-k", "embedding", "--inductor-backend=slowed", *GATED)),  # a planted slowdown
    # two shards split by template, each with its eager row (as one CI job a template runs them)
    "shard1": (PLANTED, (*SAMPLES, "-k", "launch_bound", *FAST, *QUIET)),
    "shard2": (PLANTED, (*_BY_TEMPLATE, "-k", "launch_bound", *FAST, *QUIET)),
    "timed": ({"test_user.py": TIMED_USER_TESTS}, (*FAST, *_TIMED, *QUIET)),  # its least span after FAST's
}


def make_run(name: str, root: Path) -> None:
    """Run ``name`` in ``root``, beside its files."""
    files, args = RUNS[name]
    for file, text in files.items():
        (root / file).write_text(text)
    result = run_pytest_warm(root, *args, f"--benchmark-json={name}.json")
    (root / f"{name}.out").write_text(result.stdout + result.stderr)
    (root / f"{name}.returncode").write_text(str(result.returncode))
