"""Compile figures on real runs: the compile caches' state (cold on an empty cache, warm on the same cache again,
cold again under --inductor-fresh-cache in the sample worker), compare's graph-break and compile-time gates, and the
summary per template in the terminal and in the report."""

from __future__ import annotations

import collections
import json
import math
import os
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from graphnet_tree import tensor_meta, write_sample
from inner_runs import run_pytest_warm

from conftest import FAST, QUIET, cli, made_once
from pytest_inductor_templates.compile import cache
from pytest_inductor_templates.runs.files import load
from pytest_inductor_templates.tables import seconds, times

# A user test whose model breaks its graph only where PLANT_BREAK=1 is set (the "new" run of the gate).
USER_TEST = """
import os

import torch

BREAK = os.environ.get("PLANT_BREAK") == "1"


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 4)  # not a's shape: the graphs either side of the break differ

    def forward(self, x):
        x = self.a(x)  # two GEMMs, which Inductor leaves to ATen: its cold compiles build no C++
        if BREAK:
            torch._dynamo.graph_break()
        return self.b(x)


def test_model(inductor_check):
    with torch.no_grad():
        inductor_check(Model(), torch.randn(4, 8))
"""
# The sample (run in the worker process): a GraphNet-format graph of one GEMM, which Inductor leaves to ATen, so that
# a cold compile of it builds no C++ (a C++ kernel's first build in an empty cache takes 20-40 s here, most of it the
# headers; a built-in like launch_bound builds a dozen kernels).
SAMPLE_MODEL = """
import torch


class GraphModule(torch.nn.Module):
    def forward(self, L_x_: torch.Tensor, L_self_modules_fc_parameters_weight_: torch.nn.parameter.Parameter):
        return (torch._C._nn.linear(L_x_, L_self_modules_fc_parameters_weight_, None),)
"""
SAMPLE_META = tensor_meta("L_x_", [4, 16]) + tensor_meta("L_self_modules_fc_parameters_weight_", [8, 16], std=0.3)
# A compiler made slower where PLANT_SLOW_COMPILE=1 is set: Inductor's code generation waits 6 s per graph (the
# worker process imports this conftest too, so the sample's compiles slow down there).
SLOW_COMPILER = """
import os
import time

if os.environ.get("PLANT_SLOW_COMPILE") == "1":
    from torch._inductor.graph import GraphLowering

    compile_to_module = GraphLowering.compile_to_module

    def slowed(self):
        time.sleep(6)
        return compile_to_module(self)

    GraphLowering.compile_to_module = slowed
"""
ARGS = ("--inductor-samples=corpus", "--inductor-template=default", "--inductor-devices=cpu", "-W", "ignore", *QUIET)
BOTH = ("-k", "gemm or model")  # the sample (in the worker process) and the user test (in pytest's)
USER_ITEM = ("test_user.py::test_model", "default", "cpu")
SAMPLE_ITEM = ("corpus/gemm", "default", "cpu")
MISSED = {"fxgraph_cache_miss": 1, "autograd_cache_miss": 1}


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _make(root: Path) -> None:
    """Three runs on one persistent compile cache, each with its output kept: cold (an empty cache), warm (the same
    selection again, timed, with the graph break planted: the user test's graphs are new, the sample's cached; in
    the pytest process, as the cache's state is the point there, not isolation: no sample worker to start), and
    fresh (the sample alone, under --inductor-fresh-cache, with the slow compiler planted); and the cache's files
    before and after the fresh run. The cold and fresh runs compile the sample in a sample worker alike."""
    (root / "test_user.py").write_text(USER_TEST)
    (root / "conftest.py").write_text(SLOW_COMPILER)
    write_sample(root / "corpus" / "gemm", {"model.py": SAMPLE_MODEL, "weight_meta.py": SAMPLE_META})
    fresh = ("-k", "gemm", "--benchmark-skip", "--inductor-fresh-cache")
    runs = {"cold": (*BOTH, "--benchmark-skip"), "warm": (*BOTH, *FAST, "--inductor-isolation=none"), "fresh": fresh}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root / "cache"))
        for name, args in runs.items():
            if name == "warm":
                patch.setenv("PLANT_BREAK", "1")
            if name == "fresh":
                patch.delenv("PLANT_BREAK")
                patch.setenv("PLANT_SLOW_COMPILE", "1")
                (root / "before-fresh.json").write_text(json.dumps(_files(root / "cache")))
            result = run_pytest_warm(root, *ARGS, *args, f"--inductor-results={name}.jsonl")
            (root / f"{name}.out").write_text(result.stdout + result.stderr)
        (root / "after-fresh.json").write_text(json.dumps(_files(root / "cache")))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    return made_once(tmp_path_factory, worker_id, "compile-figure-runs", _make)


