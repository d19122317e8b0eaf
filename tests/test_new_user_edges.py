"""What a new user meets first on a CPU machine: the header without ``-n``, a run where nothing could run, what a
``default``-only run says of its effect and its skips, and the plot's labels inside the image."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from inner_runs import run_pytest_warm

from conftest import FAST, QUIET, no_cuda_machine

USER_TESTS = """
import pytest
import torch


def test_block(compiled_model, inductor_device):
    model = torch.nn.Linear(4, 4).to(inductor_device).eval()
    x = torch.randn(2, 4, device=inductor_device)
    torch.testing.assert_close(compiled_model(model)(x), model(x))


def test_checked(inductor_check):
    inductor_check(torch.nn.Linear(4, 4).eval(), torch.randn(2, 4))


def test_speed(inductor_benchmark):
    with torch.no_grad():
        inductor_benchmark(torch.nn.Linear(4, 4).eval(), torch.randn(2, 4))


def test_on_cuda_only(compiled_model, inductor_device):
    if inductor_device.type != "cuda":
        pytest.skip("exercised on CUDA")


def test_not_the_plugins():
    pytest.skip("a skip of the user's own")
"""
LONG_NAMES = (  # GraphNet ids as long as the corpus's: rotated under the bars, they take the figure's height
    "graphnet-corpus/transformers-auto-model/fcakyon_timesformer-large-finetuned-k400",
    "graphnet-corpus/torchvision/resnet50",
)


def test_without_xdist_the_header_says_nothing_of_its_workers(pytester: pytest.Pytester) -> None:
    """No ``-n``: no xdist worker times anything, so no line says ``0 workers share the CPU``."""
    result = pytester.runpytest_inprocess("--inductor-samples", "-k", "launch_bound", "--co", *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "inductor-templates: devices: cpu" in result.stdout.str()  # the plugin's header is there
    assert "pytest-xdist" not in "\n".join(line for line in result.stdout.lines if "inductor-templates:" in line)


@no_cuda_machine
def test_a_run_where_nothing_could_run_says_why_and_names_require_run(pytester: pytest.Pytester) -> None:
    """Every item skipped, by the plugin (a template or a device this machine lacks) or by the test itself: the
    summary says so in one line with the reasons and what ``--inductor-require-run`` does; the plugin's skipped
    items are listed with their reasons, the user's own skip only in that line."""
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_inprocess("--inductor-template=cudagraphs", *QUIET, "--inductor-cpu-probe=0")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(skipped=5)
    cudagraphs = "template 'cudagraphs' is unavailable on cpu: needs a cuda device, not cpu"
    result.stdout.fnmatch_lines(
        [
            "*= inductor-templates: skipped items of the plugin, with why =*",
            f"4 items (test_user.py::test_block[[]cudagraphs-cpu[]], ...): {cudagraphs}",
            "*= inductor-templates: nothing ran =*",
            "every item was skipped, so the run passes (--inductor-require-run would fail it): "
            f"{cudagraphs} (4 items); a skip of the user's own (1 item)",
        ]
    )
    assert "test_not_the_plugins: a skip" not in result.stdout.str()  # not the plugin's: pytest's -rs names it

    required = pytester.runpytest_inprocess(
        "--inductor-devices=cuda", "--inductor-require-run", *QUIET, "--inductor-cpu-probe=0"
    )
    assert required.ret == pytest.ExitCode.TESTS_FAILED, required.stdout.str()
    required.stdout.fnmatch_lines(
        [
            "--inductor-require-run: every item was skipped, so the run fails: cuda:0 is not available: this machine "
            "has no CUDA device (4 items); a skip of the user's own (1 item)",
        ]
    )


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, pytest.LineMatcher, Path]:
    """A ``default``-only run of the user tests, saved as JSON (its exit code, its output, its folder): in a fresh
    process, as a second in-process compile would register torch's cache artifacts twice; Dynamo's eager backend,
    as the summary is the point."""
    folder = tmp_path_factory.mktemp("default-run")
    (folder / "test_user.py").write_text(USER_TESTS)
    args = ("--inductor-template=default", "--inductor-backend=eager", "--benchmark-json=run.json", *FAST, *QUIET)
    done = run_pytest_warm(folder, *args)
    return done.returncode, pytest.LineMatcher(done.stdout.splitlines()), folder


