"""The plugin's options read once (``Settings``), from the table in ``option_table``.

The command line overrides the ini file. Relative paths follow pytest's rule: a value given on the
command line is relative to the directory pytest was invoked from, an ini value to the ini file's
directory. Values that need no torch to understand are checked here, so a bad one stops the run with
one line before any test runs.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

from .memory import parse_size
from .option_table import (
    CPU_PROBE_SECONDS,
    DIAGNOSE_BUDGET,
    DIAGNOSE_MAX,
    DIAGNOSE_PROCESSES,
    DYNAMIC_VALUES,
    ISOLATION_MODES,
    ON_OFF,
    OPTIONS,
    RECYCLE_TRIPLES,
    REPRO_DIR,
    SAMPLE_DTYPES,
    SAMPLE_WEIGHTS,
    Option,
)
from .tolerance import Tolerance, explicit_tolerance

T = TypeVar("T")


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
        self.timing_processes = _process_counts(self.get("inductor_timing_processes"))
        loads = _positive(self.get("inductor_timing_loads"), int, "a whole number of loads such as 8")
        self.timing_loads = int(loads) if loads is not None else None
        span = self.get("inductor_timing_min_seconds")
        self.timing_min_seconds = _seconds_or_zero(span) if span is not None else None
        self.timing_follow_cpu = _on_off(self.get("inductor_timing_follow_cpu"), default=False)
        self.compile_beside_timing = _on_off(self.get("inductor_compile_beside_timing"), default=False)
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
        self.diagnose_run_budget = _positive(
            self.get("inductor_diagnose_run_budget"), float, "a number of seconds such as 1800"
        )
        processes = _positive(self.get("inductor_diagnose_processes"), int, "a whole number of processes such as 2")
        self.diagnose_processes = int(processes) if processes is not None else DIAGNOSE_PROCESSES
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
        self.html = _results_path(self.get("inductor_html"), "run.html")

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


def _process_counts(raw: Sourced[Any] | None) -> tuple[int, int] | None:
    """``N`` as (N, N), ``N-M`` as (N, M): the processes a timing runs in first, and at most; None when not given."""
    if raw is None:
        return None
    first, dash, most = str(raw.value).strip().partition("-")
    example = "a whole number of processes such as 3, or a first and a most such as 4-8"
    try:
        counts = int(first), int(most if dash else first)
    except ValueError:
        raise raw.usage_error(f"expected {example}, got {raw.value!r}") from None
    if not 0 < counts[0] <= counts[1]:
        raise raw.usage_error(f"expected {example} (the first above 0, the most at least the first), got {raw.value!r}")
    return counts


def _results_path(raw: Sourced[Any] | None, example: str = "results.jsonl") -> Path | None:
    """The path of a file to write (the results file, the lock log, the HTML page), or None when not given: a file
    that can be created or overwritten."""
    if raw is None:
        return None
    path = raw.path()
    if path.is_dir():
        raise raw.usage_error(f"{path} is a directory: name a file, such as {example}")
    folder = next(parent for parent in path.parents if parent.exists())  # where the missing folders will be made
    if not folder.is_dir():
        raise raw.usage_error(f"{folder} is a file, not a folder: {path.name} cannot be made below it")
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
