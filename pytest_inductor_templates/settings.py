"""The plugin's options: one table declares each option and its ini twin; ``Settings`` reads them once.

The command line overrides the ini file. Relative paths follow pytest's rule: a value given on the
command line is relative to the directory pytest was invoked from, an ini value to the ini file's
directory. Values that need no torch to understand are checked here, so a bad one stops the run with
one line before any test runs.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

from .memory import parse_size
from .tables import render
from .tolerance import Tolerance, explicit_tolerance

T = TypeVar("T")

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
        "inductor_require_run",
        "fail a run in which every item was skipped",
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
        "the CPUs this process may use, shared among pytest-xdist workers",
        "N",
    ),
    Option(
        "inductor_lock_log",
        "under pytest-xdist, write a line to FILE for each time a sample worker held the host lock (PID GROUP "
        "DETAIL START END: work, a timing and its device, the start of Inductor's compile pool): what ran beside "
        "each timing, for debugging",
        "FILE",
    ),
    Option(
        "inductor_speedup_precision",
        "paired timing goes on, within half of a compiled item's --benchmark-max-time, until the speedup's 95 "
        "percent interval is within +-PCT percent of it (default 2); an entry whose interval stays wider is marked "
        "unstable",
        "PCT",
    ),
    Option(
        "inductor_timing_min_seconds",
        "paired timing of a compiled item spans at least SECONDS, beyond its --benchmark-max-time if need be, so "
        "that its rounds meet each speed a CPU switches between (default 0: the max time alone)",
        "SECONDS",
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


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """A setting's value and where it came from, for error messages, the header and relative paths."""

    value: T
    option: Option
    from_command_line: bool
    base: Path  # what a relative path in the value is relative to
    inifile: Path | None = None
    overridden: bool = False  # an ini value given on the command line with pytest's -o

    @property
    def origin(self) -> str:
        if self.from_command_line:
            return f"{self.option.flag} (command line)"
        if self.overridden:
            return f"-o {self.option.name} (command line)"
        return f"{self.option.name} ({self.inifile.name if self.inifile else 'ini'})"

    def path(self, text: str | None = None) -> Path:
        """``text`` (by default the value) as a path: relative paths resolved against ``base``."""
        path = Path(str(self.value if text is None else text)).expanduser()
        return path if path.is_absolute() else self.base / path

    def usage_error(self, message: str) -> pytest.UsageError:
        """A one-line usage error naming where this value came from."""
        return pytest.UsageError(f"{self.origin}: {message}")