def test_a_default_run_says_what_default_did_and_why_items_were_skipped(default_run) -> None:
    """``default`` sets nothing, so there is nothing to take effect: the effect section says so and what it compiled;
    the test the plugin parametrized that skipped itself is listed with its reason, without ``-rs``."""
    code, output, _ = default_run
    assert code == pytest.ExitCode.OK, output.str()
    output.fnmatch_lines(
        [
            "*= inductor-templates: skipped items of the plugin, with why =*",
            "test_user.py::test_on_cuda_only[[]default-cpu[]]: exercised on CUDA",
            "*= inductor-templates: did each template take effect*",
            "default: sets no option of its own, so nothing to take effect: 2 items compiled 2 graphs (0 graph "
            "breaks) with the backend's defaults",
            "*= 3 passed, 2 skipped in *",
        ]
    )
    assert "nothing ran" not in output.str() and "test_not_the_plugins" not in output.str()


def test_the_plot_keeps_every_label_inside_the_image(default_run, tmp_path: Path) -> None:
    """Long sample names (rotated under the bars) and the axis label: every text of the chart lies inside the
    figure, read from matplotlib's renderer; the chart is written as a PNG."""
    pytest.importorskip("matplotlib")
    from pytest_inductor_templates.runs.files import load
    from pytest_inductor_templates.runs.plot import plot_speedups, speedup_figure

    saved = default_run[2] / "run.json"
    data = json.loads(saved.read_text())
    timed = [r for r in data["inductor_templates"]["items"] if r["kind"] == "bench"]
    assert [r["template"] for r in timed] == ["default"] and timed[0]["speedup"] > 0
    twins = [dict(r, sample=LONG_NAMES[1]) for r in timed]  # a second sample: two groups of bars
    for record in timed:
        record["sample"] = LONG_NAMES[0]
    data["inductor_templates"]["items"] += twins
    long_names = tmp_path / "long.json"
    long_names.write_text(json.dumps(data))
    run = load(str(long_names))
    figure = speedup_figure(run)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    inside = figure.bbox.padded(1)  # a pixel of rounding
    axes = figure.axes[0]
    low, high = axes.get_ylim()
    undrawn = {id(t) for t in axes.yaxis.get_ticklabels(which="both") if not low <= t.get_position()[1] <= high}
    texts = [
        t
        for t in figure.findobj(lambda a: hasattr(a, "get_text"))
        if t.get_visible() and t.get_text() and id(t) not in undrawn  # ticks beyond the axis's span are not drawn
    ]
    label = axes.yaxis.label
    assert label in texts and "speedup over eager" in label.get_text()
    outside = [t.get_text() for t in texts if not inside.contains(*t.get_window_extent(renderer).min)]
    outside += [t.get_text() for t in texts if not inside.contains(*t.get_window_extent(renderer).max)]
    assert not outside, f"outside the image: {outside}"
    png = tmp_path / "speedups.png"
    plot_speedups(run, str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_skip_reasons_are_grouped_and_the_nothing_ran_line_stays_one_line() -> None:
    """The bench items of checks that did not pass share one line (their check items say how); the nothing-ran
    line names the three most common reasons and counts the others."""
    from pytest_inductor_templates.report.terminal import nothing_ran_line, skipped_lines

    failed = [
        (f"inductor-samples::s{i}::bench[default-cpu]", f"the triple's check ended compile_fail: {i}") for i in "ab"
    ]
    assert skipped_lines([*failed, ("t.py::test_x[default]", "needs CUDA")]) == [
        "2 items (inductor-samples::sa::bench[default-cpu], ...): the triple's check did not pass (its check item "
        "says how)",
        "t.py::test_x[default]: needs CUDA",
    ]
    reasons = [(f"t.py::test_{i}[default]", why) for i, why in enumerate("aabbbcde")]
    assert nothing_ran_line(reasons, require_run=False) == (
        "every item was skipped, so the run passes (--inductor-require-run would fail it): b (3 items); a (2 items); "
        "c (1 item); and 2 other reasons"
    )
