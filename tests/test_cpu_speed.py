"""The CPU-speed probe: a run says at its start whether the CPU's speed held still, and its saved results say so.

The unsteady machine is made, not mocked: a process that burns the CPU for 0.15 s, then sleeps 0.15 s, shares
one CPU with the run, so the probe's loops alternate between a full and a shared CPU, as on a VM whose vCPU
switches speed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from inner_runs import run_pytest_warm

from conftest import cli, usage_error_line
from pytest_inductor_templates.cpu_speed import SLOW, UNSTEADY_SHARE, probe

HOG = """
import time
while True:
    end = time.time() + 0.15
    while time.time() < end:
        pass
    time.sleep(0.15)
"""
pinnable = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pins processes to a CPU (Linux)")


def _on(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})


@pytest.fixture
def two_speed_cpu() -> Iterator[int]:
    """A CPU of this machine whose speed, for a process pinned to it, switches every 0.15 s."""
    cpu = min(os.sched_getaffinity(0))
    hog = subprocess.Popen([sys.executable, "-c", HOG], preexec_fn=lambda: _on(cpu))
    try:
        yield cpu
    finally:
        hog.kill()
        hog.wait()


@pinnable
def test_the_probe_sees_a_cpu_whose_speed_switches(two_speed_cpu: int) -> None:
    before = os.sched_getaffinity(0)
    _on(two_speed_cpu)
    try:
        seen = probe(1.5, iterations=50_000)
    finally:
        os.sched_setaffinity(0, before)
    assert seen.loops > 10 and seen.slow > UNSTEADY_SHARE and not seen.steady, seen
    assert seen.line().startswith(f"CPU speed moves ({seen.slow:.0%} of {seen.loops} loops timed over 1.5 s ran over")


@pinnable
def test_following_the_full_speed_pins_the_thread_for_a_round_and_gives_its_cpus_back() -> None:
    """On this machine's real CPUs: the first round probes every CPU and pins the thread to one of them; afterwards
    the thread may run on all its CPUs again, as before, also where the timing raised."""
    from pytest_inductor_templates.cpu_speed import loop_ms
    from pytest_inductor_templates.timing.fast_cpu import following

    before = os.sched_getaffinity(0)
    if len(before) < 2:
        pytest.skip("one usable CPU: nowhere to move to")
    with following(lambda: loop_ms(3_000)) as follow:
        assert follow is not None
        assert follow.settle(None) > 0
        assert follow.surveys == 1 and follow.current in before and os.sched_getaffinity(0) == {follow.current}
    assert os.sched_getaffinity(0) == before
    with pytest.raises(RuntimeError), following(lambda: loop_ms(3_000)) as follow:  # a timing that raises
        assert follow is not None
        follow.settle(None)
        raise RuntimeError("the model raised mid-timing")
    assert os.sched_getaffinity(0) == before


@pinnable
def test_a_run_on_an_unsteady_cpu_says_so_in_its_header_its_json_its_results_file_and_its_report(
    tmp_path: Path, two_speed_cpu: int
) -> None:
    result = run_pytest_warm(
        tmp_path, "--inductor-samples", "--inductor-template=default", "--inductor-backend=eager",
        "--inductor-devices=cpu", "--inductor-isolation=none",  # the session's probe, not the sample: no worker
        "-k", "embedding and bench", "--inductor-cpu-probe=1.5", "--benchmark-max-time=0.05",
        "--benchmark-min-rounds=3", "--benchmark-json=run.json", "--inductor-results=run.jsonl",
        "-p", "no:cacheprovider", "-W", "ignore",
        cpus=frozenset({two_speed_cpu}),  # the run shares the hog's CPU, as a preexec_fn would pin a fresh process
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    header = next(line for line in result.stdout.splitlines() if "CPU speed" in line)
    assert header.startswith("inductor-templates: CPU speed moves ("), header
    info = json.loads((tmp_path / "run.json").read_text())["machine_info"]
    assert info["cpu_probe_seconds"] == 1.5 and info["cpu_slow_share"] > UNSTEADY_SHARE
    assert f"{info['cpu_slow_share']:.0%} of {info['cpu_probe_loops']} loops" in header
    for saved in ("run.json", "run.jsonl"):  # the results file was started before the probe: its end line has it
        report = cli("report", str(tmp_path / saved))
        assert report.returncode == 0, report.stderr
        note = f"Note: the CPU's speed moved during this run's start ({info['cpu_slow_share']:.0%} of its probe's"
        assert note in report.stdout, saved
    compared = cli("compare", str(tmp_path / "run.json"), str(tmp_path / "run.json"))
    assert compared.stdout.count(f"ran over {SLOW}x the fastest): launch-bound speedups may differ") == 2


def test_no_probe_under_zero_or_without_timing_and_a_bad_value_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    for switch in ("--inductor-cpu-probe=0", "--benchmark-skip"):
        result = pytester.runpytest_inprocess("--inductor-samples", "--co", "-p", "no:cacheprovider", switch)
        assert "CPU speed" not in result.stdout.str(), switch
    line = usage_error_line(pytester.runpytest_inprocess("--inductor-cpu-probe=-1"))
    assert line == (
        "ERROR: --inductor-cpu-probe (command line): expected a number of seconds such as 1, or 0 for none, got '-1'"
    )


def test_following_the_full_speed_is_said_in_the_header_and_a_bad_value_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    header = "; CUDA rounds follow a CPU at full speed"
    on = pytester.runpytest_inprocess("--inductor-timing-follow-cpu=on", "--inductor-cpu-probe=0", "-p", "no:randomly")
    off = pytester.runpytest_inprocess("--inductor-cpu-probe=0", "-p", "no:randomly")
    assert header in on.stdout.str() and "inductor-templates: timing:" in off.stdout.str()
    assert header not in off.stdout.str()
    line = usage_error_line(pytester.runpytest_inprocess("--inductor-timing-follow-cpu=always"))
    assert line == "ERROR: --inductor-timing-follow-cpu (command line): expected on or off, got 'always'"


def test_the_probe_runs_where_no_header_is_shown(pytester: pytest.Pytester) -> None:
    """Under -q (no header, whose lines run the probe) the session still probes, and its results file says what."""
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    for quiet in ("-q", "--no-header"):
        result = pytester.runpytest_inprocess(
            quiet, "--inductor-cpu-probe=0.1", "--inductor-results=run.jsonl", "-p", "no:cacheprovider"
        )
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        assert "CPU speed" not in result.stdout.str()
        end = json.loads((pytester.path / "run.jsonl").read_text().splitlines()[-1])["end"]
        assert end["machine_info"]["cpu_probe_seconds"] == 0.1, end