def _verdicts(path: Path) -> dict[tuple[str, str, str], Any]:
    return {key: cell.verdict for key, cell in load(str(path)).cells.items()}


def test_the_cache_is_cold_then_warm_and_cold_again_when_fresh(runs: Path) -> None:
    for name in ("cold", "warm", "fresh"):
        assert "passed" in (runs / f"{name}.out").read_text().splitlines()[-1], (runs / f"{name}.out").read_text()
    cold, warm, fresh = (_verdicts(runs / f"{name}.jsonl") for name in ("cold", "warm", "fresh"))
    assert [run[SAMPLE_ITEM].compile_cache for run in (cold, warm, fresh)] == ["cold", "warm", "cold"]
    assert cold[SAMPLE_ITEM].compile_cache_lookups == fresh[SAMPLE_ITEM].compile_cache_lookups == MISSED
    assert warm[SAMPLE_ITEM].compile_cache_lookups == {"fxgraph_cache_hit": 1, "autograd_cache_hit": 1}
    assert cold[USER_ITEM].compile_cache == "cold" and cold[USER_ITEM].compile_cache_lookups == MISSED
    planted = warm[USER_ITEM]  # two new graphs either side of the planted break: both compiled
    assert planted.compile_cache == "cold" and planted.graph_breaks == 1
    assert planted.compile_cache_lookups == {"fxgraph_cache_miss": 2, "autograd_cache_miss": 2}
    assert all(run[SAMPLE_ITEM].compile_seconds > 0 for run in (cold, warm, fresh))
    eager = (SAMPLE_ITEM[0], "eager", "cpu")
    assert cold[eager].compile_cache is None and cold[eager].compile_cache_lookups == {}
    # the fresh compile had a cache of its own, removed after it: the persistent one is as it was
    assert json.loads((runs / "before-fresh.json").read_text()) == json.loads((runs / "after-fresh.json").read_text())
    header = "inductor-templates: compile caches: an empty one for each triple and user test (--inductor-fresh-cache)"
    assert header in (runs / "fresh.out").read_text() and header not in (runs / "cold.out").read_text()
    assert load(str(runs / "cold.jsonl")).xdist_workers == 0


def test_the_graph_break_gate_names_the_items_that_gained_breaks(runs: Path, tmp_path: Path) -> None:
    cold, warm, fresh = (str(runs / f"{name}.jsonl") for name in ("cold", "warm", "fresh"))
    same = cli("compare", cold, fresh, "--fail-on", "graph-breaks")  # the sample, compiled alike
    assert same.returncode == 0, same.stdout + same.stderr
    assert "graph breaks and recompiles that changed" not in same.stdout
    broken = cli("compare", cold, warm, "--fail-on", "graph-breaks")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    failed = broken.stdout.split("FAILED:\n")[1].splitlines()
    assert failed == ["- test_user.py::test_model/default/cpu: gained graph breaks (0 -> 1)"]
    assert re.search(r"^test_user.py::test_model \[cpu\]\s+default\s+0 -> 1\s+0$", broken.stdout, re.M), broken.stdout
    fewer = cli("compare", warm, cold, "--fail-on", "graph-breaks")  # losing a graph break is no failure
    assert fewer.returncode == 0 and re.search(r"default\s+1 -> 0\s+0$", fewer.stdout, re.M), fewer.stdout

    def recompile(record: dict[str, Any]) -> None:  # a planted recompile of the sample
        if record["sample"] == SAMPLE_ITEM[0]:
            record["recompiles"] = 2

    recompiled = _edited(runs, tmp_path / "recompiled.jsonl", edit=recompile)
    result = cli("compare", cold, recompiled, "--fail-on", "graph-breaks", "--format", "json")
    assert result.returncode == 1, result.stdout + result.stderr
    assert json.loads(result.stdout)["failures"] == [f"{SAMPLE_ITEM[0]}/default/cpu: gained recompiles (0 -> 2)"]


