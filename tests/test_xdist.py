"""pytest-xdist workers sharing the host: each times its sample items, one timing at a time and beside nobody's work
(read from the lock log), with Inductor's compile pool started within work. Real pytest runs, real processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from conftest import FAST, QUIET, run_pytest
from pytest_inductor_templates.runs.files import load
from pytest_inductor_templates.timing.threads import usable_cpus

pytest.importorskip("xdist")
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")

PLANTED_POOL = """
import os

import torch._inductor.compile_fx as compile_fx_module
from torch._inductor.async_compile import AsyncCompile

compile_fx = compile_fx_module.compile_fx


def planted(*args, **kwargs):
    # Inductor's compile pool starts in the background, as a GPU's first Triton kernel starts it (a CPU compile
    # never does); in one worker: one start shows it, and each imports torch once more
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw0":
        AsyncCompile.use_process_pool()
    return compile_fx(*args, **kwargs)


compile_fx_module.compile_fx = planted
"""

Span = tuple[int, str, str, float, float]  # pid, group, detail, start, end: a line of --inductor-lock-log


def spans(log: Path) -> list[Span]:
    rows = [line.split() for line in log.read_text().splitlines()]
    return [(int(pid), group, detail, float(start), float(end)) for pid, group, detail, start, end in rows]


def overlap(a: Span, b: Span) -> bool:
    return a[3] < b[4] and b[3] < a[4]


def test_two_workers_time_every_bench_item_one_at_a_time_beside_no_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """-n 2 on the CPU: every bench item is timed (the compiled ones with a speedup); no two timings overlap, and no
    build, compile, check or release (nor the start of Inductor's compile pool) overlaps a timing."""
    (tmp_path / "conftest.py").write_text(PLANTED_POOL)
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "2")  # the user's count stands: with 2, Inductor has a pool
    run = run_pytest(
        tmp_path, "-n", "2", "--inductor-samples=builtin", "--inductor-template=default", "-k",
        "launch_bound or norm_softmax", "--inductor-lock-log=lock.log", "--inductor-results=run.jsonl", "-p",
        "no:randomly", *FAST, *QUIET,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"inductor-templates: timing: {max(1, usable_cpus() // 2)} intra-op thread(s)" in run.stdout  # a worker's
    assert (
        "inductor-templates: pytest-xdist: 2 workers share the CPU and time their CPU sample items, one timing at a "
        "time, while no worker builds, compiles, checks or releases a sample; TORCHINDUCTOR_COMPILE_THREADS=2, as set"
    ) in run.stdout
    records = load(str(tmp_path / "run.jsonl")).records
    bench = [r for r in records if r.kind == "bench"]
    assert len(bench) == 4 and all(r.median is not None for r in bench)
    assert all(r.speedup is not None for r in bench if r.template == "default")
    found = spans(tmp_path / "lock.log")
    workers = {r.pid for r in records if r.kind == "check"}
    assert len(workers) == 2 and {s[0] for s in found} == workers  # the sample workers held the lock, only they
    timings = [s for s in found if s[1] == "timing"]
    assert len(timings) == len(bench) and {s[2] for s in timings} == {"cpu"}
    for timing in timings:
        assert [s for s in found if s is not timing and overlap(s, timing)] == []
    (pool,) = [s for s in found if s[1] == "pool"]
    tick = 1 / os.sysconf("SC_CLK_TCK")  # the pool's start is read from /proc, to a clock tick
    work = [s for s in found if s[1] == "work" and s[0] == pool[0]]
    assert any(w[3] - tick <= pool[3] <= pool[4] <= w[4] for w in work)  # started and ready within work
