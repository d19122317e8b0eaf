"""The diagnosis's processes share one fresh Inductor cache: a kernel one of them compiled, the others load."""

from __future__ import annotations

import json
from pathlib import Path

from diagnose_plants import run_python

TWO_PROCESSES = """
import json, os
from pathlib import Path
import torch
from pytest_inductor_templates.diagnose.child import diagnosis_environment

work = Path({work!r})
seen = []
for process in range(2):  # the child, then a helper: each enters the diagnosis's environment afresh
    with diagnosis_environment(work, "cpu"):
        torch._dynamo.reset()
        torch.compile(lambda x: torch.sin(x) * 2 + 1)(torch.randn(8))
        kernels = {{str(p.relative_to(work)): p.stat().st_mtime_ns for p in work.rglob("*.so")}}
        seen.append({{"cache": os.environ["TORCHINDUCTOR_CACHE_DIR"], "kernels": kernels}})
print("RESULT " + json.dumps(seen))
"""


def test_a_kernel_one_process_compiled_is_loaded_not_compiled_again_by_the_next(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = run_python(tmp_path, "", TWO_PROCESSES.format(work=str(work)))
    assert done.returncode == 0, done.stdout + done.stderr
    first, second = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert Path(first["cache"]).parent == work  # the diagnosis's own, removed with its work folder
    assert first["kernels"], first  # the first compiled its C++ kernel there
    assert second["cache"] == first["cache"]
    assert second["kernels"] == first["kernels"]  # the second built none: the same files, untouched
