"""Each rule of the check on real Inductor outputs: the calls are made once per model (``observe``), then
compiled outputs with a planted fault (or a harmless change) are judged as the check judges them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from inner_runs import runpytest_warm

from conftest import QUIET, junit_properties
from pytest_inductor_templates.check.float64 import float64_run
from pytest_inductor_templates.check.inputs import Inputs
from pytest_inductor_templates.check.runner import CheckSubject, Observed, judge, observe
from pytest_inductor_templates.compile.isolation import isolated_compile_state
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.tolerance import Tolerance

# Inductor's CPU lowering imports torch.utils.mkldnn, whose ScriptModules warn on torch 2.13
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")


def _call(model: Any, inputs: Inputs) -> Any:
    with torch.no_grad():
        return model(*inputs.args, **inputs.kwargs)


def _observed(make: Callable[[], torch.nn.Module], *inputs: Inputs) -> Iterator[Observed]:
    with isolated_compile_state():
        observed = observe(CheckSubject(make, torch.compile(make()), list(inputs), call=_call))
        assert isinstance(observed, Observed), observed
        yield observed


def _with(observed: Observed, change: Callable[[str, torch.Tensor], torch.Tensor]) -> Observed:
    """The observation with ``change(key, tensor)`` applied to every call's compiled outputs (dicts here)."""
    actual = [{key: change(key, t.clone()) for key, t in out.items()} for out in observed.actual]
    return dataclasses.replace(observed, actual=actual, first_after=actual[0])


class Scales(torch.nn.Module):
    """Three outputs: one of about 1e-13; one of about 1e5 with reassociated reductions; and one behind a large
    negative mask compared with ``==`` (as OPT's captured graph does): float32 absorbs the masked scores into
    it, float64 does not, so the float64 run computes something else there."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(64, 32)
        self.w = torch.nn.Parameter(torch.randn(1024) * 100)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        large = torch.nn.functional.layer_norm(x, (1024,)) * 3000 + (x * self.w).sum(-1, keepdim=True)
        h = self.fc(x[:, :64])
        scores = h @ h.T
        masked = scores + torch.triu(torch.full_like(scores, -1e10), 1)
        mask = torch.where(masked == -1e10, torch.zeros_like(scores), scores)
        return {"tiny": torch.tanh(h) * 1e-13, "large": large, "masked": mask}


def _scales() -> torch.nn.Module:
    torch.manual_seed(0)
    return Scales().eval()


@pytest.fixture(scope="module")
def scales() -> Iterator[Observed]:
    torch.manual_seed(1)
    yield from _observed(_scales, Inputs((torch.randn(64, 1024) * 10,)), Inputs((torch.randn(64, 1024) * 10,)))


def test_plain_inductor_passes_on_the_first_comparison_at_every_scale(scales: Observed) -> None:
    result = judge(scales)
    assert result.outcome is Outcome.PASS and result.rule == "first comparison"
    large = (scales.actual[0]["large"] - scales.expected[0]["large"]).abs().max()
    assert float(large) > 1e-4  # a reassociation's wobble that an absolute atol of 1e-5 calls a failure
    absolute = judge(scales, Tolerance(1.3e-6, 1e-5))  # beyond it, but as close to float64 as eager is
    assert absolute.outcome is Outcome.PASS and absolute.rule == "second opinion"
    assert absolute.second_opinions[0].startswith("call 1 of 2: out['large']: against float64, compiled vs eager: ")


def test_a_fault_on_an_output_of_1e_13_is_seen(scales: Observed) -> None:
    def channel(key: str, t: torch.Tensor) -> torch.Tensor:
        if key == "tiny":
            t[:, 5] *= 1.001  # one channel 0.1% off
        return t

    faulty = _with(scales, channel)
    result = judge(faulty)
    assert result.outcome is Outcome.ACCURACY_FAIL and result.reason.startswith("call 1 of 2: out['tiny']")
    assert result.rule.startswith("second opinion: ")  # beyond the scaled tolerance and farther from float64
    assert judge(faulty, Tolerance(1.3e-6, 1e-5)).outcome is Outcome.PASS  # invisible to an absolute atol


def test_a_stale_second_call_is_named(scales: Observed) -> None:
    stale = dataclasses.replace(scales, actual=[scales.actual[0], scales.actual[0]])
    result = judge(stale)
    assert result.rule == "stale output"
    assert result.reason.startswith("call 2 of 2 returned a stale output: out['tiny']: call 2 returned call 1's values")


def _gemm() -> torch.nn.Module:
    torch.manual_seed(0)
    block = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256), torch.nn.LayerNorm(256)
    )
    return _Named(block.to(torch.bfloat16).eval())


class _Named(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"out": self.inner(x)}


@pytest.fixture(scope="module")
def gemm() -> Iterator[Observed]:
    torch.manual_seed(2)
    inputs = [Inputs((torch.randn(64, 256).to(torch.bfloat16),)) for _ in range(2)]
    yield from _observed(_gemm, *inputs)


def test_bf16_float64_recomputed_passes_on_the_second_opinion_with_its_figures(gemm: Observed) -> None:
    wide = gemm.float64.outputs()
    assert wide is not None
    actual = [{"out": w["out"].to(torch.bfloat16)} for w in wide]
    result = judge(dataclasses.replace(gemm, actual=actual, first_after=actual[0]))
    assert result.outcome is Outcome.PASS and result.rule == "second opinion"
    assert result.second_opinions[0].startswith("call 1 of 2: out['out']: against float64, compiled vs eager: RMSE ")
    assert result.second_opinions[1].startswith("call 2 of 2: out['out']: against float64")  # each call named


def test_bf16_a_row_2_percent_off_fails_the_second_opinion(gemm: Observed) -> None:
    def row(key: str, t: torch.Tensor) -> torch.Tensor:
        t[-1] *= 1.02
        return t

    result = judge(_with(gemm, row))
    assert result.outcome is Outcome.ACCURACY_FAIL and result.rule == "second opinion: slice"
    assert "at dim 0 index 63" in result.reason


def test_a_failing_call_keeps_its_float64_figures_by_call_and_output(gemm: Observed) -> None:
    """The verdict carries compiled's and eager's RMSE against float64 at each output its second opinion failed,
    named by call (``CheckResult.float64_rmse``): a diagnosis reads its kind from them, not from another compile."""
    from pytest_inductor_templates.diagnose.localise import rmse

    wide = gemm.float64.outputs()
    assert wide is not None
    actual = [gemm.actual[0], {"out": gemm.actual[1]["out"] * 1.05}]  # the second call 5% off
    result = judge(dataclasses.replace(gemm, actual=actual, first_after=actual[0]))
    assert result.outcome is Outcome.ACCURACY_FAIL and result.reason.startswith("call 2 of 2:"), result.reason
    ((where, figures),) = result.float64_rmse.items()
    assert where == "call 2 of 2: out['out']"
    expected = (rmse(actual[1]["out"], wide[1]["out"]), rmse(gemm.expected[1]["out"], wide[1]["out"]))
    assert figures == pytest.approx(expected)
    assert judge(gemm).float64_rmse == {}  # a pass has none


def _masked_row_off(key: str, t: torch.Tensor) -> torch.Tensor:
    if key == "masked":
        t[-1] *= 1.02
    return t


class _Overflowing(torch.nn.Module):
    """The bfloat16 block with its first 8 rows overflowing into NaN, as a BART graph's do on CUDA (its float32
    mask value is -Inf in bfloat16): ``y * 1e39 - y * 1e39`` is Inf - Inf in bfloat16 and 0 in float64."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        y = self.inner(x)
        top = y[:8] + (y[:8] * 1e39 - y[:8] * 1e39)
        return {"out": torch.cat([top, y[8:]])}


