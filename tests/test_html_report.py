"""The HTML pages in a real headless Chromium (Debian's, driven by Playwright): a real CPU run's page and a comparison's
from the runs ``test_compare_cli`` makes once a session (a planted miscompile, a planted slowdown on a planted clock);
and pytest-html's results table with the plugin's columns, from a real run.

Without a browser (or without Playwright) the browser tests skip, except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inner_runs import runpytest_warm
from test_compare_cli import runs  # noqa: F401 (the shared runs, made once a session)

from conftest import QUIET, cli

ON_CI = os.environ.get("CI") == "true"  # read at import: an autouse fixture hides CI from each test
CHROMIUM = next((found for name in ("chromium", "chromium-browser") if (found := shutil.which(name))), None)

# The diagnosis planted into the failing run's records: what a whole diagnosis of a planted sigmoid lowering finds
# (test_diagnose.py); a real one takes minutes of C++ compiles, too long for this page's tests.
DIAGNOSIS = {
    "diagnosis": "inductor / lowerings: sigmoid; setting: no settings (the backend's defaults); first diverging op: "
    "aten.sigmoid (model.py:9); miscompile",
    "diagnosis_stage": "inductor / lowerings: sigmoid",
    "diagnosis_setting": "no settings (the backend's defaults)",
    "diagnosis_op": "aten.sigmoid (model.py:9)",
    "diagnosis_kind": "miscompile",
    "repro": "inductor-repros/embedding-default-cpu/repro.py",
}


def _browser_or_skip() -> Any:
    reason = None
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "Playwright is not installed (pip install playwright; it drives the system's Chromium)"
    if reason is None and CHROMIUM is None:
        reason = "no Chromium on PATH (apt-get install chromium)"
    if reason is not None:
        if ON_CI:
            pytest.fail(f"CI=true needs the browser tests to run: {reason}")
        pytest.skip(reason)
    return sync_playwright


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """The system's headless Chromium, one for the module."""
    sync_playwright = _browser_or_skip()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def pages(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The failing run's page (its embedding cell an accuracy failure, given a planted diagnosis), and the page of
    base against a run whose embedding cell is the slowed run's (a planted slowdown: each compiled call twice as
    long), its launch_bound cell base's own: the regression comes second in the runs' order."""
    made: dict[str, Path] = request.getfixturevalue("shared_runs")
    root = tmp_path_factory.mktemp("html")
    failing = json.loads(made["failing"].read_text())
    for record in failing["inductor_templates"]["items"]:
        if record["sample"] == "builtin/embedding" and record["template"] == "default":
            record.update(DIAGNOSIS)
    (root / "failing.json").write_text(json.dumps(failing))
    base, slowed = (json.loads(made[name].read_text()) for name in ("base", "slowed"))
    items = [r for r in base["inductor_templates"]["items"] if r["sample"] != "builtin/embedding"]
    items += [r for r in slowed["inductor_templates"]["items"] if r["sample"] == "builtin/embedding"]
    base["inductor_templates"]["items"] = items
    (root / "new.json").write_text(json.dumps(base))
    report = cli("report", str(root / "failing.json"), "--format", "html", "-o", str(root / "run.html"))
    assert report.returncode == 0 and report.stdout == f"wrote {root / 'run.html'}\n", report.stderr
    diff = cli("compare", str(made["base"]), str(root / "new.json"), "--format", "html", "-o", str(root / "diff.html"),
               "--fail-on", "speedup:20%")  # fmt: skip
    assert diff.returncode == 1, diff.stdout + diff.stderr  # the gate's verdict, as with the other formats
    newly = cli("compare", str(made["base"]), str(made["failing"]), "--format", "html", "-o", str(root / "newly.html"),
                "--fail-on", "correctness")  # fmt: skip
    assert newly.returncode == 1, newly.stdout + newly.stderr
    pages = {name: root / f"{name}.html" for name in ("run", "diff", "newly")}
    return {**pages, "failing": root / "failing.json"}


def test_a_cell_timed_several_times_shows_each_timing_s_figure(runs, tmp_path: Path) -> None:  # noqa: F811
    """A compiled cell timed in two processes of two loads: its grid cell gives each timing's speedup, as report's
    markdown does, beside the speedup and its band; the machine block says how the compiled items were timed."""
    data = json.loads(runs["base"].read_text())
    timed = next(r for r in data["inductor_templates"]["items"] if r["template"] == "default" and r.get("speedup"))
    timed.update(process_speedups=[1.21, 1.25, 1.19, 1.23], process_pids=[1, 1, 2, 2], process_loads=[0, 1, 0, 1])
    timed.update(timing_processes=2, timing_loads=2)
    (tmp_path / "run.json").write_text(json.dumps(data))
    done = cli("report", str(tmp_path / "run.json"), "--format", "html", "-o", str(tmp_path / "run.html"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "run.html").read_text()
    assert "over 4 timings: 1.21x, 1.25x, 1.19x, 1.23x" in page
    assert re.search(r"compiled items timed.{0,80}in 2 processes of 2 loads \(1\), once \(\d+\)", page), page[:3000]


def test_the_page_modules_import_neither_torch_nor_pytest() -> None:
    """The pages are views of the records: the command writes them without torch or pytest."""
    modules = ", ".join(f"pytest_inductor_templates.runs.{name}" for name in ("html_page", "html_compare", "svg"))
    code = f"import sys, {modules}; print(sorted({{m.split('.')[0] for m in sys.modules}} & {{'torch', 'pytest'}}))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"


class Opened:
    """A page opened from disk, with every console message, page error and request it made."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.problems.append(f"{m.type}: {m.text}") if m.type != "log" else None)
        self.page.on("pageerror", lambda error: self.problems.append(f"page error: {error}"))
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("#grid tbody tr")

    def column(self, index: int) -> list[str]:
        return self.page.eval_on_selector_all(
            f"#grid tbody tr td:nth-child({index})", "cells => cells.map(c => c.textContent)"
        )


