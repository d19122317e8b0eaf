"""The plugin's summary is what a user sees last: after pytest-benchmark's tables, above pytest's short summary."""

from __future__ import annotations

import json

import pytest
from inner_runs import runpytest_warm

# Dynamo's eager backend in the pytest process (a subprocess): where the sections print is the point, not
# Inductor's compile or the sample worker
RUN = ("--inductor-samples", "--inductor-template=default", "--inductor-devices=cpu", "-k", "embedding")
RUN = (*RUN, "--inductor-backend=eager", "--inductor-isolation=none", "--benchmark-max-time=0.05")
RUN = (*RUN, "--benchmark-min-rounds=3", "-rA", "-p", "no:cacheprovider", "-W", "ignore")
RUN = (*RUN, "--inductor-cpu-probe=0", "--inductor-timing-min-seconds=0")  # no probe, paired rounds bounded: FAST's


def _first(lines: list[str], start: str, within: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(start) and within in line)


def test_the_plugin_summary_follows_pytest_benchmark_tables(pytester: pytest.Pytester) -> None:
    result = runpytest_warm(pytester, *RUN)
    lines = result.stdout.lines
    assert result.ret == 0, result.stdout.str()
    benchmark_table = _first(lines, "-" * 20, " benchmark 'builtin/embedding[cpu]': 2 tests ")
    ours = [i for i, line in enumerate(lines) if "inductor-templates: " in line and line.startswith("=")]
    short_summary = _first(lines, "=" * 10, " short test summary info ")
    assert ours and benchmark_table < min(ours) and max(ours) < short_summary, result.stdout.str()
    assert "summary per template" in lines[max(ours)]  # the dashboard's summary, last of the plugin's sections
    assert "speedup over eager" in lines[sorted(ours)[-2]]  # after the speedup table


def test_benchmark_quiet_leaves_out_its_tables_but_not_the_timings(pytester: pytest.Pytester) -> None:
    """What the guide advises for a corpus run: the plugin's tables alone, the timings all in the JSON."""
    result = runpytest_warm(pytester, *RUN, "--benchmark-quiet", "--benchmark-json=run.json")
    assert result.ret == 0, result.stdout.str()
    assert "benchmark 'builtin/embedding[cpu]'" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*inductor-templates: speedup over eager*", "builtin/embedding [[]cpu[]] *x*"])
    saved = json.loads((pytester.path / "run.json").read_text())
    assert len(saved["benchmarks"]) == 2 and all(b["stats"]["rounds"] >= 3 for b in saved["benchmarks"])
