"""pytest-xdist workers sharing the host: each times its sample items, one timing at a time and beside nobody's work
(read from the lock log), with Inductor's compile pool started within work; ``-n auto`` sized to the host; the largest
graphs collected first. Real pytest runs, real processes."""

from __future__ import annotations

import math
import os
import re
import sys
import time
from pathlib import Path

import pytest
import torch
from graphnet_tree import write_sample
from inner_runs import run_pytest_warm

from conftest import FAST, QUIET, no_cuda_machine, run_pytest
from pytest_inductor_templates.integrations.auto_workers import CPUS_PER_WORKER, AutoWorkers
from pytest_inductor_templates.machine import gpu_free_memory
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.runs.files import load
from pytest_inductor_templates.timing.threads import (
    COMPILE_THREADS,
    compile_threads_share,
    default_threads,
    usable_cpus,
)
from pytest_inductor_templates.worker.client import WorkerProcess
from pytest_inductor_templates.worker.protocol import Hello

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
    """-n 2 on the CPU: each sample's items run on one worker (the plugin's loadgroup, by sample); every bench item is
    timed (the compiled ones with a speedup); no two timings overlap, and no build, compile, check or release (nor
    the start of Inductor's compile pool) overlaps a timing."""
    (tmp_path / "conftest.py").write_text(PLANTED_POOL)
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "2")  # the user's count stands: with 2, Inductor has a pool
    run = run_pytest_warm(
        tmp_path, "-n", "2", "-v", "--inductor-samples=builtin", "--inductor-template=default", "-k",
        "launch_bound or norm_softmax", "--inductor-lock-log=lock.log", "--inductor-results=run.jsonl", "-p",
        "no:randomly", *FAST, *QUIET,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ran = re.findall(r"\[(gw\d)\] .*PASSED inductor-samples::builtin/(\w+)::", run.stdout)
    assert len(ran) == 8 and len(set(ran)) == 2, ran  # each sample's four items on one worker
    assert f"inductor-templates: timing: {default_threads(2)} intra-op thread(s)" in run.stdout  # a worker's
    assert (
        "inductor-templates: pytest-xdist: 2 workers share the CPU and time their CPU sample items, one timing at a "
        "time, while no worker builds, compiles, checks or releases a sample; TORCHINDUCTOR_COMPILE_THREADS=2, as set"
    ) in run.stdout
    records = load(str(tmp_path / "run.jsonl")).records
    bench = [r for r in records if r.kind == "bench"]
    assert len(bench) == 4 and all(r.median is not None for r in bench)
    assert all(r.speedup is not None for r in bench if r.template == "default")
    assert "Benchmarks are automatically disabled" not in run.stdout + run.stderr  # pytest-benchmark's: they were timed
    found = spans(tmp_path / "lock.log")
    workers = {r.pid for r in records if r.kind == "check"}
    assert len(workers) == 2 and {s[0] for s in found} == workers  # the sample workers held the lock, only they
    timings = [s for s in found if s[1] == "timing"]
    assert len(timings) == len(bench) and {s[2] for s in timings} == {"cpu"}
    for timing in timings:
        assert [s for s in found if s is not timing and overlap(s, timing)] == []
    pools = [s for s in found if s[1] == "pool"]
    assert {p[0] for p in pools} == workers  # each sample worker starts its pool with its own start
    tick = 1 / os.sysconf("SC_CLK_TCK")  # the pool's start is read from /proc, to a clock tick
    first_timing = min(t[3] for t in timings)
    for pool in pools:
        work = [s for s in found if s[1] == "work" and s[0] == pool[0]]
        assert any(w[3] - tick <= pool[3] <= pool[4] <= w[4] for w in work)  # started and ready within work
        assert pool[4] <= first_timing  # ready before any timing began, not later beside one


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_two_workers_a_gpu_time_every_cuda_bench_item_one_at_a_time_per_gpu(tmp_path: Path) -> None:
    """-n twice the GPUs: worker i on GPU i mod G; every bench item timed; per GPU one timing at a time, and no work
    (nor the start of Inductor's compile pool, a real one here) beside any timing."""
    gpus = torch.cuda.device_count()
    run = run_pytest(
        tmp_path, "-n", str(2 * gpus), "--inductor-samples", "--inductor-template=default,cudagraphs", "-k",
        "conv_bn or launch_bound or attention or norm_softmax", "--inductor-lock-log=lock.log",
        "--inductor-results=run.jsonl", "--benchmark-max-time=0.05", *QUIET,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"pytest-xdist: {2 * gpus} workers share {gpus} GPU" in run.stdout
    records = load(str(tmp_path / "run.jsonl")).records
    bench = [r for r in records if r.kind == "bench"]
    assert bench and all(r.median is not None and r.device == "cuda:0" for r in bench)
    assert all(r.speedup is not None for r in bench if r.template != "eager" and r.outcome is Outcome.PASS)
    found = spans(tmp_path / "lock.log")
    timings = [s for s in found if s[1] == "timing"]
    assert len(timings) >= len(bench)  # a timing a bench item, and the peak-memory calls of a compiled one's
    assert len({s[2] for s in timings}) == gpus  # a slot a GPU: gpu0, gpu1, ...
    for timing in timings:  # timings on other GPUs may run beside it; nothing else may
        beside = [s for s in found if s is not timing and overlap(s, timing)]
        assert [s for s in beside if s[1] != "timing" or s[2] == timing[2]] == []
    tick = 1 / os.sysconf("SC_CLK_TCK")
    pools = [s for s in found if s[1] == "pool"]
    for pool in pools:
        work = [s for s in found if s[1] == "work" and s[0] == pool[0]]
        assert any(w[3] - tick <= pool[3] <= pool[4] <= w[4] for w in work)
    print(f"{len(timings)} timings on {gpus} GPU(s), {len(pools)} compile pool start(s), all within work")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_compiles_beside_timings_leave_the_work_group_and_no_work_runs_beside_a_timing(tmp_path: Path) -> None:
    """-n 2 on one GPU with --inductor-compile-beside-timing=on: the header names the CPUs of timings and of work;
    the compiles (default template: off the GPU) are ``compile`` lines of the lock log, each between work holds of
    its process; no work hold overlaps a timing; every compiled bench item has a speedup."""
    run = run_pytest(
        tmp_path, "-n", "2", "--inductor-samples", "--inductor-template=default", "--inductor-devices=cuda", "-k",
        "conv_bn or launch_bound or attention or norm_softmax", "--inductor-compile-beside-timing=on",
        "--inductor-lock-log=lock.log", "--inductor-results=run.jsonl", *QUIET,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "go on beside CUDA timings (--inductor-compile-beside-timing): timings on CPUs " in run.stdout
    records = load(str(tmp_path / "run.jsonl")).records
    unmeasured = [r for r in records if r.kind == "bench" and r.template == "default" and r.speedup is None]
    assert not unmeasured, [(r.nodeid, r.outcome, r.reason) for r in unmeasured] + [run.stdout[-3000:]]
    found = spans(tmp_path / "lock.log")
    timings, compiles = [s for s in found if s[1] == "timing"], [s for s in found if s[1] == "compile"]
    assert compiles and timings
    for timing in timings:
        assert [s for s in found if s[1] == "work" and overlap(s, timing)] == []
    for compile_ in compiles:  # it left its work and joined work again after it
        own = [s for s in found if s[0] == compile_[0] and s[1] == "work"]
        assert any(abs(w[4] - compile_[3]) < 0.05 for w in own) and any(w[3] >= compile_[4] for w in own), compile_
    # whether a compile met a timing depends on the order the items ran in: printed, not asserted
    beside = sum(any(overlap(c, t) for t in timings) for c in compiles)
    print(f"{len(compiles)} compiles off the GPU, {beside} of them beside a timing; {len(timings)} timings")


@no_cuda_machine
def test_n_auto_starts_the_workers_the_host_fits_and_says_why(tmp_path: Path) -> None:
    run = run_pytest_warm(
        tmp_path, "-n", "auto", "--inductor-samples=builtin", "-k", "no_such_sample", *QUIET, "--inductor-cpu-probe=0"
    )
    line = next((line for line in run.stdout.splitlines() if line.startswith("inductor-templates: -n auto:")), None)
    pattern = (
        r"inductor-templates: -n auto: (\d+) workers? \((\d+) CPUs / 2 a worker; memory allows (\d+): ([\d.]+) GiB "
        r"available / 4\.00 GiB a worker; no GPU\)"
    )
    match = re.fullmatch(pattern, line or "")
    assert match is not None, run.stdout[-3000:]
    count, cpus, by_memory = (int(match[i]) for i in (1, 2, 3))
    available = float(match[4])  # GiB, to two decimals
    assert cpus == usable_cpus()
    assert by_memory in {max(1, math.floor((available + d) / 4)) for d in (-0.01, 0.01)}
    assert count == max(1, min(cpus // CPUS_PER_WORKER, by_memory))
    assert f"created: {count}/{count} worker" in run.stdout  # xdist started that many


def test_the_auto_count_is_the_least_bound_and_never_fewer_than_one_worker_per_gpu() -> None:
    gib = 1024**3
    h200 = AutoWorkers(cpus=16, memory=45 * gib, gpus=1, gpu_free=139 * gib)
    assert h200.line() == (
        "-n auto: 8 workers (16 CPUs / 2 a worker; memory allows 11: 45.00 GiB available / 4.00 GiB a worker; 1 GPU, "
        "whose memory allows 46: 139.00 GiB free on the fullest / 3.00 GiB a worker)"
    )
    eight = AutoWorkers(cpus=16, memory=10 * gib, gpus=8, gpu_free=None)
    assert eight.count == 8 and eight.line().endswith("8 GPUs, their memory unknown; at least one a GPU)")
    budget = AutoWorkers(cpus=64, memory=None, gpus=2, gpu_free=9 * gib, sample_bytes=2 * gib)  # 5 GiB a worker
    assert (budget.by_gpu_memory, budget.count) == (2, 2) and "memory unknown" in budget.line()
    repeating = AutoWorkers(cpus=16, memory=45 * gib, gpus=1, gpu_free=139 * gib, repeaters=3)  # 4 processes (N=4)
    assert repeating.line() == (
        "-n auto: 4 workers, each with 3 timing repeater(s) (16 CPUs / 2 a worker; memory allows 4: 45.00 GiB "
        "available / 10.00 GiB a worker; 1 GPU, whose memory allows 11: 139.00 GiB free on the fullest / 12.00 GiB a "
        "worker)"
    )
    h100 = AutoWorkers(cpus=16, memory=128 * gib, gpus=1, gpu_free=79 * gib, repeaters=3, more_repeaters=4)  # N-M=4-8
    assert h100.line() == (  # the four more are counted for their CUDA context and torch, not for a sample each
        "-n auto: 4 workers, each with 3 timing repeater(s) (and 4 more where a band is wide) (16 CPUs / 2 a worker; "
        "memory allows 9: 128.00 GiB available / 14.00 GiB a worker; 1 GPU, whose memory allows 4: 79.00 GiB free on "
        "the fullest / 16.00 GiB a worker)"
    )
    beside = AutoWorkers(cpus=10, memory=45 * gib, gpus=1, gpu_free=139 * gib, work_cpus=True)  # 6 of 16 time
    assert beside.count == 5 and beside.line().startswith("-n auto: 5 workers (10 work CPUs / 2 a worker;")


def test_n_auto_counts_only_the_work_cpus_where_compiles_go_on_beside_timings(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a GPU (mocked here: the count and its free memory) and ``--inductor-compile-beside-timing=on``, ``-n
    auto`` sizes the workers by the CPUs work runs on, not by every usable CPU (the timing CPUs are kept
    for timings)."""
    from pytest_inductor_templates.integrations import auto_workers as module
    from pytest_inductor_templates.settings import Settings
    from pytest_inductor_templates.timing.cores import host_split

    if not host_split(1).timing:
        pytest.skip("this host's CPUs are one core: nothing to split")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(module, "gpu_free_memory", lambda gpus: [80 * 1024**3] * gpus)
    common = ("-n", "auto", "--inductor-samples=builtin", "--inductor-devices=cuda")
    plain = module.auto_workers(config := pytester.parseconfigure(*common), Settings(config))
    beside = module.auto_workers(
        config := pytester.parseconfigure(*common, "--inductor-compile-beside-timing=on"), Settings(config)
    )
    assert plain is not None and beside is not None
    assert (plain.cpus, plain.work_cpus) == (usable_cpus(), False)
    assert (beside.cpus, beside.work_cpus) == (len(host_split(1).work), True) and beside.cpus < plain.cpus
    assert f"({beside.cpus} work CPUs / {CPUS_PER_WORKER} a worker;" in beside.line()


NVIDIA_SMI = """#!/bin/sh
printf '0, GPU-aaaa-1111, 81000\\n1, GPU-bbbb-2222, 40000\\n'
"""


def test_gpu_memory_is_read_from_nvidia_smi_for_the_visible_gpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(NVIDIA_SMI)
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    mib = 1024 * 1024
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpu_free_memory(2) == [81000 * mib, 40000 * mib]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert gpu_free_memory(1) == [40000 * mib]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa")  # by UUID, as CUDA takes a prefix of one
    assert gpu_free_memory(1) == [81000 * mib]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert gpu_free_memory(1) is None  # not a GPU nvidia-smi knows: unknown


def test_under_xdist_the_largest_graphs_are_collected_first(tmp_path: Path) -> None:
    """A worker runs its samples in collection order: largest model.py first. (The order is the xdist worker's
    collection, whatever the isolation: the eager checks run in the one xdist worker, with no sample worker to
    start.)"""
    # names whose order (sorted or reversed) is not the sizes': only the size can give large, middle, small
    for name, pad in (("a_small", 0), ("b_large", 4000), ("c_middle", 2000)):
        model = write_sample(tmp_path / "corpus" / name) / "model.py"
        model.write_text(model.read_text() + "#" * pad + "\n")
    run = run_pytest_warm(
        tmp_path, "-n", "1", "-v", "--inductor-samples=corpus", "--inductor-template=default", "-k",
        "check and eager", "--inductor-isolation=none", "--benchmark-disable", "-p", "no:randomly", *QUIET,
    )  # fmt: skip
    ran = re.findall(r"PASSED inductor-samples::corpus/(\w+)::check", run.stdout)
    assert ran == ["b_large", "c_middle", "a_small"], run.stdout[-3000:]


def worker_environment(pid: int) -> list[bytes]:
    """A started process's environment, which once read empty just after the start (a suite run on 2 busy cores):
    waited for, up to 10 s."""
    deadline = time.monotonic() + 10.0
    while not (environ := Path(f"/proc/{pid}/environ").read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return environ.split(b"\0")


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads a process's environment from /proc")
def test_each_sample_worker_gets_its_share_of_inductors_compile_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(COMPILE_THREADS, raising=False)
    assert compile_threads_share(1) is None  # one worker: Inductor's own default
    share = compile_threads_share(2)
    assert share == max(1, usable_cpus() // 2)
    worker = WorkerProcess(lambda: Hello(list(sys.path), []), environment={COMPILE_THREADS: str(share)})
    worker.start()
    try:
        assert worker.process is not None
        environ = worker_environment(worker.process.pid)
        assert f"{COMPILE_THREADS}={share}".encode() in environ
    finally:
        worker.stop()
    monkeypatch.setenv(COMPILE_THREADS, "3")
    assert compile_threads_share(2) is None  # the user's count stands
