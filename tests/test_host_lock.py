"""The work/timing lock that the pytest-xdist workers of a session share: real processes, real flock."""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest.mock
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from inner_runs import runpytest_warm

from conftest import usage_error_line
from pytest_inductor_templates import phases
from pytest_inductor_templates.compile.compiled import CompiledModel, compiles_off_the_gpu
from pytest_inductor_templates.integrations.benchmark import timing_switched_off_by
from pytest_inductor_templates.integrations.xdist import HOST_LOCK, LOCK_LOG, PINNED_GPU, TIMED_DEVICE, XdistHooks
from pytest_inductor_templates.templates.registry import TemplateRegistry
from pytest_inductor_templates.templates.selection import Selection
from pytest_inductor_templates.timing import cores, host_lock
from pytest_inductor_templates.timing.cores import Split
from pytest_inductor_templates.timing.host_lock import HostLock

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")

HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from pytest_inductor_templates.timing.host_lock import HostLock, Sharing

    folder, group, name, log, gpu = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), sys.argv[5]
    lock = HostLock(Sharing(folder, gpu))
    asked = time.time()
    with lock.work() if group == "work" else lock.timing(group.split(":")[1]):  # timing:cpu, timing:cuda
        began = time.time()
        (log.parent / f"{name}.began").touch()
        while not (log.parent / f"{name}.release").exists():  # held until the test lets go
            time.sleep(0.01)
        ended = time.time()
    with open(log, "a") as out:
        out.write(json.dumps({"name": name, "group": group, "asked": asked, "began": began, "ended": ended}) + "\\n")
    """
)
WAIT_SECONDS = 60  # for a holder to reach a state: generous for a loaded machine; no test waits for it to pass


class Holders:
    """Holder processes, each held in its group until the test releases it: what happens is decided by events
    (one holds, one waits), not by delays that a loaded machine can stretch."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.script, self.log = folder, folder / "holder.py", folder / "spans.jsonl"
        self.script.write_text(HOLDER)
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, group: str, gpu: str = "gpu0") -> None:
        """A holder of ``group`` (``work``, ``timing:cpu``, ``timing:cuda``), its CUDA timings on ``gpu``."""
        args = [sys.executable, str(self.script), str(self.folder), group, name, str(self.log), gpu]
        self.processes[name] = subprocess.Popen(args)

    def wait(self, what: Callable[[], bool], why: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not what():
            assert time.monotonic() < deadline, f"no {why} within {WAIT_SECONDS} s"
            assert all(p.poll() in (None, 0) for p in self.processes.values()), "a holder failed"
            time.sleep(0.01)

    def holding(self, name: str) -> None:
        self.wait((self.folder / f"{name}.began").exists, f"{name} holding")

    def release(self, name: str) -> None:
        (self.folder / f"{name}.release").touch()
        assert self.processes[name].wait(timeout=WAIT_SECONDS) == 0

    def spans(self) -> list[dict[str, Any]]:
        return sorted((json.loads(line) for line in self.log.read_text().splitlines()), key=lambda s: s["began"])


def held_by_another(path: Path) -> bool:
    """Whether another process holds an exclusive flock on ``path`` (a holder inside the turnstile)."""
    import fcntl

    if not path.exists():
        return False
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing releases the probe's lock, if it got one
    return False


def blocked_on_a_lock(pid: int) -> bool:
    """Whether process ``pid`` waits for a flock (Linux: /proc/locks lists a blocked request with ``->``)."""
    locks = Path("/proc/locks")
    if not locks.exists():  # elsewhere: give it time to reach the lock
        time.sleep(1.0)
        return True
    return any(line.split()[1] == "->" and line.split()[5] == str(pid) for line in locks.read_text().splitlines()
               if len(line.split()) > 5)  # fmt: skip


def waited_on(path: Path) -> bool:
    """Whether some process waits for a flock on ``path`` (Linux: a blocked request in /proc/locks names its
    inode); elsewhere, after a while."""
    locks = Path("/proc/locks")
    if not locks.exists():
        time.sleep(5.0)
        return True
    inode = f":{os.stat(path).st_ino} "
    return any("->" in line and inode in line for line in locks.read_text().splitlines())


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["began"] < b["ended"] and b["began"] < a["ended"]


def test_a_timing_waits_for_work_in_progress_and_work_for_a_timing(tmp_path: Path) -> None:
    """Work (a compile) holds; a timing asks meanwhile and waits (in the turnstile); work that asks while the timing
    waits goes after the timing: the waiting group goes first."""
    holders = Holders(tmp_path)
    holders.start("compile1", "work")
    holders.holding("compile1")
    holders.start("timing", "timing:cpu")
    holders.wait(lambda: held_by_another(tmp_path / host_lock.TURNSTILE), "timing waiting in the turnstile")
    holders.start("compile2", "work")
    holders.wait(lambda: blocked_on_a_lock(holders.processes["compile2"].pid), "compile2 waiting")
    holders.release("compile1")
    holders.holding("timing")
    assert not (tmp_path / "compile2.began").exists()  # it asked while the timing waited: it waits for it
    holders.release("timing")
    holders.holding("compile2")
    holders.release("compile2")
    found = holders.spans()
    assert [s["name"] for s in found] == ["compile1", "timing", "compile2"]
    first, timed, second = found
    assert timed["began"] >= first["ended"] and second["began"] >= timed["ended"]


def test_work_runs_together_and_so_do_timings_on_different_gpus(tmp_path: Path) -> None:
    """A second of the same group begins while the first still holds (waiting for it would hang: WAIT_SECONDS):
    work beside work, a timing on one GPU beside a timing on another."""
    for first, second in (("work", "work"), ("timing:cuda", "timing:cpu"), ("timing:cuda", "timing:cuda")):
        folder = tmp_path / f"{first}-{second}".replace(":", "_")
        folder.mkdir()
        holders = Holders(folder)
        holders.start("first", first)
        holders.holding("first")
        holders.start("second", second, gpu="gpu1")  # another GPU than the first's
        holders.holding("second")
        holders.release("first")
        holders.release("second")
        assert overlap(*holders.spans())


def test_one_timing_at_a_time_on_a_device(tmp_path: Path) -> None:
    """Two timings on the CPU (or on one GPU): the second waits for its device's slot until the first ends."""
    for device in ("cpu", "cuda"):
        folder = tmp_path / device
        folder.mkdir()
        holders = Holders(folder)
        holders.start("first", f"timing:{device}")
        holders.holding("first")
        holders.start("second", f"timing:{device}")
        slot = host_lock.CPU_SLOT if device == "cpu" else "gpu0"
        holders.wait(lambda: waited_on(folder / f"slot-{slot}"), "the second timing waiting for the slot")  # noqa: B023
        assert not (folder / "second.began").exists()
        holders.release("first")
        holders.holding("second")
        holders.release("second")
        first, second = holders.spans()
        assert second["began"] >= first["ended"]


def test_timings_that_wait_go_before_work_asked_after_them(tmp_path: Path) -> None:
    """A timing holds the GPU; a second timing waits for the GPU, and work asks after it: the second timing goes
    before that work (timings that wait run together, and work resumes after the last of them), where the
    turnstile alone would let the work in first and have the second timing wait for it to drain."""
    holders = Holders(tmp_path)
    holders.start("first", "timing:cuda")
    holders.holding("first")
    holders.start("second", "timing:cuda")
    holders.wait(lambda: waited_on(tmp_path / "slot-gpu0"), "the second timing waiting for the GPU")
    holders.start("compile", "work")
    holders.wait(lambda: blocked_on_a_lock(holders.processes["compile"].pid), "the work waiting")
    holders.release("first")
    holders.holding("second")
    assert not (tmp_path / "compile.began").exists()
    holders.release("second")
    holders.holding("compile")
    holders.release("compile")
    assert [s["name"] for s in holders.spans()] == ["first", "second", "compile"]


@pytest.mark.timeout(120)  # a request waiting for its own hold would hang here
def test_a_request_within_this_process_own_group_does_not_wait_for_itself(tmp_path: Path) -> None:
    lock = HostLock(tmp_path)
    holders = Holders(tmp_path)
    with lock.timing(), lock.work(), lock.timing():  # e.g. a recompile during its own timing
        holders.start("other", "work")  # and the timing is still held: another process's work waits
        holders.wait(lambda: blocked_on_a_lock(holders.processes["other"].pid), "other work waiting")
    holders.holding("other")
    holders.release("other")
    with lock.work(), lock.work():  # the backend's compile within the first call's, within the check
        assert (tmp_path / host_lock.WORK).exists()
    with lock.work(), pytest.raises(RuntimeError, match="a timing was asked for within work"):
        with lock.timing():  # it would run beside the others' work: a mistake of the caller's
            pass


def test_without_a_shared_folder_nothing_is_held(tmp_path: Path) -> None:
    host_lock.use(None)
    with host_lock.work(), host_lock.timing("cpu"):
        pass
    host_lock.use(host_lock.Sharing(str(tmp_path)))
    try:
        with host_lock.work():
            assert (tmp_path / host_lock.WORK).exists()
    finally:
        host_lock.use(None)


def test_the_log_has_each_hold_and_what_work_settled_before_it_left(tmp_path: Path) -> None:
    """Each hold is a line (pid, group, detail, start, end); work settles before it leaves (the compile pool), and
    what it settled is a line of its own, within the hold."""
    settled: list[float] = []

    def settle() -> tuple[str, float, float]:
        settled.append(time.time())
        return ("4242", settled[0], time.time())  # a pool's process, started and ready within the work

    log = tmp_path / "lock.log"
    lock = HostLock(host_lock.Sharing(str(tmp_path), "gpu3", str(log)), settle)
    with lock.work():
        assert not settled
    assert len(settled) == 1
    with lock.timing("cuda"), lock.work():  # work within a timing joins it: nothing to settle
        pass
    with lock.timing("cpu"):
        pass
    rows = [line.split() for line in log.read_text().splitlines()]
    assert [row[:3] for row in rows] == [
        [str(os.getpid()), "work", "-"],
        [str(os.getpid()), "pool", "4242"],
        [str(os.getpid()), "timing", "gpu3"],
        [str(os.getpid()), "timing", "cpu"],
    ]
    (work_start, work_end), (pool_start, pool_end) = ((float(r[3]), float(r[4])) for r in rows[:2])
    assert work_start <= pool_start <= pool_end <= work_end and len(settled) == 1


def test_the_controller_shares_the_gpus_among_more_workers_and_removes_the_lock_folder_at_the_end(
    tmp_path: Path,
) -> None:
    """Worker i on GPU i mod G; a replacement takes the GPU its lost worker used; one lock folder for all."""
    log = tmp_path / "logs" / "lock.log"
    hooks = XdistHooks(["0", "1"], timed="cuda", workers=4, lock_log=log)
    nodes = [SimpleNamespace(gateway=SimpleNamespace(id=f"gw{i}"), workerinput={}) for i in range(5)]
    for node in nodes[:4]:
        hooks.pytest_configure_node(node)
    assert [node.workerinput[PINNED_GPU] for node in nodes[:4]] == ["0", "1", "0", "1"]
    hooks.pytest_testnodedown(nodes[1], None)
    hooks.pytest_configure_node(nodes[4])  # gw1's replacement
    assert nodes[4].workerinput[PINNED_GPU] == "1"
    assert {node.workerinput[TIMED_DEVICE] for node in nodes} == {"cuda"}
    assert {node.workerinput[LOCK_LOG] for node in nodes} == {str(log)} and log.read_text() == ""
    folders = {node.workerinput[HOST_LOCK] for node in nodes}
    assert len(folders) == 1
    folder = Path(folders.pop())
    assert folder.is_dir()
    (line,) = hooks.header_lines()
    assert line.startswith(
        "inductor-templates: pytest-xdist: 4 workers share 2 GPUs (worker i on GPU i mod 2, which it sees as cuda:0) "
        "and time their CUDA sample items, one timing at a time per GPU, while no worker builds, compiles, checks or "
        "releases a sample"
    )
    hooks.pytest_unconfigure()
    assert not folder.exists()
    assert XdistHooks([]).lock_folder is None  # nothing to time under xdist: no lock
    for option in ("--inductor-isolation=none", "--benchmark-skip"):  # nothing times, nothing to lock
        untimed = XdistHooks(["0", "1"], timed="cuda", untimed=option, workers=2)
        assert untimed.lock_folder is None
        assert untimed.header_lines()[0].endswith(f"each of the 2 workers owns one GPU (it sees it as cuda:0) and "
                                                  f"times nothing ({option})")  # fmt: skip
    cpu = XdistHooks([], timed="cpu", workers=2)
    assert cpu.header_lines()[0].startswith(
        "inductor-templates: pytest-xdist: 2 workers share the CPU and time their CPU sample items, one timing at a "
        "time, while no worker builds"
    )
    cpu.pytest_unconfigure()


@pytest.mark.parametrize(
    ("args", "switched_off_by"),
    [
        ((), None),
        (("--benchmark-skip",), "--benchmark-skip"),
        (("--benchmark-disable",), "--benchmark-disable"),
        (("--benchmark-disable", "--benchmark-enable"), None),  # pytest-benchmark times then
        (("--benchmark-skip", "--benchmark-only"), None),  # and then
    ],
)
def test_the_user_switching_timing_off_is_told_apart(
    pytester: pytest.Pytester, args: tuple[str, ...], switched_off_by: str | None
) -> None:
    """A GPU-owning xdist worker times although pytest-benchmark switched itself off under xdist, but not when the
    user did: the option that did it is found on a real command line (for the header and the lock folder)."""
    assert timing_switched_off_by(pytester.parseconfig(*args)) == switched_off_by


def test_the_plugins_compile_waits_while_another_process_times(pytester: pytest.Pytester, tmp_path: Path) -> None:
    # a process of the same session (another xdist worker) times until the run's compile waits for it
    folder = tmp_path / "lock"
    folder.mkdir()
    pytester.makeconftest(
        f"from pytest_inductor_templates.timing import host_lock\nhost_lock.use(host_lock.Sharing({str(folder)!r}))\n"
    )
    pytester.makepyfile(
        """
        import json, time
        import torch

        def test_first_call(compiled_model):
            model = compiled_model(lambda x: x.sin() + 1)
            began = time.time()
            model(torch.ones(4))
            print("SPAN", json.dumps({"began": began, "ended": time.time()}))
        """
    )
    holders = Holders(folder)
    holders.start("timer", "timing:cpu")
    holders.holding("timer")  # the timer holds its lock before the run starts
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(
            runpytest_warm, pytester, "--inductor-backend=eager", "-s", "-p", "no:randomly", "--inductor-cpu-probe=0"
        )
        holders.wait(lambda: waited_on(folder / host_lock.PENDING) or running.done(), "the run's compile waiting")
        holders.release("timer")
        result = running.result(timeout=600)
    result.assert_outcomes(passed=1)
    line = next(line for line in result.outlines if "SPAN " in line)
    compiled, timed = json.loads(line.split("SPAN ", 1)[1]), holders.spans()[0]
    assert compiled["began"] < timed["ended"]  # the call came while the other process timed ...
    assert compiled["ended"] >= timed["ended"]  # ... and (trace, compile, run) waited for the timing to end


FORKER = textwrap.dedent(
    """
    import os, sys, time
    from pytest_inductor_templates.timing.host_lock import HostLock

    lock = HostLock(sys.argv[1])
    with lock.work():
        child = os.fork()  # as a compile pool started by fork, or a sample's own process, would be
        if child == 0:
            os.close(1), os.close(2)  # the parent's reader sees its output end with the parent
            time.sleep(8)  # the child outlives the parent's hold
            os._exit(0)
    print(child, flush=True)
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_during_a_compile_does_not_keep_the_lock(tmp_path: Path) -> None:
    script = tmp_path / "forker.py"
    script.write_text(FORKER)
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, check=True)
    child = int(done.stdout.strip())
    try:
        start = time.monotonic()
        with HostLock(tmp_path).timing():  # the parent has left its compile: a timing may begin
            waited = time.monotonic() - start
        assert waited < 3, f"waited {waited:.1f} s for a lock only a forked child still held"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_waiting_for_the_other_group_is_a_phase_of_its_own(tmp_path: Path) -> None:
    seen: list[str] = []
    phases.enter(phases.COMPILED_CALL)
    with phases.listening(seen.append), HostLock(tmp_path).timing():
        pass
    assert seen == [phases.WAITING, phases.COMPILED_CALL]  # a timeout meanwhile names the wait


BESIDE = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from pytest_inductor_templates.timing.cores import Split
    from pytest_inductor_templates.timing.host_lock import HostLock, Sharing

    folder, name, split = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "split"
    cpus = tuple(sorted(os.sched_getaffinity(0)))
    lock = HostLock(Sharing(str(folder), log=str(folder / "lock.log"), split=Split(cpus, cpus) if split else None))
    with lock.work():
        (folder / f"{name}.began").touch()
        with lock.beside_timings():  # a compile that does not touch the GPU
            (folder / f"{name}.beside").touch()
            while not (folder / f"{name}.rejoin").exists():
                time.sleep(0.01)
        (folder / f"{name}.rejoined").write_text(str(lock.rejoin_seconds))  # in the work group again
        while not (folder / f"{name}.release").exists():
            time.sleep(0.01)
    """
)


def _start_beside(holders: Holders, name: str, split: bool) -> None:
    script = holders.folder / "beside.py"
    script.write_text(BESIDE)
    args = [sys.executable, str(script), str(holders.folder), name, "split" if split else "whole"]
    holders.processes[name] = subprocess.Popen(args)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
@pytest.mark.parametrize("split", [True, False], ids=["split", "whole"])
def test_a_compile_beside_timings_lets_a_timing_run_and_joins_work_again_after_it(tmp_path: Path, split: bool) -> None:
    """Where the session splits its CPUs, a compile that does not touch the GPU leaves the work group: another
    process's timing runs meanwhile (it would wait for work in progress); when the compile ends, it joins the work
    group again only after that timing (its compiled code touches the GPU); the lock log has the work split around
    the compile. Without a split the compile stays work, and the timing waits for it."""
    holders = Holders(tmp_path)
    _start_beside(holders, "compile", split)
    holders.wait((tmp_path / "compile.beside").exists, "the compile beside timings")
    holders.start("timing", "timing:cuda")
    if not split:  # it stays work: the timing waits for it
        holders.wait(lambda: held_by_another(tmp_path / host_lock.TURNSTILE), "timing waiting in the turnstile")
        assert not (tmp_path / "timing.began").exists()
        (tmp_path / "compile.rejoin").touch()
        holders.release("compile")
        holders.holding("timing")
        holders.release("timing")
        return
    holders.holding("timing")  # beside the compile
    (tmp_path / "compile.rejoin").touch()
    holders.wait(lambda: blocked_on_a_lock(holders.processes["compile"].pid), "the compile waiting to rejoin")
    assert not (tmp_path / "compile.rejoined").exists()  # its compiled code waits for the timing
    time.sleep(0.5)
    holders.release("timing")
    holders.wait((tmp_path / "compile.rejoined").exists, "the compile back in the work group")
    holders.release("compile")
    assert float((tmp_path / "compile.rejoined").read_text()) >= 0.5  # waited: not to be counted as compile time
    rows = [line.split() for line in (tmp_path / "lock.log").read_text().splitlines()]
    mine = [(group, float(start), float(end)) for pid, group, _, start, end in rows
            if pid == str(holders.processes["compile"].pid)]  # fmt: skip
    assert [group for group, _, _ in mine] == ["work", "compile", "work"], rows
    (_, _, left), (_, beside_start, beside_end), (_, rejoined, _) = mine
    timed = next(s for s in holders.spans() if s["name"] == "timing")
    assert left <= beside_start <= timed["began"] <= beside_end <= timed["ended"] <= rejoined, (mine, timed)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2, reason="2 CPUs")
