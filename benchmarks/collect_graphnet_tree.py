"""How long collecting a GraphNet-format root of 2,500 sample directories takes.

Builds the tree synthetically in a temporary directory (nested two levels, as real roots are),
then runs ``pytest --collect-only --inductor-samples=ROOT`` in this process and times the
collection phase (pytest_collection to pytest_collection_finish), and the whole command in a
fresh process. Target: collection under 3 s.  Usage: python benchmarks/collect_graphnet_tree.py [N]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

MODEL = (
    "import torch\n\nclass GraphModule(torch.nn.Module):\n    def forward(self, L_x_):\n        return L_x_.relu()\n"
)
META = 'class Program_weight_tensor_meta_L_x_:\n    name = "L_x_"\n    shape = [2]\n    dtype = "torch.float32"\n'


class CollectionTimer:
    def pytest_collection(self) -> None:
        self.start = time.perf_counter()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.seconds = time.perf_counter() - self.start
        self.items = len(session.items)


def build(root: Path, count: int) -> None:
    for index in range(count):
        sample = root / f"family_{index % 50:02d}" / f"model_{index:04d}"
        sample.mkdir(parents=True)
        (sample / "model.py").write_text(MODEL)
        (sample / "weight_meta.py").write_text(META)
        (sample / "input_meta.py").write_text("")
        (sample / "graph_net.json").write_text('{"framework": "torch", "num_devices_required": 1}')


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "corpus"
        build(root, count)
        (Path(tmp) / "no_tests").mkdir()
        args = [
            str(Path(tmp) / "no_tests"),
            "--collect-only",
            "-q",
            f"--inductor-samples={root}",
            "--inductor-template=default",
            "-p",
            "no:cacheprovider",
            f"--rootdir={tmp}",
            "-c",
            "/dev/null",
        ]
        timer = CollectionTimer()
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", *args], check=True, capture_output=True, cwd=tmp)
        command = time.perf_counter() - start
        pytest.main(args, plugins=[timer])
    print(
        f"{count} sample directories -> {timer.items} items: collection {timer.seconds:.2f} s "
        f"(target < 3 s); whole `pytest --collect-only` command {command:.2f} s"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2500)
