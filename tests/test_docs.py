"""The docs document what the plugin has: generated tables in step with the code, links that resolve."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from pytest_inductor_templates.option_table import OPTIONS, options_markdown
from pytest_inductor_templates.record import FORMAT, ItemRecord
from pytest_inductor_templates.samples.builtin import samples_table
from pytest_inductor_templates.templates.listing import markdown_table
from pytest_inductor_templates.templates.registry import TemplateRegistry

ROOT = Path(__file__).parent.parent
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]


def page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _between(path: Path, marker: str) -> str:
    text = path.read_text(encoding="utf-8")
    start, end = f"<!-- {marker} -->\n", f"\n<!-- /{marker} -->"
    return text[text.index(start) + len(start) : text.index(end)]


def test_generated_tables_match_the_code() -> None:
    guide = ROOT / "docs" / "guide.md"
    assert _between(guide, "templates-table") == markdown_table(TemplateRegistry())
    assert _between(guide, "samples-table") == samples_table()
    for page in (ROOT / "README.md", ROOT / "docs" / "reference.md"):
        assert _between(page, "options-table") == options_markdown(), page


@pytest.mark.parametrize("page", DOCS, ids=page_id)
def test_every_option_the_docs_name_exists(page: Path) -> None:
    """Prose, examples and recipes name only options and ini keys the plugin has (the tables are generated)."""
    flags = {option.flag for option in OPTIONS}
    keys = {option.name for option in OPTIONS if option.ini_type is not None}
    text = page.read_text(encoding="utf-8")
    for flag in re.findall(r"--inductor-[a-z0-9-]*[a-z0-9]", text):
        assert flag in flags, f"{page.name}: {flag} is no option"
    for key in re.findall(r"^\s*(inductor_[a-z_]+)\s*=", text, flags=re.MULTILINE):  # ini and TOML lines
        assert key in keys, f"{page.name}: {key} is no ini key"


def test_every_record_field_is_in_the_reference() -> None:
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    for field in dataclasses.fields(ItemRecord):
        assert f"`{field.name}`" in reference, field.name
    assert f"`format` (an integer, today {FORMAT};" in reference and f'"format": {FORMAT},' in reference


def test_the_readme_is_a_front_door() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


CPU_TORCH = re.compile(
    r'python -m pip install "?torch(?:==(?P<pin>[0-9.]+))?"? --index-url https://download\.pytorch\.org/whl/cpu'
)


def _bash_lines(page: Path) -> list[str]:
    """The command lines of a page's bash blocks, in reading order, comments dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S)
    return [line.split(" #")[0].strip() for block in blocks for line in block.splitlines() if line.strip()]


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "CONTRIBUTING.md"], ids=page_id)
def test_the_cpu_build_of_torch_comes_before_each_install(page: Path) -> None:
    """In a fresh environment without a GPU, `pip install -e .` (and a `torch==` pin) pulls the multi-GB CUDA build
    of torch from PyPI: before each install command a reader meets the CPU build's line, pinned as that command
    pins torch (whose `+cpu` build then satisfies the pin)."""
    lines = _bash_lines(page)
    installs = [n for n, line in enumerate(lines) if re.search(r"pip install .*-e \S", line)]
    assert installs, f"{page_id(page)}: no install command"
    previous = -1
    for n in installs:
        cpu = [m for m in map(CPU_TORCH.fullmatch, lines[previous + 1 : n]) if m]
        assert cpu, f"{page_id(page)}: no CPU build of torch before {lines[n]!r}, after the command before it"
        pin = re.search(r"torch==([0-9.]+)", lines[n])
        assert cpu[-1]["pin"] == (pin.group(1) if pin else None), (cpu[-1].group(0), lines[n])
        previous = n


def test_the_readme_test_command_pins_the_torch_of_ci() -> None:
    """`.ci/run` runs the README's test command; both pin one torch."""
    (readme,) = [line for line in _bash_lines(ROOT / "README.md") if '-e ".[test,lint]"' in line]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"torch==[0-9.]+", readme).group(0) in ci


def test_the_guide_says_how_and_leaves_dated_runs_to_the_results() -> None:
    """Measurements with their dates live under docs/results/; the guide keeps a line and a link for each."""
    for number, line in enumerate((ROOT / "docs" / "guide.md").read_text(encoding="utf-8").splitlines(), 1):
        assert not re.search(r"\b\d{4}-\d{2}-\d{2}\b", line), f"guide.md:{number} names a date: {line}"


@pytest.mark.parametrize("page", DOCS, ids=page_id)
def test_links_stay_inside_the_repository_and_resolve(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "shared/" not in text and "DESIGN.md" not in text
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if not target.startswith(("http://", "https://")):
            assert (page.parent / target).resolve().is_file(), f"{page.name}: {target}"


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", DOCS, ids=page_id)
def test_links_to_a_heading_name_one_that_exists(page: Path) -> None:
    """A link to a section (`guide.md#several-gpus`, `#memory`) names a heading of its page, so moving or renaming a
    section cannot leave a link behind."""
    for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if not target.startswith(("http://", "https://")):
            linked = (page.parent / target).resolve() if target else page
            assert anchor in _anchors(linked), f"{page_id(page)}: {target}#{anchor}"