@pytest.fixture(scope="module")
def overflowing() -> Iterator[Observed]:
    torch.manual_seed(2)
    inputs = [Inputs((torch.randn(64, 256).to(torch.bfloat16),)) for _ in range(2)]
    yield from _observed(lambda: _Overflowing(_gemm().inner), *inputs)


def test_eager_overflowing_where_float64_does_not_leaves_float64_a_reference(overflowing: Observed) -> None:
    eager, wide = overflowing.expected, overflowing.float64.outputs()
    assert wide is not None and all(bool(w["out"].isfinite().all()) for w in wide)
    assert all(int((~e["out"].isfinite()).sum()) > 100 for e in eager)  # overflowed in bfloat16 only
    recomputed = [  # float64 rounded to bfloat16, NaN where eager is: near float64, beyond bfloat16's rtol
        {"out": torch.where(e["out"].isfinite(), w["out"].to(torch.bfloat16), e["out"])}
        for e, w in zip(eager, wide, strict=True)
    ]
    result = judge(dataclasses.replace(overflowing, actual=recomputed, first_after=recomputed[0]))
    assert result.outcome is Outcome.PASS and result.rule == "second opinion", result.reason
    left_out = int((~eager[0]["out"].isfinite()).sum())
    figures = result.second_opinions[0]
    assert f"(leaving out {left_out} elements where eager is NaN or Inf and float64 is finite)" in figures

    def row(key: str, t: torch.Tensor) -> torch.Tensor:
        t[-1] *= 1.02
        return t

    faulty = judge(_with(overflowing, row))
    assert faulty.outcome is Outcome.ACCURACY_FAIL and faulty.rule == "second opinion: slice", faulty.reason


