"""Command-line options, their ini twins, and reading them with where each came from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

T = TypeVar("T")

GROUP = "inductor-templates"

# (command-line flag, ini name, help). Every selection option has an ini twin.
SELECTION_OPTIONS = (
    (
        "--inductor-template",
        "inductor_template",
        "template(s) to compile with: a name, a comma list, or all (see --inductor-list-templates)",
    ),
    ("--inductor-mode", "inductor_mode", "torch.compile mode, e.g. reduce-overhead"),
    ("--inductor-options", "inductor_options", "Inductor options as a JSON object, or @path/to/file.json"),
)


def register(parser: pytest.Parser) -> None:
    """Declare the plugin's options and ini keys."""
    group = parser.getgroup(GROUP, "torch.compile / Inductor templates")
    for flag, ini, help_text in SELECTION_OPTIONS:
        group.addoption(flag, dest=ini, metavar=ini.split("_", 1)[1].upper(), default=None, help=help_text)
        parser.addini(ini, help_text + " (ini twin of " + flag + ")", default=None)
    group.addoption(
        "--inductor-backend",
        dest="inductor_backend",
        metavar="NAME",
        default=None,
        help="torch.compile backend (default: inductor)",
    )
    parser.addini("inductor_backend", "torch.compile backend (default: inductor)", default=None)
    group.addoption(
        "--inductor-fullgraph",
        dest="inductor_fullgraph",
        action="store_true",
        default=None,
        help="compile with fullgraph=True: a graph break fails the test",
    )
    parser.addini("inductor_fullgraph", "compile with fullgraph=True", type="bool", default=None)
    group.addoption(
        "--inductor-dynamic",
        dest="inductor_dynamic",
        nargs="?",
        const="true",
        default=None,
        choices=("true", "false", "auto"),
        help="torch.compile dynamic=: true, false or auto (default auto; bare flag means true)",
    )
    parser.addini("inductor_dynamic", "torch.compile dynamic=: true, false or auto", default=None)
    group.addoption(
        "--inductor-templates-file",
        dest="inductor_templates_file",
        metavar="TOML",
        default=None,
        help="TOML file with user templates ([templates.NAME] tables)",
    )
    parser.addini("inductor_templates_file", "TOML file with user templates", default=None)
    group.addoption(
        "--inductor-devices",
        dest="inductor_devices",
        metavar="DEVICES",
        default=None,
        help="devices of the matrix: cpu, cuda, cuda:N, a comma list, or all (default: every CUDA device, else cpu)",
    )
    parser.addini("inductor_devices", "devices of the matrix: cpu, cuda, cuda:N, a comma list, or all", default=None)
    group.addoption(
        "--inductor-samples",
        dest="inductor_samples",
        metavar="DIR",
        action="append",
        nargs="?",
        const="builtin",
        default=None,
        help="run samples: the built-ins (bare flag or 'builtin') or every GraphNet-format sample under DIR; "
        "repeatable",
    )
    parser.addini(
        "inductor_samples", "sample roots ('builtin' for the built-ins), one a line", type="linelist", default=None
    )
    group.addoption(
        "--inductor-sample-list",
        dest="inductor_sample_list",
        metavar="FILE",
        default=None,
        help="run only the samples whose paths (relative to their root) FILE lists, one a line",
    )
    parser.addini("inductor_sample_list", "file listing the samples to run, one relative path a line", default=None)
    group.addoption(
        "--inductor-sample-dtype",
        dest="inductor_sample_dtype",
        metavar="DTYPE",
        default=None,
        choices=("float16", "bfloat16", "float32", "float64"),
        help="run every sample with its floating weights and inputs cast to DTYPE (ids gain @DTYPE)",
    )
    parser.addini("inductor_sample_dtype", "floating dtype every sample is cast to", default=None)
    group.addoption(
        "--inductor-tolerance",
        dest="inductor_tolerance",
        metavar="RTOL,ATOL",
        default=None,
        help="compare every floating output with this rtol and atol instead of torch.testing's per-dtype defaults",
    )
    parser.addini("inductor_tolerance", "RTOL,ATOL for every floating output", default=None)
    group.addoption(
        "--inductor-require-effect",
        dest="inductor_require_effect",
        action="store_const",
        const=True,
        default=None,
        help="fail a compiled item whose template had no effect (default: warn, and mark it in the summary)",
    )
    parser.addini(
        "inductor_require_effect", "fail a compiled item whose template had no effect", type="bool", default=None
    )
    group.addoption(
        "--inductor-list-templates",
        dest="inductor_list_templates",
        action="store_true",
        default=False,
        help="list every template, its settings and availability, then exit",
    )


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """A setting's value and where it came from, for error messages and the header."""

    value: T
    flag: str  # the command-line flag
    ini: str  # the ini key
    from_command_line: bool
    inifile: Path | None

    @property
    def origin(self) -> str:
        if self.from_command_line:
            return f"{self.flag} (command line)"
        where = self.inifile.name if self.inifile else "ini"
        return f"{self.ini} ({where})"


def _ini_value(config: pytest.Config, ini: str) -> Any:
    value = config.getini(ini)
    return None if value in (None, "", []) else value


def read(config: pytest.Config, flag: str, ini: str) -> tuple[Sourced[Any] | None, Sourced[Any] | None]:
    """The command-line value and the ini value of one option (each None when unset)."""
    cli = config.getoption(ini)
    ini_value = _ini_value(config, ini)
    make = lambda value, cmd: Sourced(value, flag, ini, cmd, config.inipath)  # noqa: E731
    return (
        make(cli, True) if cli is not None else None,
        make(ini_value, False) if ini_value is not None else None,
    )


def effective(config: pytest.Config, flag: str, ini: str) -> Sourced[Any] | None:
    """The value in force: the command line overrides the ini file."""
    cli, ini_value = read(config, flag, ini)
    return cli or ini_value


def any_selected(config: pytest.Config) -> bool:
    """Whether the user set any of the plugin's options, on the command line or in ini."""
    names = [ini for _, ini, _ in SELECTION_OPTIONS] + [
        "inductor_backend",
        "inductor_fullgraph",
        "inductor_dynamic",
        "inductor_templates_file",
        "inductor_devices",
        "inductor_samples",
        "inductor_sample_list",
        "inductor_tolerance",
        "inductor_sample_dtype",
        "inductor_require_effect",
    ]
    return any(config.getoption(n) is not None or _ini_value(config, n) is not None for n in names)