def _edited(runs: Path, path: Path, machine: dict[str, Any] | None = None, edit: Any = None) -> str:
    """The cold run with ``machine`` merged into its machine_info and ``edit`` applied to each of its compiled
    records of the default template."""
    header, *rest = (json.loads(line) for line in (runs / "cold.jsonl").read_text().splitlines())
    header["machine_info"].update(machine or {})
    for line in rest:
        record = line.get("record", {})
        if edit is not None and record.get("template") == "default" and "compile_seconds" in record:
            edit(record)
    path.write_text("\n".join(json.dumps(line) for line in [header, *rest]) + "\n")
    return str(path)


def _slower(record: dict[str, Any]) -> None:
    """The user test compiling three times as long, the sample half a second longer."""
    seconds = record["compile_seconds"]
    record["compile_seconds"] = seconds * 3 if record["sample"] == USER_ITEM[0] else seconds + 0.5


def _a_second_at_least(record: dict[str, Any]) -> None:
    """The user test compiling for a second at least: its growth in ``_slower`` is then beyond the 1 s of noise
    however fast this machine compiled it (a quiet machine compiles it in well under a second)."""
    if record["sample"] == USER_ITEM[0]:
        record["compile_seconds"] = max(record["compile_seconds"], 1.0)


def test_the_compile_time_gate_flags_growth_beyond_the_limit_and_the_noise(runs: Path, tmp_path: Path) -> None:
    cold = _edited(runs, tmp_path / "cold.jsonl", edit=_a_second_at_least)
    assert cli("compare", cold, cold, "--fail-on", "compile-time:10%").returncode == 0
    base = _verdicts(Path(cold))
    slower = _edited(runs, tmp_path / "slower.jsonl", edit=lambda r: (_a_second_at_least(r), _slower(r)))
    result = cli("compare", cold, slower, "--fail-on", "compile-time:1%")
    assert result.returncode == 1, result.stdout + result.stderr
    user, sample = base[USER_ITEM].compile_seconds, base[SAMPLE_ITEM].compile_seconds
    flagged = result.stdout.split("FAILED:\n")[1].splitlines()
    assert flagged[0] == (
        f"- default: compile time of test_user.py::test_model [cpu] grew 200.0% ({seconds(user)} -> "
        f"{seconds(user * 3)}, cold in both runs)"
    )
    assert flagged[1].startswith("- default: mean compile time over 2 items grew ") and len(flagged) == 2
    noise = result.stdout.split("not flagged: grew by more than the limit, but by less than 1 s (compile-time noise):")
    assert f"- default: compile time of {SAMPLE_ITEM[0]} [cpu] grew {0.5 / sample:.1%}" in noise[1]
    mean = r"\S+ m?s"  # under a second in ms: the sample compiles in well under one on a quiet machine
    assert re.search(rf"^default\s+cold\s+2\s+{mean}\s+{mean}\s+\+\d+\.\d%$", result.stdout, re.M), result.stdout
    assert cli("compare", cold, slower, "--fail-on", "compile-time:250%").returncode == 0


def test_a_planted_slow_compiler_fails_the_compile_time_gate_between_two_cold_runs(runs: Path) -> None:
    """Both runs compile the sample cold (an empty cache, then --inductor-fresh-cache); in the second Inductor's
    code generation waits 6 s per graph, as a slower compiler would (a cold compile of the sample takes a few
    seconds here, give or take a few under load)."""
    cold, slowed = str(runs / "cold.jsonl"), str(runs / "fresh.jsonl")
    before, after = _verdicts(runs / "cold.jsonl")[SAMPLE_ITEM], _verdicts(runs / "fresh.jsonl")[SAMPLE_ITEM]
    assert (before.compile_cache, after.compile_cache) == ("cold", "cold")
    assert after.compile_seconds >= before.compile_seconds + 3
    gated = cli("compare", cold, slowed, "--fail-on", "compile-time:10%")
    assert gated.returncode == 1, gated.stdout + gated.stderr
    growth = after.compile_seconds / before.compile_seconds - 1
    grew = f"- default: compile time of {SAMPLE_ITEM[0]} [cpu] grew {growth:.1%} ("
    assert grew in gated.stdout.split("FAILED:\n")[1], gated.stdout
    # the limit decides: the same growth under a limit above it passes, and a compile that got faster passes
    above = math.ceil(growth * 100) + 1
    within = cli("compare", cold, slowed, "--fail-on", f"compile-time:{above}%")
    assert within.returncode == 0 and "FAILED" not in within.stdout, within.stdout + within.stderr
    faster = cli("compare", slowed, cold, "--fail-on", "compile-time:10%")
    assert faster.returncode == 0 and "FAILED" not in faster.stdout, faster.stdout + faster.stderr