@pytest.fixture
def run_page(browser: Any, pages: dict[str, Path]) -> Iterator[Opened]:
    opened = Opened(browser, pages["run"])
    yield opened
    opened.page.close()


def test_a_runs_page_loads_from_disk_with_no_console_error_and_no_request(run_page: Opened, pages) -> None:
    assert run_page.problems == []
    assert run_page.requests == [pages["run"].resolve().as_uri()]  # the page itself, nothing else
    page = run_page.page
    assert page.inner_text("#count") == "showing 2 of 2 rows"
    assert run_page.column(1) == ["builtin/launch_bound", "builtin/embedding"]  # the run's order
    summary = page.inner_text("#summary table")
    assert "50% (1/2)" in summary and "accuracy_fail" in summary  # the dashboard's pass rate, counts per outcome
    assert "speedup over eager (log scale)" in page.inner_text("#charts")
    assert page.locator("#charts svg .mark").count() >= 1  # 1x marked


def test_sorting_a_column_and_filtering_by_outcome_and_text_give_the_expected_rows(run_page: Opened) -> None:
    page = run_page.page
    page.click("#grid th:nth-child(1)")  # sample, ascending
    assert run_page.column(1) == ["builtin/embedding", "builtin/launch_bound"]
    page.click("#grid th:nth-child(1)")  # again: descending
    assert run_page.column(1) == ["builtin/launch_bound", "builtin/embedding"]
    page.select_option("#sort-figure", label="outcome (failures first)")
    page.click("#grid th:nth-child(4)")  # the default template's column, failures first
    assert run_page.column(1) == ["builtin/embedding", "builtin/launch_bound"]
    page.select_option("#filter-outcome", "accuracy_fail")
    assert run_page.column(1) == ["builtin/embedding"] and page.inner_text("#count") == "showing 1 of 2 rows"
    page.select_option("#filter-template", "eager")  # eager's cells alone: none failed
    assert run_page.column(1) == []
    page.select_option("#filter-template", "")
    page.select_option("#filter-outcome", "")
    page.fill("#filter-text", "launch")
    assert run_page.column(1) == ["builtin/launch_bound"]


def test_a_red_cell_opens_to_its_reason_and_diagnosis(run_page: Opened) -> None:
    page = run_page.page
    assert page.is_hidden("#story")
    red = page.locator("#grid td.red")
    assert red.count() == 1 and "ACCURACY" in red.inner_text()
    red.click()
    story = page.inner_text("#story")
    assert "builtin/embedding / default / cpu: accuracy_fail" in story
    assert re.search(r"reason\s+call 1 of 2: out\[0\]\[0\]: float32 \[8, 64\]: .* differ beyond rtol", story), story
    assert "second opinion: RMSE" in story and "tolerance" in story
    for name in ("diagnosis_stage", "diagnosis_setting", "diagnosis_op", "diagnosis_kind"):
        assert DIAGNOSIS[name] in story
    assert f"python {DIAGNOSIS['repro']}" in story
    assert "-k 'builtin/embedding and check[default-cpu]'" in story  # how to rerun it
    page.click("#story button")
    assert page.is_hidden("#story")


def test_a_screenshot_shows_the_grid(run_page: Opened, tmp_path: Path) -> None:
    from PIL import Image

    shot = run_page.page.locator("#grid").screenshot(path=str(tmp_path / "grid.png"))
    image = Image.open(io.BytesIO(shot)).convert("RGB")
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 20) or []}
    assert (0xFD, 0xE2, 0xE1) in colours  # the red cell's background
    assert (0xE6, 0xF4, 0xEA) in colours  # a passing cell's
    assert image.width > 400 and image.height > 60