class Settings:
    """Every option's value in force, read once at configure."""

    def __init__(self, config: pytest.Config) -> None:
        self._levels: dict[str, tuple[list[Sourced[Any]], list[Sourced[Any]]]] = {}
        overrides = {item.split("=", 1)[0].strip() for item in config.getoption("override_ini", None) or []}
        for option in OPTIONS:
            cli = config.getoption(option.name)
            overridden = option.name in overrides  # -o KEY=VALUE: relative to where pytest was started
            ini_base = config.inipath.parent if config.inipath else config.rootpath
            if overridden:
                ini_base = config.invocation_params.dir
            ini_source = Sourced(None, option, False, ini_base, config.inipath, overridden)
            try:
                ini = config.getini(option.name) if option.ini_type else None
            except (ValueError, pytest.UsageError) as error:  # pytest reading a bool key: "invalid truth value"
                raise ini_source.usage_error(str(error)) from None
            cli_values = cli if isinstance(cli, list) else [] if cli is None else [cli]
            ini_values = ini if isinstance(ini, list) else [] if ini in (None, "") else [ini]
            self._levels[option.name] = (
                [Sourced(v, option, True, config.invocation_params.dir, config.inipath) for v in cli_values],
                [replace(ini_source, value=v) for v in ini_values],
            )
        self.tolerance = _tolerance(self.get("inductor_tolerance"))
        self.dynamic = _dynamic(self.get("inductor_dynamic"))
        self.second_opinion = _on_off(self.get("inductor_second_opinion"), default=True)
        tf32 = self.get("inductor_tf32")
        self.tf32: str | None = None if tf32 is None else ("on" if _on_off(tf32, default=True) else "off")
        dtype = self.get("inductor_sample_dtype")
        if dtype is not None and dtype.value not in SAMPLE_DTYPES:
            raise dtype.usage_error(f"expected one of {', '.join(SAMPLE_DTYPES)}, got {dtype.value!r}")
        self.sample_dtype: str | None = dtype.value if dtype else None
        weights = self.get("inductor_sample_weights")
        if weights is not None and str(weights.value).strip() not in SAMPLE_WEIGHTS:
            raise weights.usage_error(f"expected one of {', '.join(SAMPLE_WEIGHTS)}, got {weights.value!r}")
        self.sample_weights: str = str(weights.value).strip() if weights is not None else SAMPLE_WEIGHTS[0]
        threads = _positive(self.get("inductor_timing_threads"), int, "a whole number of threads such as 4")
        self.timing_threads = int(threads) if threads is not None else None
        self.speedup_precision = _percent(self.get("inductor_speedup_precision"))
        span = self.get("inductor_timing_min_seconds")
        self.timing_min_seconds = _seconds_or_zero(span) if span is not None else 0.0
        probe = self.get("inductor_cpu_probe")
        self.cpu_probe = _seconds_or_zero(probe) if probe is not None else CPU_PROBE_SECONDS
        self.fullgraph = bool(self.value("inductor_fullgraph"))
        self.require_effect = bool(self.value("inductor_require_effect"))
        self.fresh_cache = bool(self.value("inductor_fresh_cache"))
        self.diagnose = bool(self.value("inductor_diagnose"))
        budget = _positive(self.get("inductor_diagnose_budget"), float, "a number of seconds such as 120")
        self.diagnose_budget = budget if budget is not None else DIAGNOSE_BUDGET
        most = _positive(self.get("inductor_diagnose_max"), int, "a whole number of items such as 10")
        self.diagnose_max = int(most) if most is not None else DIAGNOSE_MAX
        repro = self.get("inductor_repro_dir")
        self.repro_dir = repro.path() if repro is not None else config.invocation_params.dir / REPRO_DIR
        self.require_run = bool(self.value("inductor_require_run"))
        self.list_templates = bool(self.value("inductor_list_templates"))
        isolation = self.get("inductor_isolation")
        if isolation is not None and isolation.value not in ISOLATION_MODES:
            raise isolation.usage_error(f"expected one of {', '.join(ISOLATION_MODES)}, got {isolation.value!r}")
        if isolation is not None and isolation.value == "process" and os.name != "posix":
            raise isolation.usage_error("the worker process needs a POSIX system (Linux, macOS); use none")
        self.isolated = isolation.value == "process" if isolation is not None else os.name == "posix"
        self.timeout = _positive(self.get("inductor_timeout"), float, "a number of seconds such as 300")
        if self.timeout is not None and not self.isolated:
            raise self.get("inductor_timeout").usage_error(  # type: ignore[union-attr]
                "needs --inductor-isolation=process: an item that hangs can only be stopped in a process of its own"
            )
        self.memory_budget = _size(self.get("inductor_memory_budget"))
        self.recycle_rss = _size(self.get("inductor_recycle_rss"))
        recycle = _positive(self.get("inductor_recycle_triples"), int, "a whole number of triples such as 100")
        self.recycle_triples = int(recycle) if recycle is not None else RECYCLE_TRIPLES
        self.results = _results_path(self.get("inductor_results"))
        self.lock_log = _results_path(self.get("inductor_lock_log"))

    def levels(self, name: str) -> tuple[list[Sourced[Any]], list[Sourced[Any]]]:
        """An option's values on the command line and in the ini file (a repeatable option may have several)."""
        return self._levels[name]

    def all(self, name: str) -> list[Sourced[Any]]:
        """Every value in force of a repeatable option: the command line's, else the ini file's."""
        cli, ini = self._levels[name]
        return cli or ini

    def get(self, name: str) -> Sourced[Any] | None:
        """The value in force: the command line's, else the ini file's, else None."""
        values = self.all(name)
        return values[0] if values else None

    def value(self, name: str) -> Any:
        found = self.get(name)
        return found.value if found is not None else None

    @property
    def any_set(self) -> bool:
        """Whether any option of the plugin was given, on the command line or in ini."""
        return any(cli or ini for name, (cli, ini) in self._levels.items() if name != "inductor_list_templates")