def test_compile_times_compare_only_in_the_same_cache_state_and_worker_count(runs: Path, tmp_path: Path) -> None:
    cold, warm, fresh = (str(runs / f"{name}.jsonl") for name in ("cold", "warm", "fresh"))
    why = "no item compiled in the same cache state in both runs (warm -> cold on 1 item)"
    gated = cli("compare", warm, fresh, "--fail-on", "compile-time:10%")
    assert gated.returncode == 2 and gated.stdout == "", gated.stdout
    error = "pytest-inductor-templates compare: error: nothing to compare: compile times: "
    assert gated.stderr.startswith(error + why), gated.stderr
    shown = cli("compare", warm, fresh, "--fail-on", "correctness")
    assert shown.returncode == 0 and f"compile times not compared: {why}" in shown.stdout, shown.stdout
    partly = cli("compare", cold, warm, "--fail-on", "correctness")  # the user test cold in both, the sample not
    note = "compile times not compared where the cache state differs: cold -> warm on 1 item"
    assert note in partly.stdout and re.search(r"^default\s+cold\s+1\s", partly.stdout, re.M), partly.stdout
    two = _edited(runs, tmp_path / "two.jsonl", machine={"xdist_workers": 2})
    workers = cli("compare", cold, two, "--fail-on", "compile-time:10%")
    assert workers.returncode == 2
    assert "compile times: the runs had different pytest-xdist worker counts (base 0, new 2)" in workers.stderr
    old = _edited(runs, tmp_path / "old.jsonl", machine={"xdist_workers": None})
    unknown = cli("compare", old, cold, "--fail-on", "compile-time:10%")
    assert unknown.returncode == 2 and "the base run does not say how many pytest-xdist workers" in unknown.stderr


def _summary(output: str) -> list[list[str]]:
    """The header and the row of the summary per template, cell by cell."""
    section = output.split("inductor-templates: summary per template")[1]
    return [re.split(r"\s{2,}", line) for line in section.splitlines()[1:3]]


def test_the_summary_per_template_in_the_terminal_and_the_report(runs: Path) -> None:
    warm = load(str(runs / "warm.jsonl"))
    default = [r for r in warm.records if r.template == "default"]
    speedups = [r.speedup for r in default if r.kind == "bench" and r.speedup is not None]
    compiles = [r.compile_seconds for r in default if r.kind == "check"]
    assert len(speedups) == 1 and len(compiles) == 2  # the sample's bench item; the sample and the user test
    # (its planted break compiled new graphs: cold; the sample's came from the cache: warm)
    mean = seconds(statistics.fmean(compiles))
    row = ["default", "2", "100% (2/2)", f"{times(speedups[0])} over 1", f"{mean} over 2", "cold 1, warm 1"]
    header = ["template", "cells", "pass rate", "geomean speedup", "mean compile", "compile cache"]
    assert _summary((runs / "warm.out").read_text()) == [header, row]
    report = cli("report", str(runs / "warm.jsonl")).stdout
    assert f"| {' | '.join(row)} |" in report.splitlines(), report
    untimed = _summary((runs / "cold.out").read_text())[1]
    assert untimed[3] == "n/a" and untimed[5] == "cold 2", untimed  # --benchmark-skip: no speedup


def test_cache_state_from_lookups() -> None:
    assert cache.state({}) is None
    assert cache.state({"fxgraph_cache_miss": 1, "autograd_cache_miss": 1}) == "cold"
    assert cache.state({"fxgraph_cache_bypass": 1}) == "cold"  # a graph the cache cannot hold compiles in full
    assert cache.state({"fxgraph_cache_hit": 2, "autograd_cache_hit": 2}) == "warm"
    assert cache.state({"fxgraph_cache_hit": 1, "autograd_cache_miss": 1}) == "mixed"  # a backward never compiled


def test_the_fresh_cache_and_the_counts_leave_torch_as_they_found_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/nowhere/persistent")
    groups = set(counters)
    counted: collections.Counter[str] = collections.Counter()
    with cache.counting(counted):
        with cache.fresh():
            inside = os.environ["TORCHINDUCTOR_CACHE_DIR"]
            assert inside != "/nowhere/persistent" and Path(inside).is_dir()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/nowhere/persistent" and not Path(inside).exists()
    assert set(counters) == groups and not counted
