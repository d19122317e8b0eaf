"""The README documents what the plugin has: the templates table and every option."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_inductor_templates.samples.builtin import samples_table
from pytest_inductor_templates.templates.listing import markdown_table
from pytest_inductor_templates.templates.registry import TemplateRegistry

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def _between(marker: str) -> str:
    start, end = f"<!-- {marker} -->\n", f"\n<!-- /{marker} -->"
    return README[README.index(start) + len(start) : README.index(end)]


def test_templates_table_matches_registry() -> None:
    assert _between("templates-table") == markdown_table(TemplateRegistry())


def test_samples_table_matches_the_builtins() -> None:
    assert _between("samples-table") == samples_table()


def test_every_option_and_ini_key_is_documented(pytestconfig: pytest.Config) -> None:
    group = pytestconfig._parser.getgroup("inductor-templates")
    assert len(group.options) >= 8
    for option in group.options:
        flag = option.names()[0]
        assert f"`{flag}" in README, flag
        ini = option.attrs()["dest"]
        if ini in pytestconfig._parser._inidict:
            assert f"`{ini}`" in README, ini
