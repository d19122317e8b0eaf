"""On a CUDA device: a compiled model that allocates 256 MiB more in each call peaks that much higher than eager, in a
user test's bench item and in a sample's (measured in the sample worker); without the planted allocation the two
peaks are close.

Run on a GPU machine with ``pytest -m gpu -s``; skipped without CUDA.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

EXTRA_MIB = 256

# A backend that compiles with Inductor and then holds 256 MiB more on the device during each compiled call.
HEAVIER_BACKEND = f"""
import torch


def heavier(gm, example_inputs):
    compiled = torch._inductor.compile(gm, example_inputs)

    def run(*args):
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        extra = torch.empty({EXTRA_MIB} * 1024 * 1024, dtype=torch.uint8, device=device)
        out = compiled(*args)
        del extra
        return out

    return run


torch._dynamo.register_backend(name="heavier")(heavier)
"""

USER_TEST = """
import torch


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(1024, 4096), torch.nn.Linear(4096, 1024)

    def forward(self, x):
        return self.down(self.up(x).relu())


def test_mlp_memory(inductor_benchmark):
    with torch.no_grad():
        inductor_benchmark(Mlp().cuda().eval(), torch.randn(64, 1024, device="cuda"))
"""

ARGS = (
    "--inductor-samples", "--inductor-template=default", "--inductor-devices=cuda:0",
    "-k", "mlp_memory or launch_bound", "--inductor-tolerance=1e-2,1e-2", "--benchmark-max-time=0.2",
    "--benchmark-json=run.json", "-p", "no:cacheprovider", "-W", "ignore",
)  # fmt: skip


def compiled_benches(pytester: pytest.Pytester, *backend: str) -> list[dict[str, Any]]:
    result = pytester.runpytest_subprocess(*ARGS, *backend)
    result.assert_outcomes(passed=5)  # the user test under default; launch_bound under eager and default, 2 items each
    result.stdout.fnmatch_lines(["*default memory*"])  # the speedup table's memory column
    items = json.loads(pytester.path.joinpath("run.json").read_text())["inductor_templates"]["items"]
    assert not any("memory_ratio" in r for r in items if r["template"] == "eager" or r["kind"] == "check")
    benches = [r for r in items if r["kind"] == "bench" and r["template"] == "default"]
    assert sorted(r["source"] for r in benches) == ["sample", "test"]
    for r in benches:
        peaks = f"eager {r['eager_peak_mib']} MiB, compiled {r['compiled_peak_mib']} MiB"
        print(f"\npeak memory of {r['sample']}: {peaks}, ratio {r['memory_ratio']:.3f}")
        # the peaks are recorded to 0.1 MiB, the ratio from their bytes (launch_bound's eager peak: 0.0 MiB on an H100)
        eager, compiled = r["eager_peak_mib"], r["compiled_peak_mib"]
        if compiled >= 0.1:
            assert max(eager - 0.05, 0) / (compiled + 0.05) <= r["memory_ratio"] <= (eager + 0.05) / (compiled - 0.05)
    return benches


def test_a_planted_allocation_raises_the_compiled_peak_by_its_size(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(HEAVIER_BACKEND)
    pytester.makepyfile(test_user=USER_TEST)
    for r in compiled_benches(pytester, "--inductor-backend=heavier"):
        assert EXTRA_MIB - 16 < r["compiled_peak_mib"] - r["eager_peak_mib"] < EXTRA_MIB + 16, r
        assert r["memory_ratio"] < 1
    for r in compiled_benches(pytester):  # Inductor's own program: no 256 MiB between the peaks
        assert abs(r["compiled_peak_mib"] - r["eager_peak_mib"]) < EXTRA_MIB / 4, r
