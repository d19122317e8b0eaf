"""Per-sample progress lines on real runs of the built-in samples: one a sample, none under -q, and from the
pytest-xdist controller."""

from __future__ import annotations

import re

import pytest
from inner_runs import runpytest_warm

from pytest_inductor_templates.report.progress import duration, sample_of

# Dynamo's eager backend: the lines are the point, not Inductor's compiles; the samples run in the pytest process
# (--inductor-isolation=none, in a pytest subprocess; under -n 2 in each xdist worker): no sample worker to start
RUN = ("--inductor-samples", "--inductor-template=default", "--inductor-devices=cpu", "-k", "embedding or launch_bound")
RUN = (*RUN, "--inductor-backend=eager", "--benchmark-disable", "-p", "no:cacheprovider", "-W", "ignore")
IN_PYTEST = (*RUN, "--inductor-isolation=none")
LINE = re.compile(
    r"inductor-templates: builtin/(\w+) done \(2 templates, 4 items: 4 passed\); sample (\d) of 2, (\d) of 8 items, "
    r"\d+ s elapsed(, about \d+ (s|min \d\d s) left)?"
)


def _progress(result: pytest.RunResult) -> list[re.Match[str]]:
    return [m for line in result.stdout.lines if (m := LINE.match(line))]


def test_a_line_per_sample_with_what_is_left(pytester: pytest.Pytester) -> None:
    result = runpytest_warm(pytester, *IN_PYTEST)
    assert result.ret == 0, result.stdout.str()
    lines = _progress(result)
    assert [m.group(1) for m in lines] == ["launch_bound", "embedding"], result.stdout.str()
    assert [(m.group(2), m.group(3)) for m in lines] == [("1", "4"), ("2", "8")]
    assert lines[0].group(4) and not lines[1].group(4)  # an estimate while items are left, none at the end
    assert "[100%]" in lines[1].string  # pytest's own progress goes on beside


def test_quiet_with_q_and_shown_with_v(pytester: pytest.Pytester) -> None:
    quiet = runpytest_warm(pytester, *IN_PYTEST, "-q")
    assert quiet.ret == 0 and not _progress(quiet), quiet.stdout.str()
    assert "inductor-templates: builtin/" not in quiet.stdout.str()
    verbose = runpytest_warm(pytester, *IN_PYTEST, "-v")
    assert len(_progress(verbose)) == 2, verbose.stdout.str()
    verbose.stdout.fnmatch_lines(["*::bench[[]default-cpu[]] PASSED*", "inductor-templates: builtin/embedding done*"])


def test_under_xdist_the_controller_shows_the_lines(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    result = runpytest_warm(pytester, *IN_PYTEST, "-n", "2")
    assert result.ret == 0, result.stdout.str()
    assert sorted(m.group(1) for m in _progress(result)) == ["embedding", "launch_bound"], result.stdout.str()


def test_node_ids_and_durations() -> None:
    assert sample_of("inductor-samples::corpus/cv/resnet::check[default-cuda:0]") == (
        "corpus/cv/resnet",
        "default-cuda:0",
    )
    assert sample_of("tests/test_x.py::test_y[default]") is None
    assert [duration(s) for s in (0.4, 59, 61, 3599, 3600 + 125)] == [
        "0 s",
        "59 s",
        "1 min 01 s",
        "59 min 59 s",
        "1 h 02 min",
    ]