def test_a_long_grid_paints_its_first_rows_and_filters_and_sorts_over_all_of_them(
    browser: Any, pages: dict[str, Path], tmp_path: Path
) -> None:
    """300 copies of the failing run's two samples (planted names, real records): 200 rows painted, more on
    scrolling; a text filter and a sort reach the rows not painted yet."""
    data = json.loads(pages["failing"].read_text())
    items = data["inductor_templates"]["items"]
    data["inductor_templates"]["items"] = [
        {**r, "sample": f"{r['sample']}-{n:03d}", "nodeid": r["nodeid"].replace("::builtin/", f"::copy{n:03d}/")}
        for n in range(300)
        for r in items
    ]
    (tmp_path / "long.json").write_text(json.dumps(data))
    assert (
        cli("report", str(tmp_path / "long.json"), "--format", "html", "-o", str(tmp_path / "long.html")).returncode
        == 0
    )
    opened = Opened(browser, tmp_path / "long.html")
    page = opened.page
    assert page.inner_text("#count") == "showing 600 of 600 rows (the first 200 painted; scroll for more)"
    assert len(opened.column(1)) == 200
    page.locator("#more").scroll_into_view_if_needed()
    page.wait_for_function("document.querySelectorAll('#grid tbody tr').length > 200")
    page.fill("#filter-text", "embedding-299")  # the last row of all
    assert opened.column(1) == ["builtin/embedding-299"] and page.inner_text("#count") == "showing 1 of 600 rows"
    page.fill("#filter-text", "")
    page.click("#grid th:nth-child(1)")
    page.click("#grid th:nth-child(1)")  # descending: the last names first
    assert opened.column(1)[:2] == ["builtin/launch_bound-299", "builtin/launch_bound-298"]
    assert opened.problems == []
    page.close()


def test_the_comparison_page_lists_the_planted_regression_first(browser: Any, pages: dict[str, Path]) -> None:
    opened = Opened(browser, pages["diff"])
    page = opened.page
    assert opened.problems == [] and len(opened.requests) == 1
    assert opened.column(2)[0] == "builtin/embedding [cpu]"  # second in the runs, first here
    assert opened.column(3)[0].startswith("regression")
    assert "speedup fell beyond 20%" in opened.column(3)[0]
    assert opened.column(6)[0].startswith("-50.0% [")  # each compiled call took twice as long
    verdict = page.inner_text("#verdict")
    assert "FAILED (--fail-on speedup:20%)" in verdict and "speedup on builtin/embedding [cpu] fell 50.0%" in verdict
    page.locator("#grid td.story").first.click()
    assert "compiled time\n+100.0%" in page.inner_text("#story").replace("\t", "\n")
    page.close()
    newly = Opened(browser, pages["newly"])  # the planted miscompile: newly failing, first, said once
    assert newly.column(2)[0] == "builtin/embedding [cpu]" and newly.column(3)[0] == "newly failing"
    assert newly.column(11)[0] == "pass -> accuracy_fail" and newly.problems == []
    newly.page.close()


PLANTED_BACKEND = """
import torch


def shifted(gm, example_inputs):  # Dynamo's graph run as it is, its first output 0.5 off: a planted miscompile
    def run(*args):
        out = list(gm(*args))
        out[0] = out[0] + 0.5
        return out

    return run


torch._dynamo.register_backend(name="shifted")(shifted)
"""

USER_TESTS = """
import torch


def test_linear(inductor_check):
    torch.manual_seed(0)
    inductor_check(torch.nn.Linear(8, 4), torch.randn(2, 8))


def test_plain():
    pass
"""


def test_pytest_html_shows_the_plugins_columns_and_each_items_story(pytester: pytest.Pytester) -> None:
    """A real run with pytest-html: its table (rows in the report's JSON blob) has the plugin's columns, a failing
    item its reason as an extra, a test of no template empty cells; --inductor-html writes the run's page too."""
    pytest.importorskip("pytest_html")
    pytester.makeconftest(PLANTED_BACKEND)
    pytester.makepyfile(test_user=USER_TESTS)
    result = runpytest_warm(
        pytester, "--inductor-backend=shifted", "--inductor-devices=cpu", "--html=report.html", "--self-contained-html",
        "--inductor-html=run.html",
        "--inductor-cpu-probe=0", *QUIET,
    )  # fmt: skip
    result.assert_outcomes(passed=1, failed=1)
    text = (pytester.path / "report.html").read_text()
    blob = json.loads(html.unescape(re.search(r'data-jsonblob="([^"]*)"', text).group(1)))
    header = re.findall(r'data-column-type="inductor\d">([^<]*)</th>', text)
    assert header == ["template", "device", "outcome", "speedup", "memory ratio"]
    rows = {test_id: reports[0] for test_id, reports in blob["tests"].items()}
    linear = next(report for test_id, report in rows.items() if "test_linear" in test_id)
    cells = [re.sub(r"<[^>]+>", "", cell) for cell in linear["resultsTableRow"]]
    assert cells[2:5] == ["default", "cpu", "accuracy_fail"], cells
    story = next(extra for extra in linear["extras"] if extra["name"] == "inductor-templates")
    content = base64.b64decode(story["content"].split("base64,", 1)[1]).decode()  # a data: URL, self-contained
    assert "outcome: accuracy_fail\nreason: call 1 of 2: out: float32 [2, 4]: 8 of 8 elements" in content, content
    plain = next(report for test_id, report in rows.items() if test_id.endswith("test_plain"))
    assert [re.sub(r"<[^>]+>", "", cell) for cell in plain["resultsTableRow"]][2:7] == [""] * 5
    page = (pytester.path / "run.html").read_text()
    assert "test_user.py::test_linear" in page and "inductor-templates: HTML page: file://" in result.stdout.str()
