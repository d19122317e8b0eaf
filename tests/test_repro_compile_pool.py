"""A repro of a graph on a GPU compiles with Inductor's compile pool up: before the pool is up Inductor compiles
every kernel in the calling process, one after another (on the H200 a cold repro of ``squeezenet1_0`` took
117 s so). The wait itself is checked here, on the CPU, in a process of its own (the pool is process state): a child
of the warm interpreter, which has started no pool."""

from __future__ import annotations

import os
from pathlib import Path

from inner_runs import run_python_warm

WAIT = """
from torch._inductor.async_compile import AsyncCompile
from pytest_inductor_templates.diagnose.standalone import compile_pool_started

print("pool used before:", AsyncCompile.use_process_pool())
compile_pool_started()
print("pool used:", AsyncCompile.use_process_pool())
"""


def test_the_repro_waits_until_the_compile_pool_is_up(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_COMPILE_THREADS": "2"}
    done = run_python_warm(tmp_path, WAIT, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pool used before: False\npool used: True" in done.stdout, done.stdout + done.stderr[-2000:]
