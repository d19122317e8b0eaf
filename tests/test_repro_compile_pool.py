"""A repro of a graph on a GPU compiles with Inductor's compile pool up: before the pool is up Inductor compiles
every kernel in the calling process, one after another (on the H200 a cold repro of ``squeezenet1_0`` took
117 s so). The wait itself is checked here, on the CPU, in a fresh process (the pool is process state)."""

from __future__ import annotations

import os
import subprocess
import sys

WAIT = """
from torch._inductor.async_compile import AsyncCompile
from pytest_inductor_templates.diagnose.standalone import compile_pool_started

compile_pool_started()
print("pool used:", AsyncCompile.use_process_pool())
"""


def test_the_repro_waits_until_the_compile_pool_is_up() -> None:
    env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", WAIT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pool used: True" in done.stdout, done.stdout + done.stderr[-2000:]