def test_a_split_host_works_on_the_work_cpus_and_times_on_the_timing_cpus(tmp_path: Path) -> None:
    """A process that shares a split host moves onto the work CPUs (and a thread it starts later is there too); a
    timing moves every thread onto the timing CPUs for its duration and back after."""
    script = tmp_path / "split.py"
    script.write_text(textwrap.dedent(
        """
        import json, os, sys, threading
        from pytest_inductor_templates.timing import host_lock
        from pytest_inductor_templates.timing.cores import Split

        cpus = sorted(os.sched_getaffinity(0))
        host_lock.use(host_lock.Sharing(sys.argv[1], split=Split(tuple(cpus[-1:]), tuple(cpus[:-1]))))
        seen = {"work": sorted(os.sched_getaffinity(0))}
        later = threading.Thread(target=lambda: seen.update(thread=sorted(os.sched_getaffinity(0))))
        later.start(); later.join()
        with host_lock.timing("cuda"):
            seen["timing"] = sorted(os.sched_getaffinity(0))
        seen["after"] = sorted(os.sched_getaffinity(0))
        print(json.dumps({"cpus": cpus, **seen}))
        """
    ))  # fmt: skip
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, check=True)
    seen = json.loads(done.stdout)
    cpus = seen["cpus"]
    assert seen["work"] == seen["thread"] == seen["after"] == cpus[:-1], seen
    assert seen["timing"] == cpus[-1:], seen


