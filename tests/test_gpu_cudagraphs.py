"""On a CUDA device: raw CUDA-graph compiles overwrite earlier outputs; compiled_model keeps them.

Run on a GPU machine with ``pytest -m gpu -s``; skipped without CUDA.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

OVERWRITE_TESTS = """
import torch

RAW_KWARGS = {raw_kwargs}


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 64)

    def forward(self, x):
        y = self.fc(x).relu()
        return {{"y": y, "pair": (y * 2, "tag")}}


def calls(fn, model):
    torch.manual_seed(0)
    with torch.no_grad():
        for _ in range(3):                        # warm-up, recording, first replay
            fn(torch.randn(8, 64, device="cuda"))
        x1, x2 = torch.randn(8, 64, device="cuda"), torch.randn(8, 64, device="cuda")
        o1 = fn(x1)
        o2 = fn(x2)
        expected = model(x1)
    torch.cuda.synchronize()
    return o1, o2, expected


def test_raw_torch_compile_overwrites_the_first_output():
    model = Nested().cuda().eval()
    o1, o2, expected = calls(torch.compile(model, **RAW_KWARGS), model)
    try:
        kept = torch.allclose(o1["y"], expected["y"])
        same_memory = o1["y"].data_ptr() == o2["y"].data_ptr()
        print(f"RAW {{RAW_KWARGS}}: o1 still equals eager(x1): {{kept}}; o1 and o2 share memory: {{same_memory}}")
    except RuntimeError as error:
        kept = False
        print(f"RAW {{RAW_KWARGS}}: reading o1 raised: {{str(error).splitlines()[0]}}")
    assert not kept


def test_compiled_model_keeps_the_first_output(compiled_model, monkeypatch):
    model = Nested().cuda().eval()
    compiled = compiled_model(model)
    o1, o2, expected = calls(compiled, model)
    torch.testing.assert_close(o1["y"], expected["y"])
    torch.testing.assert_close(o1["pair"][0], expected["pair"][0])
    assert o1["pair"][1] == "tag"
    assert o1["y"].data_ptr() != o2["y"].data_ptr()
    clones = []                                    # steady state: count Tensor.clone calls per call
    original_clone = torch.Tensor.clone
    monkeypatch.setattr(torch.Tensor, "clone", lambda t, *a, **k: clones.append(1) or original_clone(t, *a, **k))
    with torch.no_grad():
        for _ in range(4):
            compiled(torch.randn(8, 64, device="cuda"))
    monkeypatch.undo()
    print(f"compiled_model: o1 still equals eager(x1): True; clones per call: {{len(clones) / 4}}; "
          f"{{compiled.stats.summary()}}")
    assert len(clones) == {clones_per_call} * 4
    assert compiled.stats.cudagraph_skips == 0
"""


@pytest.mark.parametrize(
    ("args", "raw_kwargs"),
    [
        (["--inductor-template=cudagraphs"], {"options": {"triton.cudagraphs": True}}),
        (["--inductor-mode=reduce-overhead"], {"mode": "reduce-overhead"}),
    ],
    ids=["cudagraphs", "reduce-overhead"],
)
def test_cudagraph_outputs_survive_later_calls(pytester: pytest.Pytester, args: list[str], raw_kwargs: dict) -> None:
    pytester.makepyfile(test_overwrite=OVERWRITE_TESTS.format(raw_kwargs=raw_kwargs, clones_per_call=2))
    result = pytester.runpytest_subprocess(*args, "-s", "-W", "ignore::DeprecationWarning")
    print(result.stdout.str())
    result.assert_outcomes(passed=2)


def test_no_cloning_without_cuda_graphs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_overwrite=OVERWRITE_TESTS.format(raw_kwargs={}, clones_per_call=0))
    result = pytester.runpytest_subprocess(
        "--inductor-template=default", "-s", "-W", "ignore::DeprecationWarning", "-k", "compiled_model_keeps"
    )
    print(result.stdout.str())
    result.assert_outcomes(passed=1, deselected=1)