def test_an_untrusted_float64_run_leaves_the_first_verdict(scales: Observed) -> None:
    result = judge(_with(scales, _masked_row_off))
    assert result.outcome is Outcome.ACCURACY_FAIL and result.rule == "first comparison"
    assert (
        result.reason.startswith("call 1 of 2: out['masked']") and "float64 run not trusted: eager is " in result.reason
    )


def test_a_float64_run_that_raises_says_why(scales: Observed) -> None:
    def float32_only() -> Callable[[torch.Tensor], dict[str, torch.Tensor]]:
        model = _scales()

        def forward(x: torch.Tensor) -> dict[str, torch.Tensor]:
            if x.dtype != torch.float32:
                raise TypeError("this model takes float32 only")
            return model(x)

        return forward

    raising = dataclasses.replace(scales, float64=float64_run(float32_only, _call, [Inputs((torch.ones(1),))]))
    result = judge(_with(raising, _masked_row_off))
    assert result.outcome is Outcome.ACCURACY_FAIL and result.rule == "first comparison"
    assert "no float64 second opinion: the float64 run raised TypeError: this model takes float32 only" in result.reason


class Sums(torch.nn.Module):
    """Long float32 sums, which Inductor's kernels add in another order than eager: a few ulps apart."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 100).sum(-1) + x.cumsum(-1)[:, -1]


def _nudged(compiled: Any) -> Callable[..., torch.Tensor]:
    """The compiled model, with one output element moved to the next float32 up: a planted fault of one ulp."""

    def call(*args: Any) -> torch.Tensor:
        out = compiled(*args).clone()
        out[3] = torch.nextafter(out[3], torch.tensor(float("inf")))
        return out

    return call


@pytest.mark.parametrize("planted", [False, True], ids=["reassociated", "one ulp planted"])
def test_second_opinion_off_makes_a_strict_tolerance_strict(planted: bool) -> None:
    """At --inductor-tolerance=0,0 the float64 second opinion clears outputs as close to float64 as eager's;
    switched off, what is beyond the tolerance fails, and the rule says the second opinion was off."""
    from pytest_inductor_templates.check.runner import run_check
    from pytest_inductor_templates.tolerance import explicit_tolerance

    torch.manual_seed(0)
    inputs = [Inputs((torch.randn(16, 512),)), Inputs((torch.randn(16, 512),))]
    strict = explicit_tolerance(0.0, 0.0)
    results = {}
    for second_opinion in (True, False):
        with isolated_compile_state():
            compiled = torch.compile(Sums())
            model = _nudged(compiled) if planted else compiled
            subject = CheckSubject(Sums, model, inputs, strict, call=_call, second_opinion=second_opinion)
            results[second_opinion] = run_check(subject)
    cleared, failed = results[True], results[False]
    assert cleared.outcome is Outcome.PASS and cleared.rule == "second opinion", cleared.reason
    assert failed.outcome is Outcome.ACCURACY_FAIL and failed.rule == "first comparison, second opinion off"
    assert failed.reason.startswith("call 1 of 2: out: float32 [16]: ") and "beyond rtol 0, atol 0" in failed.reason
    assert not failed.second_opinions and "against float64" not in failed.details


REASSOCIATED = """
import torch


def test_sum(inductor_check):
    torch.manual_seed(0)
    x = torch.randn(64, 512)
    inductor_check(lambda t: (t * 1.0001).sum(dim=1) / 3.0, x)  # Inductor's sums add in another order than eager's
"""


def test_the_session_switches_reach_the_check_and_the_record(pytester: pytest.Pytester) -> None:
    """A real run at tolerance 0,0: the float64 second opinion clears Inductor's reordered sums; switched off, the
    same test fails on the first comparison; the record says which TF32 mode the item ran in."""
    pytester.makepyfile(test_sums=REASSOCIATED)
    common = (
        "--inductor-tolerance=0,0",
        "--junitxml=out.xml",
        "-o",
        "junit_family=xunit1",
        *QUIET,
        "--inductor-cpu-probe=0",
    )
    first = runpytest_warm(pytester, *common)
    first.assert_outcomes(passed=1)
    assert junit_properties(pytester.path / "out.xml")["test_sums::test_sum[default]"]["inductor_check_rule"] == (
        "second opinion"
    )
    strict = runpytest_warm(pytester, *common, "--inductor-second-opinion=off", "--inductor-tf32=off")
    strict.assert_outcomes(failed=1)
    properties = junit_properties(pytester.path / "out.xml")["test_sums::test_sum[default]"]
    assert properties["inductor_check_rule"] == "first comparison, second opinion off"
    assert properties["inductor_tf32"] == "off"