def test_the_cpus_split_into_whole_cores_a_quarter_for_timings() -> None:
    """Whole cores (hardware threads together) from the last, until a quarter of the CPUs and two for each GPU, at
    most half of them; none where the host has a single core."""
    smt = {cpu: frozenset({cpu % 8, cpu % 8 + 8}) for cpu in range(16)}
    assert cores.split(list(range(16)), smt) == Split((6, 7, 14, 15), (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13))
    assert cores.split([0, 1], {}) == Split((1,), (0,))
    assert cores.split([0, 1], {0: frozenset({0, 1}), 1: frozenset({0, 1})}) == Split((), (0, 1))  # one core
    assert cores.split([0], {}) == Split((), (0,))
    assert cores.split(list(range(8)), {}) == Split((6, 7), (0, 1, 2, 3, 4, 5))
    # two CPUs for each GPU whose timings run at once, up to half of them
    assert cores.split(list(range(16)), smt, gpus=4) == Split((4, 5, 6, 7, 12, 13, 14, 15), (0, 1, 2, 3, 8, 9, 10, 11))
    assert cores.split(list(range(16)), smt, gpus=8) == cores.split(list(range(16)), smt, gpus=4)
    assert cores.cpu_list((0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13)) == "0-5,8-13" and cores.cpu_list((7,)) == "7"


