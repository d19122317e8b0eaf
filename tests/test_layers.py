"""The package's shape, read from its source: imports point down the layers of docs/design.md, and the cell
engine is the only caller of the check, the effect verdict and the timing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_inductor_templates"
LAYERS = (  # top to bottom, as docs/design.md draws them; a module may import its own layer's and lower ones
    ("plugin", "hookspec", "__init__"),
    ("items",),
    ("integrations",),
    ("report",),
    ("worker",),
    ("engine",),
    ("diagnose",),
    ("samples",),
    ("check",),
    ("compile",),
    ("timing",),
    ("templates",),
    ("runs",),
    ("settings",),
    ("option_table",),
    ("tables", "dashboard"),
    ("record",),
    (
        "outcomes",
        "tolerance",
        "machine",
        "memory",
        "phases",
        "limits",
        "cpu_speed",
        "conftest_files",
        "parent_watch",
        "student",
        "environ",
    ),
)
ENGINE_ONLY = {"run_check", "effects_of", "default_code_of", "measure", "time_paired", "time_rounds"}


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def unit(module: Path) -> str:
    """A module's layer unit: its folder under the package, or its own name at the top."""
    parts = module.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def layer_of(name: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if name in names)


def imported_units(module: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, unit) of every import of the package's own modules, at any depth of the module (read from ``source``
    when given)."""
    package = module.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]  # the module's package
    found = []
    for node in ast.walk(ast.parse(module.read_text() if source is None else source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = (*base, *(node.module.split(".") if node.module else ()))
                targets = [(*target, alias.name) for alias in node.names] if len(target) == 1 else [target]
            else:
                parts = tuple((node.module or "").split("."))
                targets = [(*parts, alias.name) for alias in node.names] if len(parts) == 1 else [parts]
        elif isinstance(node, ast.Import):
            targets = [tuple(alias.name.split(".")) for alias in node.names]
        else:
            continue
        for target in targets:
            if target[0] == PACKAGE.name and len(target) > 1:
                found.append((node.lineno, target[1]))
    return found


def test_every_unit_of_the_package_has_a_layer() -> None:
    units = {unit(m) for m in modules()}
    assert units == {name for names in LAYERS for name in names}


@pytest.mark.parametrize("module", modules(), ids=lambda m: str(m.relative_to(PACKAGE)))
def test_imports_point_down(module: Path) -> None:
    here = layer_of(unit(module))
    upward = [f"line {line}: {name}" for line, name in imported_units(module) if layer_of(name) < here]
    assert not upward, f"{module.relative_to(PACKAGE)} imports from a higher layer: {upward}"


def test_an_upward_import_is_caught() -> None:
    """The check above sees a planted upward import (timing importing the record writer), nested in a function."""
    planted = PACKAGE / "timing" / "measure.py"
    source = planted.read_text() + "\n\ndef planted():\n    from ..report.records import write_cell\n"
    here = layer_of(unit(planted))
    assert [name for _, name in imported_units(planted, source) if layer_of(name) < here] == ["report"]


def test_check_and_timing_do_not_import_the_record() -> None:
    for module in modules():
        if unit(module) in ("check", "timing"):
            names = {name for _, name in imported_units(module)}
            assert not names & {"record", "report"}, module


def called_names(module: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Call):
            function = node.func
            names.add(function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", ""))
    return names


def test_only_the_engine_checks_judges_and_times() -> None:
    callers = {m.relative_to(PACKAGE).as_posix(): called_names(m) & ENGINE_ONLY for m in modules()}
    callers = {module: names for module, names in callers.items() if names}
    # the engine; measure calling the two kinds of rounds; the diagnosis's predicate, which checks again under the
    # compiler bisector (in the diagnosis's own process)
    inside = {"engine/cell.py", "timing/measure.py", "diagnose/predicate.py"}
    assert set(callers) <= inside, {m: n for m, n in callers.items() if m not in inside}
    assert callers["engine/cell.py"] >= {"run_check", "effects_of", "measure"}
