"""benchmarks/cpu_steadiness.py: the probe that says whether a machine's CPU speed is steady enough for speedups."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parent.parent / "benchmarks" / "cpu_steadiness.py"


def _script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OUT": str(cwd)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_a_two_speed_cpu_is_summarised_as_such(tmp_path: Path) -> None:
    """Half the samples near 14 ms and half near 26 ms (as an H200 machine's vCPU logged them): the summary gives
    the fastest, the deciles, and the share slower than 1.3x the fastest; lines cut short are skipped."""
    log = tmp_path / "cpu-speed.txt"
    fast, slow = [14.0 + i / 10 for i in range(10)], [26.0 + i / 10 for i in range(10)]
    lines = [f"{i} {ms} 3\n" for i, ms in enumerate(fast + slow)]
    lines[5:5] = ["5.5 99", "5.6 14.45 3\n"]  # a line cut short by a kill, the next appended to it: both skipped
    log.write_text("".join(lines) + "21 27.")
    done = _script("--summarize", str(log), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "20 samples: fastest 14.0 ms, p10 14.2, median 20.4, p90 26.7, slowest 26.9; 50% more than 1.3x the fastest"
    )


def test_probes_pinned_to_each_cpu_report_one_line_each(tmp_path: Path) -> None:
    cpu = min(os.sched_getaffinity(0))
    done = _script("--seconds", "1.2", "--cpus", str(cpu), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = done.stdout.splitlines()[-1]
    assert re.fullmatch(rf"  CPU {cpu}: [23] samples: fastest \d+\.\d ms, .* more than 1\.3x the fastest", line), line
    logged = [line.split() for line in (tmp_path / f"cpu-{cpu}.txt").read_text().splitlines()]
    assert len(logged) in (2, 3) and all(int(fields[2]) == cpu for fields in logged)  # pinned there


def test_a_cpu_this_process_may_not_use_is_one_usage_line(tmp_path: Path) -> None:
    done = _script("--cpus", "100000", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1].endswith(
        "--cpus [100000] not among this process's CPUs " + str(sorted(os.sched_getaffinity(0)))
    )