def test_only_inductors_own_compiles_without_autotuning_freezing_or_cpp_wrapper_leave_the_gpu_alone() -> None:
    """Those may go beside timings: `default`, `cudagraphs`, `triton`; not `max_autotune`, `tma`, `cutlass`, `aten`
    (GEMM autotuning), `freezing` (constants folded on the device), `cpp_wrapper`, a user's backend, nor a compile
    under an Inductor config set to autotune outside the plugin."""
    import torch._inductor.config

    registry = TemplateRegistry()
    beside = {name for name in registry.names() if compiles_off_the_gpu(Selection(template=registry[name]))}
    assert beside - {"eager"} == {"default", "cudagraphs", "triton"}, beside
    assert not compiles_off_the_gpu(Selection(template=registry["default"], backend="aot_eager"))
    with torch._inductor.config.patch(max_autotune_pointwise=True):
        assert not compiles_off_the_gpu(Selection(template=registry["default"]))


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_the_plugins_compile_leaves_the_work_group_where_the_host_is_split(tmp_path: Path) -> None:
    """A real Inductor compile through the plugin's compiled model, within work as a check compiles: with the host
    split, its code generation is a ``compile`` line of the lock log between two work holds (tracing before it, the
    first run after it); unsplit, one work hold."""
    import torch

    from pytest_inductor_templates.compile.isolation import isolated_compile_state

    cpus = tuple(sorted(os.sched_getaffinity(0)))
    for split in (Split(cpus, cpus), None):
        log = tmp_path / f"{'split' if split else 'whole'}.log"
        host_lock.use(host_lock.Sharing(str(tmp_path), log=str(log), split=split))
        try:
            with isolated_compile_state() as watcher, host_lock.work():
                model = CompiledModel(lambda x: x.sin() + 1, Selection(template=TemplateRegistry()["default"]), watcher)
                model(torch.ones(4))
        finally:
            host_lock.use(None)
        groups = [line.split()[1] for line in log.read_text().splitlines()]
        assert groups == (["work", "compile", "work"] if split else ["work"]), groups


