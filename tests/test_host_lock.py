"""The compile/timing lock that the GPU-owning pytest-xdist workers of a session share: real processes, real flock."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_inductor_templates import phases
from pytest_inductor_templates.integrations.benchmark import timing_switched_off_by
from pytest_inductor_templates.integrations.xdist import HOST_LOCK, PINNED_GPU, XdistHooks
from pytest_inductor_templates.timing import host_lock
from pytest_inductor_templates.timing.host_lock import HostLock

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock is POSIX")

HOLDER = textwrap.dedent(
    """
    import json, sys, time
    from pytest_inductor_templates.timing.host_lock import HostLock

    folder, group, hold, log = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    lock = HostLock(folder)
    asked = time.time()
    with lock.compiling() if group == "compiling" else lock.timing():
        began = time.time()
        time.sleep(hold)
        ended = time.time()
    with open(log, "a") as out:
        out.write(json.dumps({"group": group, "asked": asked, "began": began, "ended": ended}) + "\\n")
    """
)


def spans(tmp_path: Path, plan: list[tuple[float, str, float]]) -> list[dict[str, float]]:
    """Start one process per (delay, group, seconds held), each after its delay; their spans, by start."""
    script, log = tmp_path / "holder.py", tmp_path / "spans.jsonl"
    script.write_text(HOLDER)
    processes, start = [], time.monotonic()
    for delay, group, hold in plan:
        time.sleep(max(0.0, start + delay - time.monotonic()))
        args = [sys.executable, str(script), str(tmp_path), group, str(hold), str(log)]
        processes.append(subprocess.Popen(args))
    for process in processes:
        assert process.wait(timeout=60) == 0
    return sorted((json.loads(line) for line in log.read_text().splitlines()), key=lambda s: s["began"])


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["began"] < b["ended"] and b["began"] < a["ended"]


def test_a_timing_waits_for_a_compile_in_progress_and_a_compile_for_a_timing(tmp_path: Path) -> None:
    # a compile holds for 2 s; a timing asks meanwhile; a compile asks while the timing waits or runs
    found = spans(tmp_path, [(0.0, "compiling", 2.0), (1.0, "timing", 1.0), (1.5, "compiling", 0.5)])
    assert [s["group"] for s in found] == ["compiling", "timing", "compiling"]  # the waiting timing goes first
    first, timed, second = found
    assert timed["began"] >= first["ended"] and second["began"] >= timed["ended"]


def test_compiles_run_together_and_so_do_timings(tmp_path: Path) -> None:
    compiles, timings = tmp_path / "compiles", tmp_path / "timings"
    compiles.mkdir(), timings.mkdir()
    assert overlap(*spans(compiles, [(0.0, "compiling", 1.5), (0.5, "compiling", 1.5)]))
    assert overlap(*spans(timings, [(0.0, "timing", 1.5), (0.5, "timing", 1.5)]))


@pytest.mark.timeout(60)  # a request waiting for its own hold would hang here
def test_a_request_within_this_process_own_group_does_not_wait_for_itself(tmp_path: Path) -> None:
    lock = HostLock(tmp_path)
    script, log = tmp_path / "holder.py", tmp_path / "spans.jsonl"
    script.write_text(HOLDER)
    with lock.timing(), lock.compiling(), lock.timing():  # e.g. a recompile during its own timing
        other = subprocess.Popen([sys.executable, str(script), str(tmp_path), "compiling", "0", str(log)])
        time.sleep(1.0)
        assert other.poll() is None  # the timing is still held: another process's compile waits for it
        released = time.time()
    assert other.wait(timeout=60) == 0
    assert json.loads(log.read_text())["began"] >= released
    with lock.compiling(), lock.compiling():  # the backend's compile within the first call's
        assert (tmp_path / "compiling").exists()


def test_without_a_shared_folder_nothing_is_held(tmp_path: Path) -> None:
    host_lock.use(None)
    with host_lock.compiling(), host_lock.timing():
        pass
    host_lock.use(str(tmp_path))
    try:
        with host_lock.compiling():
            assert (tmp_path / "compiling").exists()
    finally:
        host_lock.use(None)


def test_the_controller_gives_gpu_owning_workers_one_lock_folder_and_removes_it_at_the_end() -> None:
    hooks = XdistHooks(["0", "1"])
    nodes = [SimpleNamespace(gateway=SimpleNamespace(id=f"gw{i}"), workerinput={}) for i in range(2)]
    for node in nodes:
        hooks.pytest_configure_node(node)
    folders = {node.workerinput[HOST_LOCK] for node in nodes}
    assert [node.workerinput[PINNED_GPU] for node in nodes] == ["0", "1"] and len(folders) == 1
    folder = Path(folders.pop())
    assert folder.is_dir()
    hooks.pytest_unconfigure()
    assert not folder.exists()
    assert XdistHooks([]).lock_folder is None  # no pinning, no timing under xdist: no lock
    for option in ("--inductor-isolation=none", "--benchmark-skip"):  # nothing times, nothing to lock
        untimed = XdistHooks(["0", "1"], untimed=option)
        assert untimed.lock_folder is None
        assert untimed.header_lines()[0].endswith(f"and times nothing ({option})")
    timed = XdistHooks(["0", "1"])
    assert timed.header_lines()[0].endswith("times its CUDA sample items; no worker compiles a sample while another "
                                            "times one")  # fmt: skip
    timed.pytest_unconfigure()


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


HOLD_UNTIL_ASKED = textwrap.dedent(
    """
    import json, pathlib, sys, time
    from pytest_inductor_templates.timing.host_lock import HostLock

    folder, asked, log = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
    with HostLock(folder).timing():
        pathlib.Path(log + ".held").touch()
        while not asked.exists():  # until the other side is about to compile, however long its start takes
            time.sleep(0.05)
        time.sleep(2.0)
        ended = time.time()
    pathlib.Path(log).write_text(json.dumps({"ended": ended}))
    """
)


def test_the_plugins_compile_waits_while_another_process_times(pytester: pytest.Pytester, tmp_path: Path) -> None:
    # a process of the same session (another xdist worker) times until this run is about to compile (plus 2 s); the
    # compile must wait for it. Handshakes, not fixed delays: the inner run's start takes long on a loaded machine.
    folder, asked, log = tmp_path / "lock", tmp_path / "asked", tmp_path / "timer.json"
    folder.mkdir()
    pytester.makeconftest(f"from pytest_inductor_templates.timing import host_lock\nhost_lock.use({str(folder)!r})\n")
    pytester.makepyfile(
        f"""
        import json, pathlib, time
        import torch

        def test_first_call(compiled_model):
            model = compiled_model(lambda x: x.sin() + 1)
            began = time.time()
            pathlib.Path({str(asked)!r}).touch()
            model(torch.ones(4))
            print("SPAN", json.dumps({{"began": began, "ended": time.time()}}))
        """
    )
    script = tmp_path / "holder.py"
    script.write_text(HOLD_UNTIL_ASKED)
    timer = subprocess.Popen([sys.executable, str(script), str(folder), str(asked), str(log)])
    deadline = time.monotonic() + 60
    while not Path(f"{log}.held").exists() and time.monotonic() < deadline:  # the timer holds its lock first
        time.sleep(0.05)
    result = pytester.runpytest_subprocess("--inductor-backend=eager", "-s", "-p", "no:randomly")
    assert timer.wait(timeout=60) == 0
    result.assert_outcomes(passed=1)
    line = next(line for line in result.outlines if "SPAN " in line)
    compiled, timed = json.loads(line.split("SPAN ", 1)[1]), json.loads(log.read_text())
    assert compiled["began"] < timed["ended"]  # the call came while the other process timed ...
    assert compiled["ended"] >= timed["ended"]  # ... and (trace, compile, run) waited for the timing to end


FORKER = textwrap.dedent(
    """
    import os, sys, time
    from pytest_inductor_templates.timing.host_lock import HostLock

    lock = HostLock(sys.argv[1])
    with lock.compiling():
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