def _tolerance(raw: Sourced[Any] | None) -> Tolerance | None:
    """The tolerance given as ``RTOL,ATOL``."""
    if raw is None:
        return None
    try:
        rtol, atol = (float(part) for part in str(raw.value).split(","))
    except ValueError:
        raise raw.usage_error(f"expected RTOL,ATOL such as 1e-4,1e-5, got {raw.value!r}") from None
    try:
        return explicit_tolerance(rtol, atol)
    except ValueError as error:
        raise raw.usage_error(f"{error} (in {raw.value!r})") from None


def _positive(raw: Sourced[Any] | None, kind: type, example: str) -> float | None:
    """A finite number > 0 of ``kind`` (int or float), or None when not given."""
    if raw is None:
        return None
    try:
        value = kind(str(raw.value).strip())
    except ValueError:
        raise raw.usage_error(f"expected {example}, got {raw.value!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise raw.usage_error(f"expected {example} (more than 0), got {raw.value!r}")
    return value


def _results_path(raw: Sourced[Any] | None) -> Path | None:
    """The path of a file to write (the results file, the lock log), or None when not given: a file that can be
    created or overwritten."""
    if raw is None:
        return None
    path = raw.path()
    if path.is_dir():
        raise raw.usage_error(f"{path} is a directory: name a file, such as results.jsonl")
    folder = next(parent for parent in path.parents if parent.exists())  # where the missing folders will be made
    if not folder.is_dir():
        raise raw.usage_error(f"{folder} is a file, not a folder: the results file cannot be made below it")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise raw.usage_error(f"{path} cannot be written (no permission)")
    return path


def _size(raw: Sourced[Any] | None) -> int | None:
    """Bytes from a size such as ``8GiB``, or None when not given."""
    if raw is None:
        return None
    try:
        size = parse_size(str(raw.value))
    except ValueError as error:
        raise raw.usage_error(str(error)) from None
    if size <= 0:
        raise raw.usage_error(f"expected a size more than 0, got {raw.value!r}")
    return size


def _dynamic(raw: Sourced[Any] | None) -> bool | None:
    if raw is None:
        return None
    value = str(raw.value).strip().lower()
    if value not in DYNAMIC_VALUES:
        raise raw.usage_error(f"expected true, false or auto, got {raw.value!r}")
    return None if value == "auto" else value == "true"


def _on_off(raw: Sourced[Any] | None, default: bool) -> bool:
    """``on`` or ``off`` as a bool (``default`` when not given)."""
    if raw is None:
        return default
    value = str(raw.value).strip().lower()
    if value not in ON_OFF:
        raise raw.usage_error(f"expected on or off, got {raw.value!r}")
    return value == "on"


def _seconds_or_zero(raw: Sourced[Any]) -> float:
    """A finite number of seconds, 0 or more."""
    try:
        value = float(str(raw.value).strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise raw.usage_error(f"expected a number of seconds such as 1, or 0 for none, got {raw.value!r}")
    return value


def _percent(raw: Sourced[Any] | None) -> float | None:
    """A percentage (``2%`` or ``2``) as a fraction (0.02): above 0, below 100."""
    if raw is None:
        return None
    try:
        value = float(str(raw.value).strip().removesuffix("%"))
    except ValueError:
        value = math.nan
    if not 0 < value < 100:
        raise raw.usage_error(f"expected a percentage above 0 and below 100 such as 2%, got {raw.value!r}")
    return value / 100