def test_compiles_beside_timings_are_refused_where_they_cannot_apply(sentinel_test: pytest.Pytester) -> None:
    """A CPU timing would share its CPUs with the compiles beside it, and without isolation there is no other
    process: refused before any test runs."""
    line = usage_error_line(
        sentinel_test.runpytest_inprocess("--inductor-compile-beside-timing=on", "--inductor-devices=cpu")
    )
    assert line == (
        "ERROR: --inductor-compile-beside-timing (command line): needs CUDA devices only: a CPU timing would share "
        "its CPUs with the compiles"
    )
    line = usage_error_line(
        sentinel_test.runpytest_inprocess("--inductor-compile-beside-timing=on", "--inductor-isolation=none")
    )
    assert line == (
        "ERROR: --inductor-compile-beside-timing (command line): needs --inductor-isolation=process: in the pytest "
        "process nothing runs beside"
    )
    line = usage_error_line(sentinel_test.runpytest_inprocess("--inductor-compile-beside-timing=yes"))
    assert line == "ERROR: --inductor-compile-beside-timing (command line): expected on or off, got 'yes'"


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_a_compile_beside_timings_that_asks_for_work_joins_it_for_the_rest_of_the_compile(tmp_path: Path) -> None:
    """Work asked within a compile beside timings (the GPU after all) joins the work group there, once, and the
    compile stays in it to its end; a timing asked there is a mistake, as within work. Inductor's benchmarker (the
    GPU timing of shape padding) asks for work so: a stand-in for its GPU timer (no GPU here) sees the process in
    the work group, and the benchmarker is itself again after the compile."""
    from torch._inductor.runtime import benchmarking

    from pytest_inductor_templates.compile.compiled import beside_timings

    cpus = tuple(sorted(os.sched_getaffinity(0)))
    log = tmp_path / "lock.log"
    host_lock.use(host_lock.Sharing(str(tmp_path), log=str(log), split=Split(cpus, cpus)))
    active = host_lock._active
    assert active is not None
    seen: list[str | None] = []
    timer = benchmarking.benchmarker
    try:
        with host_lock.work():
            with host_lock.beside_timings():
                seen.append(active._held.group if active._held else None)
                with host_lock.work():
                    seen.append(active._held.group if active._held else None)
                with pytest.raises(RuntimeError, match="a timing was asked for within work"):
                    with host_lock.timing("cuda"):
                        pass
            with unittest.mock.patch.object(type(timer), "benchmark_gpu", lambda *_: seen.append(active._held.group)):
                with beside_timings(Selection(template=TemplateRegistry()["default"])):
                    seen.append(active._held.group if active._held else None)
                    benchmarking.benchmarker.benchmark_gpu(lambda: None)
                    seen.append(active._held.group if active._held else None)
            assert "benchmark_gpu" not in vars(timer)  # torch's own again
    finally:
        host_lock.use(None)
    assert seen == ["compile", "work", "compile", "work", "work"], seen
    groups = [line.split()[1] for line in log.read_text().splitlines()]
    assert groups == ["work", "compile", "work", "compile", "work"], groups


def test_the_controller_hands_its_cpu_split_to_every_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """With compiles beside timings, each xdist worker reads the controller's split of the CPUs into the sharing it
    hands its sample worker, and the header's compile threads are a share of the work CPUs; without, none."""
    from pytest_inductor_templates.integrations.xdist import shared_host
    from pytest_inductor_templates.timing.threads import compile_threads_share

    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    split = Split((6, 7, 14, 15), (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13))
    for given in (split, None):
        hooks = XdistHooks(["0"], timed="cuda", workers=4, split=given)
        node = SimpleNamespace(gateway=SimpleNamespace(id="gw0"), workerinput={})
        hooks.pytest_configure_node(node)
        worker = SimpleNamespace(workerinput=json.loads(json.dumps(node.workerinput)))  # as execnet carries it
        sharing = shared_host(worker)  # type: ignore[arg-type]
        assert sharing is not None and sharing.split == given
        (line,) = hooks.header_lines()
        share = 3 if given else compile_threads_share(4)  # 12 work CPUs among 4 workers; else all the usable CPUs
        assert line.endswith(f"Inductor's compile threads: {share} a worker (TORCHINDUCTOR_COMPILE_THREADS)"), line
        hooks.pytest_unconfigure()
