"""A diagnosis's helper forked from its process (``diagnose.forked``): the pipes, exit codes and kill the helpers'
pool reads as it reads ``subprocess.Popen``'s. A whole diagnosis with a forked helper: test_diagnose_judged.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_inductor_templates.diagnose.child import NVML_CHECK
from pytest_inductor_templates.diagnose.forked import ForkedProcess


def shout() -> None:
    for line in sys.stdin:
        sys.stdout.write(line.upper())
        sys.stdout.flush()


def raises() -> None:
    raise RuntimeError("planted: this helper cannot start")


def ended(process: ForkedProcess, seconds: float = 30.0) -> int | None:
    deadline = time.monotonic() + seconds
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return process.poll()


def test_a_forked_helper_answers_over_its_pipes_and_ends_as_popen_would(tmp_path: Path) -> None:
    first = ForkedProcess(shout, tmp_path / "first.txt", [])
    second = ForkedProcess(shout, tmp_path / "second.txt", first.descriptors())
    first.stdin.write(b"one\n")
    first.stdin.flush()
    assert first.stdout.readline() == b"ONE\n"
    first.stdin.close()  # its end of file, although the second was forked after it: it kept none of the first's ends
    assert ended(first) == 0
    assert second.poll() is None
    second.kill()
    assert second.wait() == -9
    failed = ForkedProcess(raises, tmp_path / "failed.txt", [])
    assert failed.wait() == 1
    assert "RuntimeError: planted: this helper cannot start" in (tmp_path / "failed.txt").read_text()
    assert ended(ForkedProcess(lambda: os.getpid(), tmp_path / "quick.txt", [])) == 0


def test_helpers_are_forked_where_no_cuda_driver_is_loaded() -> None:
    """A Python that loaded no CUDA driver may fork its helpers."""
    code = "from pytest_inductor_templates.diagnose.forked import can_fork; print(can_fork())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stdout + done.stderr


FAKE_DRIVER = """
static int initialised = 0;
int cuInit(unsigned int flags) { initialised = 1; return 0; }
int cuDeviceGetCount(int *count) { if (!initialised) return 3; *count = 1; return 0; }
"""


@pytest.mark.parametrize("initialised", [False, True])
def test_helpers_are_forked_beside_a_loaded_cuda_driver_until_it_is_initialised(
    tmp_path: Path, initialised: bool
) -> None:
    """A loaded driver library (torch 2.11's CUDA build loads one as it is imported) stops no fork; its cuInit does
    (a driver that answers as CUDA's does, built here: no GPU on CI)."""
    source, driver = tmp_path / "driver.c", tmp_path / "libcuda.so.1"
    source.write_text(FAKE_DRIVER)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(driver), str(source)], check=True)
    code = (
        "import ctypes, sys; from pytest_inductor_templates.diagnose.forked import can_fork\n"
        f"driver = ctypes.CDLL({str(driver)!r})\n"
        f"{'driver.cuInit(0)' if initialised else 'pass'}\n"
        "print(can_fork())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == str(not initialised), done.stdout + done.stderr


def test_inductor_is_imported_asking_nvml_whether_cuda_is_there() -> None:
    """Inductor's import asks torch.cuda.is_available() (torch 2.11), which through the CUDA runtime initialises the
    driver and so forbids the fork; the preload imports it with torch told to ask NVML, and restores the variable."""
    code = (
        "import os, sys\n"
        "seen = []\n"
        "def heard(event, args):\n"
        "    if event == 'import' and args[0] == 'torch._inductor.compile_fx':\n"
        f"        seen.append(os.environ.get({NVML_CHECK!r}))\n"
        "sys.addaudithook(heard)\n"
        "from pytest_inductor_templates.diagnose.child import preload\n"
        "preload()\n"
        f"print(seen, os.environ.get({NVML_CHECK!r}))"
    )
    unset = {name: value for name, value in os.environ.items() if name != NVML_CHECK}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=unset)
    assert done.stdout.strip() == "['1'] None", done.stdout + done.stderr
