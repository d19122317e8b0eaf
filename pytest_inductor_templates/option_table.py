"""The plugin's option table: each option, its ini twin and its help; declared to pytest and rendered for the docs.

``settings.Settings`` reads the values once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from .tables import render

GROUP = "inductor-templates"
SAMPLE_DTYPES = ("float16", "bfloat16", "float32", "float64")
SAMPLE_WEIGHTS = ("parameters", "inputs")  # --inductor-sample-weights: how a GraphNet sample's weights are passed
BUILTIN_SAMPLES = "builtin"  # the --inductor-samples value naming the built-in samples
ISOLATION_MODES = ("process", "none")
DYNAMIC_VALUES = ("true", "false", "auto")
ON_OFF = ("on", "off")
TF32_VALUES = ON_OFF  # --inductor-tf32; absent: torch's own flags
RECYCLE_TRIPLES = 100  # --inductor-recycle-triples' default
DIAGNOSE_BUDGET = 300.0  # --inductor-diagnose-budget's default, seconds
CPU_PROBE_SECONDS = 1.0  # --inductor-cpu-probe's default
DIAGNOSE_MAX = 20  # --inductor-diagnose-max's default
DIAGNOSE_PROCESSES = 2  # --inductor-diagnose-processes' default
CUDA_PROCESSES = 8  # --inductor-timing-processes' default on CUDA: a process's loads share its offset
CPU_PROCESSES = 1  # ... on the CPU (its rounds already meet the host's speeds within one process)
CUDA_TIMINGS = 4  # on CUDA --inductor-timing-loads' default is this over the processes timing an item (1 in each of 4)
CPU_LOADS = 1  # --inductor-timing-loads' default on the CPU
LOADS_COMPILE_SECONDS = 30.0  # a compiled item's later loads start only while their compiles took less than this
REPRO_DIR = "inductor-repros"  # --inductor-repro-dir's default, under the invocation directory


@dataclass(frozen=True)
class Option:
    """One option: ``--inductor-NAME`` on the command line and ``inductor_NAME`` in ini/TOML."""

    name: str  # the ini key and argparse dest, e.g. ``inductor_template``
    help: str
    metavar: str | None = None
    ini_type: str | None = "string"  # pytest's ini type; None: command line only
    argparse: dict[str, Any] = field(default_factory=dict)  # action, nargs, const (no choices: see ``values``)
    values: tuple[str, ...] = ()  # the values it takes, for the docs; Settings checks them (one line, exit 4)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


OPTIONS = (
    Option(
        "inductor_template",
        "template(s) to compile with: a name, a comma list, or all (see --inductor-list-templates)",
        "TEMPLATE",
    ),
    Option("inductor_mode", "torch.compile mode, e.g. reduce-overhead", "MODE"),
    Option(
        "inductor_options",
        "Inductor options as a JSON object, or @FILE holding one (a relative FILE is relative to where the value "
        "was given)",
        "OPTIONS",
    ),
    Option("inductor_backend", "torch.compile backend (default: inductor)", "NAME"),
    Option(
        "inductor_fullgraph",
        "compile with fullgraph=True: a graph break fails the test",
        ini_type="bool",
        argparse={"action": "store_true"},
    ),
    Option(
        "inductor_dynamic",
        "torch.compile dynamic=: true, false or auto (default auto; the bare flag means true)",
        argparse={"nargs": "?", "const": "true"},
        values=DYNAMIC_VALUES,
    ),
    Option("inductor_templates_file", "TOML file with user templates ([templates.NAME] tables)", "TOML"),
    Option(
        "inductor_devices",
        "devices of the matrix: cpu, cuda, cuda:N, a comma list, or all (default: every CUDA device, else cpu)",
        "DEVICES",
    ),
    Option(
        "inductor_samples",
        "run samples: the built-ins (bare flag or 'builtin') or every GraphNet-format sample under DIR; "
        "repeatable (ini: one a line)",
        "DIR",
        ini_type="linelist",
        argparse={"action": "append", "nargs": "?", "const": BUILTIN_SAMPLES},
    ),
    Option(
        "inductor_sample_list",
        "run only the samples whose paths (relative to their root) FILE lists, one a line",
        "FILE",
    ),
    Option(
        "inductor_sample_dtype",
        "run every sample with its floating weights and inputs cast to DTYPE: float16, bfloat16, float32 or "
        "float64 (ids gain @DTYPE)",
        "DTYPE",
        values=SAMPLE_DTYPES,
    ),
    Option(
        "inductor_sample_weights",
        "how a GraphNet sample's weights reach its graph: parameters (the default: the module's own parameters and "
        "buffers, as a deployed model holds them, so freezing can fold them and CUDA graphs keep them in place) or "
        "inputs (forward arguments, as GraphNet captured and runs them)",
        "|".join(SAMPLE_WEIGHTS),
    ),
    Option(
        "inductor_tolerance",
        "compare every floating output with this rtol and absolute atol instead of torch.testing's per-dtype "
        "defaults (whose atol scales with each output); an output beyond it still passes when the float64 second "
        "opinion clears it, unless --inductor-second-opinion off",
        "RTOL,ATOL",
    ),
    Option(
        "inductor_second_opinion",
        "on (the default): an output beyond the tolerance passes when it is about as close to a float64 run as "
        "eager is; off: it fails (a strict check)",
        values=ON_OFF,
    ),
    Option(
        "inductor_tf32",
        "TF32 for every item the plugin runs (compile, check, timing; eager and compiled alike), with an Inductor "
        "cache of the mode's own: off holds float32 GEMMs and convolutions to float32 (a strict check on a GPU), on "
        "allows TF32 in both; default: torch's flags as they are (cuDNN convolutions in TF32, GEMMs not)",
        values=TF32_VALUES,
    ),
    Option(
        "inductor_fresh_cache",
        "compile every (sample, template, device) triple and every user test with an empty Inductor and AOTAutograd "
        "cache of its own, removed after it: every compile is cold (compile-time benchmarks); default: the caches in "
        "force, so a rerun compiles warm",
        ini_type="bool",
        argparse={"action": "store_const", "const": True},
    ),
    Option(
        "inductor_diagnose",
        "diagnose every failing check (accuracy_fail, compile_fail, runtime_fail) after its verdict: the stage, the "
        "setting and the operator at fault, numerics or miscompile, and a standalone repro.py",
        ini_type="bool",
        argparse={"action": "store_const", "const": True},
    ),
    Option(
        "inductor_diagnose_budget",
        f"seconds one diagnosis may take (default {DIAGNOSE_BUDGET:g}); one stopped there keeps what it found",
        "SECONDS",
    ),
    Option(
        "inductor_diagnose_max",
        f"diagnose at most N failing items in a run (default {DIAGNOSE_MAX}), so that a corpus with many failures "
        "stays bounded",
        "N",
    ),
    Option(
        "inductor_diagnose_run_budget",
        "seconds all the run's diagnoses may take together, counted across pytest-xdist's workers (default: no run "
        "budget, only --inductor-diagnose-max); a diagnosis gets what is left when it is less than its own budget. "
        "With it, failed sample items are diagnosed after the run's items, smallest graph first, and their records "
        "amended (diagnosis_deferred)",
        "SECONDS",
    ),
    Option(
        "inductor_diagnose_processes",
        f"processes a diagnosis runs its independent bisector checks in, at most the usable CPUs (default "
        f"{DIAGNOSE_PROCESSES}; 1: every check in the diagnosis's own process)",
        "N",
    ),
    Option(
        "inductor_repro_dir",
        "where each diagnosed item's repro.py goes, one folder per item (default: inductor-repros under the "
        "directory pytest was started in)",
        "DIR",
    ),
    Option(
        "inductor_require_effect",
        "fail a compiled item whose template had no effect (default: warn, and mark it in the summary)",
        ini_type="bool",
        argparse={"action": "store_const", "const": True},
    ),
    Option(
        "inductor_isolation",
        "where sample items run: process (the default on Linux and macOS: a worker process, so that a crash, hang "
        "or CUDA fault ends one item, not the run) or none (in the pytest process)",
        values=ISOLATION_MODES,
    ),
    Option(
        "inductor_timeout",
        "stop a sample item that runs longer than SECONDS: outcome timeout, naming the phase (building, "
        "compiling, eager call, compiled call, timing)",
        "SECONDS",
    ),
    Option(
        "inductor_results",
        "append each item's record to FILE (JSON lines) as it ends; also under pytest-xdist and --benchmark-skip, "
        "and a run cut short leaves it readable, marked partial",
        "FILE",
    ),
    Option(
        "inductor_html",
        "write the run as one self-contained HTML page to FILE at the end of the session (the page "
        "`pytest-inductor-templates report RUN --format html` writes: summary per template, charts, the grid of "
        "samples x templates, each failure's story); also under pytest-xdist",
        "FILE",
    ),
    Option(
        "inductor_require_run",
        "fail a run in which every item was skipped (the samples' eager reference rows aside)",
        ini_type="bool",
        argparse={"action": "store_const", "const": True},
    ),
    Option(
        "inductor_memory_budget",
        "skip, with the reason, a sample whose weights and inputs take more than SIZE (e.g. 8GiB)",
        "SIZE",
    ),
    Option(
        "inductor_recycle_triples",
        f"start a fresh worker process after N (sample, template, device) triples (default {RECYCLE_TRIPLES})",
        "N",
    ),
    Option(
        "inductor_recycle_rss",
        "start a fresh worker process after a triple that left it holding more than SIZE of memory (e.g. 16GiB)",
        "SIZE",
    ),
    Option(
        "inductor_timing_threads",
        "torch's intra-op CPU threads for every item the plugin runs (built, compiled, checked, timed); default: "
        "the CPUs this process may use, shared among pytest-xdist workers (one thread on a share of at most 2 CPUs; "
        "with one thread, CPU items are timed by the process's CPU time unless --benchmark-timer is given)",
        "N",
    ),
    Option(
        "inductor_lock_log",
        "under pytest-xdist, or where compiled items are timed in several processes, write a line to FILE for "
        "each time a sample worker held the host lock (PID GROUP "
        "DETAIL START END: work, a timing and its device, a compile beside timings, the start of Inductor's compile "
        "pool): what ran beside each timing, for debugging",
        "FILE",
    ),
    Option(
        "inductor_speedup_precision",
        "paired timing goes on, within a compiled item's --benchmark-max-time (2-4 s on CUDA, up to 2 s on the CPU), "
        "until the speedup's 95 percent interval is within +-PCT percent of it (default 2, or 4 for a launch-bound "
        "CUDA item); an entry whose interval stays wider is marked unstable",
        "PCT",
    ),
    Option(
        "inductor_timing_processes",
        "a compiled sample item's paired timing runs in N worker processes: its own, then repeats of the same "
        "compiled code (from the compile cache) in others, each timing its share of the item's span, and its "
        "speedup's band comes from the spread between their means (from six on, their mean with the farthest "
        "fifth each side, rounded down, left out; on CUDA over the timings whose CPU ran at full speed, where they "
        "are more than half, and at least +-1 percent, +-2 launch-bound); N-M: in N, then in more, up to M, while "
        f"the band is wider than its target (default: {CUDA_PROCESSES} on CUDA, {CPU_PROCESSES} on the CPU; always 1 "
        "with --inductor-isolation=none, where only --inductor-timing-loads repeats a timing)",
        "N[-M]",
    ),
    Option(
        "inductor_timing_loads",
        "each process times a compiled sample item in N loads: the model as the check compiled it, then N-1 times "
        "compiled again from the compile cache (Dynamo reset, a fresh copy of the model), each load timing its share "
        f"of the item's span, a later load only while the loads' compiles took under {LOADS_COMPILE_SECONDS:g} s; the "
        "speedup's band comes from the spread between the processes' means, or in one process between its loads "
        f"(default: on CUDA at least {CUDA_TIMINGS} timings in all, {-(-CUDA_TIMINGS // CUDA_PROCESSES)} in each of "
        f"{CUDA_PROCESSES} processes or {CUDA_TIMINGS} in one; {CPU_LOADS} on the CPU; on CUDA a later load's speedup "
        "can differ from a fresh process's by tens of percent: the guide says where)",
        "N",
    ),
    Option(
        "inductor_timing_min_seconds",
        "paired timing of a compiled item spans at least SECONDS, beyond its --benchmark-max-time if need be, so "
        "that its rounds meet each speed a CPU switches between (default: 2 on CUDA, up to 4 while the interval is "
        "wider than its target; 0 on the CPU)",
        "SECONDS",
    ),
    Option(
        "inductor_timing_follow_cpu",
        "on: before each paired round on CUDA, the timing thread moves to a CPU that runs at full speed (where a "
        "VM switches each vCPU between two speeds, a launch-bound speedup then meets the same speed in every "
        "process); off: the rounds stay where the scheduler puts them (default off; Linux only)",
        values=ON_OFF,
    ),
    Option(
        "inductor_compile_beside_timing",
        "on: the host's CPUs are split, a quarter (whole cores) for timings and the rest for work, and a compile "
        "that does not touch the GPU (no autotuning, freezing or C++ wrapper) goes on beside the other processes' "
        "CUDA timings instead of waiting for them, and they for it; off: no work beside a timing (default off; CUDA "
        "devices only; Linux only)",
        values=ON_OFF,
    ),
    Option(
        "inductor_cpu_probe",
        "before timing, probe for SECONDS whether the CPU's speed holds still, and say so in the header and the "
        f"results (default {CPU_PROBE_SECONDS:g}; 0: no probe)",
        "SECONDS",
    ),
    Option(
        "inductor_list_templates",
        "list every template, its settings and availability, then exit",
        ini_type=None,
        argparse={"action": "store_true"},
    ),
)
SELECTION_KINDS = ("inductor_template", "inductor_mode", "inductor_options")  # at most one of them


def register(parser: pytest.Parser) -> None:
    """Declare every option of the table and its ini twin."""
    group = parser.getgroup(GROUP, "torch.compile / Inductor templates")
    for option in OPTIONS:
        metavar = option.metavar or ("{" + ",".join(option.values) + "}" if option.values else None)
        extra = {"metavar": metavar} if metavar else {}
        group.addoption(option.flag, dest=option.name, default=None, help=option.help, **option.argparse, **extra)
        if option.ini_type is not None:
            parser.addini(option.name, f"{option.help} (ini twin of {option.flag})", type=option.ini_type, default=None)


def options_markdown() -> str:
    """The options table of the docs, generated from ``OPTIONS``."""
    rows = []
    for option in OPTIONS:
        value = option.metavar or "|".join(option.values)
        if value and option.argparse.get("nargs") == "?":
            value = f"[{value}]"
        flag = f"`{option.flag} {value}`".replace("|", "\\|") if value else f"`{option.flag}`"
        rows.append([flag, f"`{option.name}`" if option.ini_type else "-", option.help])
    return "\n".join(render(["option", "ini key", "what it does"], rows, markdown=True))
