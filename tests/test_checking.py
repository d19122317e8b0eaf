"""The comparison engine on its own: structure, dtype, shape, exact integers, non-finite values, scale-aware
tolerances, levels, the float64 second opinion's bounds, derived second inputs."""

from __future__ import annotations

import copy
from collections import namedtuple
from typing import Any

import pytest
import torch

from pytest_inductor_templates.check.diff import compare_outputs
from pytest_inductor_templates.check.float64 import round_to_tf32
from pytest_inductor_templates.check.second_opinion import Reference
from pytest_inductor_templates.check.tolerances import default_tolerance, graphnet_tolerance
from pytest_inductor_templates.tolerance import Tolerance


def compare(actual, expected, tolerance=None, reference64=None, reference_tf32=None, names=("compiled", "eager")):
    """compare_outputs with the float64 outputs (and TF32-rounded ones) of a single-tensor output given."""
    if reference64 is None:
        return compare_outputs(actual, expected, tolerance, names=names)
    tf32 = {"out": reference_tf32()} if reference_tf32 is not None else None
    return compare_outputs(actual, expected, tolerance, lambda: Reference({"out": reference64()}, tf32), names)


Pair = namedtuple("Pair", ["left", "right"])


def test_equal_outputs_pass_at_the_tightest_level() -> None:
    out = {"x": torch.randn(3, 4), "ids": torch.arange(5), "rest": (torch.zeros(2), "tag")}
    result = compare(copy.deepcopy(out), out)
    assert result.ok and result.level == -10


@pytest.mark.parametrize(
    ("actual", "expected", "message"),
    [
        (
            {"a": torch.ones(2)},
            {"a": torch.ones(2), "b": torch.ones(2)},
            "out: keys missing from the compiled output: ['b']",
        ),
        ({"a": torch.ones(2), "c": 1}, {"a": torch.ones(2)}, "out: keys only in the compiled output: ['c']"),
        ([torch.ones(2)], (torch.ones(2),), "out: compiled gives list, eager tuple"),
        ((torch.ones(2),), (torch.ones(2), torch.ones(2)), "out: compiled has 1 items, eager 2"),
        (Pair(torch.ones(1), 2), Pair(torch.ones(1), 3), "out[1]: compiled 2, eager 3"),
        (
            {"a": torch.ones(2, dtype=torch.float64)},
            {"a": torch.ones(2)},
            "out['a']: dtype compiled torch.float64, eager torch.float32",
        ),
        ({"a": torch.ones(3)}, {"a": torch.ones(2)}, "out['a']: shape compiled (3,), eager (2,)"),
    ],
)
def test_structure_dtype_and_shape_mismatches_say_what_differs(actual, expected, message) -> None:
    result = compare(actual, expected)
    assert not result.ok and result.level is None
    assert result.mismatches[0].message == message


def test_integers_and_bools_compare_exactly() -> None:
    ids = torch.arange(10)
    off_by_one = ids.clone()
    off_by_one[7] += 1
    result = compare(off_by_one, ids, Tolerance(1.0, 1.0))  # a tolerance does not loosen integers
    assert result.mismatches[0].message == (
        "out: int64 [10]: 1 of 10 elements (10.0%) differ (compared exactly); first at index (7,): compiled 8, eager 7"
    )
    assert not compare(torch.tensor([True, False]), torch.tensor([True, True])).ok


def test_value_message_names_leaf_errors_and_the_worst_element() -> None:
    expected = {"logits": [torch.zeros(4, 5), torch.ones(2, 3)]}
    actual = copy.deepcopy(expected)
    actual["logits"][1][1, 2] += 0.25
    actual["logits"][1][0, 0] += 0.01
    message = compare(actual, expected).mismatches[0].message
    assert message == (
        "out['logits'][1]: float32 [2, 3]: 2 of 6 elements (33.3%) differ beyond rtol 1.3e-06, atol 1e-05 "
        "(1e-05 x max|eager| 1); max abs error 0.25, max rel error 0.25; "
        "worst at index (1, 2): compiled 1.25, eager 1.0"
    )


def test_non_finite_values() -> None:
    nan, inf = float("nan"), float("inf")
    assert compare(torch.tensor([1.0, nan, inf, -inf]), torch.tensor([1.0, nan, inf, -inf])).ok
    where_finite = compare(torch.tensor([nan, 1.0]), torch.tensor([2.0, 1.0]))
    assert where_finite.mismatches[0].kind == "nonfinite" and where_finite.level is None
    assert where_finite.mismatches[0].message == (
        "out: float32 [2]: 1 of 2 elements (50.0%) differ: 1 NaN where eager is finite; "
        "first at index (0,): compiled nan, eager 2.0"
    )
    mixed = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    broken = mixed.clone()
    broken[0, 1], broken[1, 0], broken[1, 2], broken[0, 0] = nan, inf, nan, 1.5
    message = compare(broken, mixed).mismatches[0].message
    assert message.startswith(
        "out: float32 [2, 3]: 4 of 6 elements (66.7%) differ: 2 NaN where eager is finite, 1 +Inf where eager is "
        "finite; first at index (0, 1): compiled nan, eager 2.0; 1 beyond rtol 1.3e-06"
    ), message  # counted by kind, with the first position; the finite difference after, its max error finite
    assert "max abs error 0.5" in message
    assert not compare(torch.tensor([1.0]), torch.tensor([inf])).ok
    assert not compare(torch.tensor([-inf]), torch.tensor([inf])).ok


def test_default_tolerance_follows_torch_testing_and_level_minus_five_matches_it() -> None:
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        expected = torch.testing._comparison.default_tolerances(dtype)
        ours = default_tolerance(dtype)
        assert (ours.rtol, ours.atol) == pytest.approx(expected)
        assert graphnet_tolerance(dtype, -5).atol == pytest.approx(ours.atol)
        assert graphnet_tolerance(dtype, -5).rtol == pytest.approx(ours.rtol, rel=0.05)


def test_level_is_the_tightest_passing_one() -> None:
    expected = torch.ones(100)
    assert compare(expected + 3e-5, expected).level == -4
    assert compare(expected + 0.2, expected).level == 0


def test_low_precision_second_opinion() -> None:
    torch.manual_seed(0)
    exact = torch.randn(1000, dtype=torch.float64)
    # eager rounds to bf16 after every step of a deep model: about 1% off float64
    eager = (exact * (1 + 0.01 * torch.randn(1000, dtype=torch.float64))).to(torch.bfloat16)
    correct = exact.to(torch.bfloat16)  # a compiled model that keeps float32 inside and rounds once
    assert not compare(correct, eager).ok  # beyond bf16's default tolerance on its own ...
    verdict = compare(correct, eager, reference64=lambda: exact)
    assert verdict.ok and verdict.rule == "second opinion"  # ... but the fp64 reference clears it, with figures
    assert verdict.second_opinions[0].startswith("out: against float64, compiled vs eager: RMSE ")
    wrong = eager.clone()
    wrong[10] += 1.0  # a real miscompile: one element far off
    assert not compare(wrong, eager, reference64=lambda: exact).ok
    big_exact = torch.randn(1_000_000, dtype=torch.float64)
    big_eager = big_exact.to(torch.bfloat16)
    one_bad = big_eager.clone()
    one_bad[123_456] += 0.5  # too little for the RMSE of a million elements to notice
    assert not compare(one_bad, big_eager, reference64=lambda: big_exact).ok


def test_round_to_tf32_keeps_ten_mantissa_bits() -> None:
    values = torch.tensor([1.0, 1.0 + 2**-10, 1.0 + 2**-12, -3.0 - 2**-9, 0.0], dtype=torch.float64)
    assert round_to_tf32(values).tolist() == [1.0, 1.0 + 2**-10, 1.0, -3.0 - 2**-9, 0.0]
    x = torch.randn(10_000, dtype=torch.float64)
    assert float(((round_to_tf32(x) - x).abs() / x.abs()).max()) <= 2**-11


def test_fp32_under_tf32_is_judged_against_tf32_rounding() -> None:
    torch.manual_seed(0)
    weight, x = torch.randn(256, 256), torch.randn(32, 256)
    eager = x @ weight.T  # full fp32, as eager's kernel happened to run
    exact = x.double() @ weight.double().T
    tf32_exact = round_to_tf32(x.double()) @ round_to_tf32(weight.double()).T
    compiled = round_to_tf32(x.double()).float() @ round_to_tf32(weight.double()).float().T  # a TF32 kernel
    assert not compare(compiled, eager).ok
    assert not compare(compiled, eager, reference64=lambda: exact).ok  # eager's own error is far smaller
    verdict = compare(compiled, eager, reference64=lambda: exact, reference_tf32=lambda: tf32_exact)
    assert verdict.ok and verdict.rule == "second opinion"
    wrong = compiled.clone()
    wrong[3, 7] += 1.0  # a miscompiled element (values are ~16, TF32 noise ~0.005) stays caught
    assert not compare(wrong, eager, reference64=lambda: exact, reference_tf32=lambda: tf32_exact).ok


def test_a_float64_run_is_trusted_as_far_as_tf32_allows_where_tf32_applies() -> None:
    """Under TF32, eager itself is TF32's rounding away from float64: on a small output left by cancelling large
    terms (on the H200, depth-anything-large's depth map, max 5.9e-9, was 0.18% of its max from float64), more
    than float32's trust bound allows. With the TF32 run present the float64 run is trusted, and the second
    opinion judges: a TF32 kernel passes, a wrong element is caught."""
    torch.manual_seed(0)
    x, weight = torch.randn(32, 256), torch.randn(256, 256)
    weight2 = weight + 1e-2 * torch.randn(256, 256)  # out = x W^T - x W2^T: large terms, a small difference
    exact = x.double() @ weight.double().T - x.double() @ weight2.double().T
    tx, tw, tw2 = (round_to_tf32(t.double()) for t in (x, weight, weight2))
    tf32_exact = tx @ tw.T - tx @ tw2.T
    eager = (tx.float() @ tw.float().T) - (tx.float() @ tw2.float().T)  # eager's TF32 kernels
    compiled = tx.float() @ (tw.float() - tw2.float()).T  # the compiler's TF32 kernel, fused differently
    worst = float((eager.double() - exact).abs().max() / eager.abs().max())
    assert 2**-10 < worst < 0.25  # beyond float32's trust bound, within TF32's
    assert not compare(compiled, eager).ok
    untrusted = compare(compiled, eager, reference64=lambda: exact)  # no TF32 run: float32's bound
    assert not untrusted.ok and "float64 run not trusted" in untrusted.mismatches[0].message
    verdict = compare(compiled, eager, reference64=lambda: exact, reference_tf32=lambda: tf32_exact)
    assert verdict.ok and verdict.rule == "second opinion", verdict.mismatches
    wrong = compiled.clone()
    wrong[3, 7] += 0.5  # values are ~0.6 at most, TF32's noise ~0.01
    assert not compare(wrong, eager, reference64=lambda: exact, reference_tf32=lambda: tf32_exact).ok


def test_the_tf32_allowance_applies_only_to_models_that_run_a_gemm_or_convolution_under_its_flag() -> None:
    """cuDNN's TF32 flag is on by default: a model without a convolution must not get its allowance (on the H200
    it let a 0.1% channel error through on an elementwise model). The float64 run names the operators it ran."""
    from pytest_inductor_templates.check.float64 import float64_run, tf32_applies
    from pytest_inductor_templates.check.inputs import Inputs

    def ops_of(model: torch.nn.Module, *args: torch.Tensor) -> set[str]:
        run = float64_run(lambda: model, lambda m, x: m(*x.args), [Inputs(args)])
        assert run.outputs() is not None
        return run.ops

    elementwise = ops_of(torch.nn.Sequential(torch.nn.GELU(), torch.nn.Softmax(-1)), torch.randn(4, 8))
    gemm = ops_of(torch.nn.Linear(8, 8), torch.randn(4, 8))
    conv = ops_of(torch.nn.Conv2d(3, 4, 3), torch.randn(1, 3, 8, 8))
    matmul_flag, cudnn_flag = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = False, True  # PyTorch's defaults
        assert (tf32_applies(elementwise), tf32_applies(gemm), tf32_applies(conv)) == (False, False, True)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = True, False
        assert (tf32_applies(elementwise), tf32_applies(gemm), tf32_applies(conv)) == (False, True, False)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul_flag, cudnn_flag


def test_a_bfloat16_model_returning_float32_is_trusted_as_far_as_bfloat16_allows() -> None:
    """yolov8m-pose in bfloat16 returns float32: eager (bfloat16 inside) is 4 from float64 at 1.6e3, one bfloat16
    rounding, beyond float32's trust bound. The float64 run records that eager computed in bfloat16, and the
    second opinion judges by that: a compiled output nearer float64 than eager passes, a 2% error still fails."""
    from pytest_inductor_templates.check.float64 import float64_run, narrowest
    from pytest_inductor_templates.check.inputs import Inputs

    torch.manual_seed(0)
    exact = torch.rand(8, 512, dtype=torch.float64) * 1600
    eager = exact.to(torch.bfloat16).float()  # computed in bfloat16, returned as float32
    compiled = exact.float()  # nearer float64 than eager
    without = compare_outputs(compiled, eager, None, lambda: Reference({"out": exact}))
    assert not without.ok and "float64 run not trusted" in without.mismatches[0].message
    verdict = compare_outputs(compiled, eager, None, lambda: Reference({"out": exact}, precision=torch.bfloat16))
    assert verdict.ok and verdict.rule == "second opinion"
    wrong = compiled.clone()
    wrong[3] *= 1.02
    assert not compare_outputs(wrong, eager, None, lambda: Reference({"out": exact}, precision=torch.bfloat16)).ok
    model = torch.nn.Linear(8, 8).to(torch.bfloat16)
    run = float64_run(lambda: model, lambda m, x: m(*x.args).float(), [Inputs((torch.randn(2, 8).bfloat16(),))])
    assert run.outputs() is not None and run.dtypes == {torch.bfloat16}
    assert narrowest({torch.float32, torch.bfloat16, torch.float16}) == torch.bfloat16


def test_a_stale_second_call_is_judged_against_the_exact_answer_at_the_precision_eager_computed_in() -> None:
    """A bfloat16 model returning float32 (yolov8m-pose): where the exact answer moves by less than a bfloat16
    step between the input sets, eager's outputs still move (rounding flips), and a compiled model that returns
    the same values twice is not stale; where the exact answer moves by more, it is."""
    from pytest_inductor_templates.check.float64 import Float64Run
    from pytest_inductor_templates.check.runner import Observed, judge

    torch.manual_seed(0)
    first = torch.rand(4, 256, dtype=torch.float64) * 600 + 1100

    def verdict(change: float, stale: bool) -> Any:
        second = first.clone()
        second[:, :8] += change
        eager = [first.to(torch.bfloat16).float(), second.to(torch.bfloat16).float()]
        float64 = Float64Run.of([first, second])
        float64.dtypes.add(torch.bfloat16)
        compiled = [first.to(torch.bfloat16).float(), (first if stale else second).to(torch.bfloat16).float()]
        return judge(Observed(eager, compiled, compiled[0], float64))

    assert verdict(6.0, stale=False).outcome.value == "pass"  # beneath one bfloat16 step (8 here)
    assert verdict(6.0, stale=True).outcome.value == "pass", verdict(6.0, stale=True).reason
    assert verdict(60.0, stale=False).outcome.value == "pass"
    caught = verdict(60.0, stale=True)
    assert caught.outcome.value == "accuracy_fail" and "returned call 1's values again" in caught.reason, caught


def test_messages_name_both_sides_and_say_when_a_relative_error_is_undefined() -> None:
    zeros = torch.zeros(4)
    off = zeros.clone()
    off[2] = 0.5
    assert compare(off, zeros).mismatches[0].message == (
        "out: float32 [4]: 1 of 4 elements (25.0%) differ beyond rtol 1.3e-06, atol 1.18e-38 (1e-05 x max|eager| 0); "
        "max abs error 0.5, max rel error undefined (eager is 0 where they differ); "
        "worst at index (2,): compiled 0.5, eager 0.0"
    )
    runs = ("eager run 2", "eager run 1")  # how the check names eager compared with itself
    assert compare(off, zeros, names=runs).mismatches[0].message.endswith("eager run 2 0.5, eager run 1 0.0")
    assert compare({"a": zeros}, {"a": zeros, "b": zeros}, names=runs).mismatches[0].message == (
        "out: keys missing from the eager run 2 output: ['b']"
    )


def test_the_default_tolerance_scales_with_each_output_and_an_explicit_one_does_not() -> None:
    torch.manual_seed(0)
    tiny = torch.randn(8, 16) * 1e-13  # an output of magnitude 1e-13
    channel = tiny.clone()
    channel[:, 3] *= 1.001  # one channel 0.1% off
    assert not compare(channel, tiny).ok  # seen: atol is 1e-5 of the output's own largest value
    assert compare(channel, tiny, Tolerance(1.3e-6, 1e-5)).ok  # an absolute atol of 1e-5 sees nothing at 1e-13
    large = torch.randn(8, 16) * 1e4
    wobble = large + torch.randn(8, 16) * 1e-3  # a reassociation's wobble on outputs of 1e4
    assert compare(wobble, large).ok and compare(wobble, large).rule == "first comparison"
    assert not compare(wobble, large, Tolerance(1.3e-6, 1e-5)).ok
    zeros = torch.zeros(4)
    assert compare(zeros + 1e-39, zeros).ok  # below float32's smallest normal number: no precision to judge
    assert not compare(zeros + 1e-30, zeros).ok


def test_rows_all_added_up_less_accurately_pass_and_one_outlier_row_fails() -> None:
    """Each row's error one shared rounding of its sum (a row sum broadcast along the row), 2.5x eager's
    everywhere, as Inductor's 8-lane AVX2 sums against ATen's cascade sums: by chance some row is beyond 3x eager's
    typical row, yet compiled's median row is as far beyond eager's, so it passes; one row 10x off fails."""
    torch.manual_seed(3)
    exact = torch.randn(64, 256, dtype=torch.float64) * 100
    eager = (exact + 1e-3 * torch.randn(64, 1, dtype=torch.float64)).float()
    sloppier = exact + 2.5e-3 * torch.randn(64, 1, dtype=torch.float64)
    per_row = (sloppier - exact).abs()[:, 0] / (eager.double() - exact).abs()[:, 0].quantile(0.9)
    assert float(per_row.max()) > 3  # the old bound (3x eager's 90th-percentile row) failed it
    verdict = compare(sloppier.float(), eager, Tolerance(0.0, 0.0), reference64=lambda: exact)
    assert verdict.ok and verdict.rule == "second opinion", verdict.mismatches
    outlier = sloppier.clone()
    outlier[17] += 0.01
    failed = compare(outlier.float(), eager, Tolerance(0.0, 0.0), reference64=lambda: exact)
    assert not failed.ok and failed.rule == "second opinion: worst element", failed.rule


@pytest.mark.parametrize(
    ("shape", "faulty", "noisier", "off"),
    [((64, 256), [63], 1.0, 0.02), ((8, 2048), [5], 1.0, 0.02), ((8, 64, 64), [2], 1.0, 0.02),
     ((64, 256), list(range(7)), 1.0, 0.02), ((64, 256), [63], 1.5, 0.03)],
    ids=["one row of 64", "one row of 8", "one batch entry of 8", "7 rows of 64", "one row 3% off, 1.5x noisier"],
)  # fmt: skip
def test_a_bf16_slice_off_fails_the_slice_rule(
    shape: tuple[int, ...], faulty: list[int], noisier: float, off: float
) -> None:
    """A bf16 output whose RMSE and worst element stay within eager's, with some slices 2% off: the slice rule
    fails it, on a dimension of few slices and with a tenth of the slices off; and where compiled is 1.5x as
    noisy as eager everywhere (which passes: its median slice is that much farther from float64), a row 3% off."""
    torch.manual_seed(0)
    exact = torch.randn(*shape, dtype=torch.float64)
    eager = (exact * (1 + 0.004 * torch.randn(*shape, dtype=torch.float64))).to(torch.bfloat16)  # ~1 ulp off
    compiled = exact * (1 + 0.004 * noisier * torch.randn(*shape, dtype=torch.float64))
    assert compare(compiled.to(torch.bfloat16), eager, reference64=lambda: exact).ok
    compiled[faulty] *= 1 + off
    verdict = compare(compiled.to(torch.bfloat16), eager, reference64=lambda: exact)
    assert verdict.rule == "second opinion: slice", verdict.rule
    assert f"at dim 0 index {faulty[-1]}" in verdict.mismatches[0].message or len(faulty) > 1


def test_second_opinion_bounds_each_slice_and_trusts_only_a_close_float64_run() -> None:
    torch.manual_seed(0)
    exact = torch.randn(64, 256, dtype=torch.float64)
    eager = (exact * (1 + 0.004 * torch.randn(64, 256, dtype=torch.float64))).to(torch.bfloat16)  # ~1 ulp off
    row = exact.clone()
    row[-1] *= 1.02  # one row 2% off, the rest exact: the RMSE and the worst element stay within eager's
    verdict = compare(row.to(torch.bfloat16), eager, reference64=lambda: exact)
    assert verdict.rule == "second opinion: slice" and "at dim 0 index 63" in verdict.mismatches[0].message
    other_program = exact.clone()
    other_program[:, :8] = 5.0  # the float64 run computed something else there (a mask compared with ==)
    distrusted = compare(row.to(torch.bfloat16), eager, reference64=lambda: other_program)
    assert distrusted.rule == "first comparison"
    assert "float64 run not trusted: eager is " in distrusted.mismatches[0].message


def test_a_float64_run_that_differs_only_below_the_smallest_normal_is_trusted() -> None:
    """apple_mobilevit-x-small's output is about 1e-80 in float64 and 0 in float32: the float64 run is the same
    program with more range, not another program."""
    from pytest_inductor_templates.check.second_opinion import untrusted

    zeros = torch.zeros(4, 8)
    assert untrusted(zeros, torch.full((4, 8), 4.7e-80, dtype=torch.float64)) is None
    assert untrusted(zeros, torch.full((4, 8), 1e-30, dtype=torch.float64)) is not None  # float32 holds 1e-30


def test_a_float64_run_is_no_reference_where_it_overflows_and_eager_does_not() -> None:
    """Eager NaN where float64 is finite (bfloat16 overflowed) leaves float64 a reference for the rest; float64
    non-finite where eager is finite leaves it none."""
    from pytest_inductor_templates.check.second_opinion import untrusted

    eager = torch.ones(4, 8)
    eager[0] = float("nan")
    assert untrusted(eager, torch.ones(4, 8, dtype=torch.float64)) is None
    wide = torch.ones(4, 8, dtype=torch.float64)
    wide[1, :3] = float("inf")
    assert untrusted(eager, wide) == "float64 run not trusted: it is not finite in 3 places where eager is"


def test_a_tf32_run_that_overflows_allows_eager_nothing_there() -> None:
    from pytest_inductor_templates.check.second_opinion import eager_error

    eager, wide = torch.ones(4), torch.ones(4, dtype=torch.float64)
    eager[0] = 1.5
    tf32 = torch.full((4,), 1.25, dtype=torch.float64)
    tf32[1], tf32[2] = float("inf"), float("nan")
    assert eager_error(eager, wide, tf32).tolist() == [0.5, 0.0, 0.0, 0.25]


def test_the_second_opinion_never_clears_nan_where_eager_has_a_value() -> None:
    from pytest_inductor_templates.check.second_opinion import Reference, opinion_on

    eager, wide = torch.ones(4, 8), torch.ones(4, 8, dtype=torch.float64)
    eager[0] = float("nan")
    compiled = torch.ones(4, 8)
    opinion = opinion_on("out", compiled, eager, Reference({"out": wide}))
    assert not opinion.cleared and opinion.rule == "nonfinite"
    compiled[0] = float("nan")
    assert opinion_on("out", compiled, eager, Reference({"out": wide})).cleared


def test_a_derived_second_input_varies_every_tensor_unless_eager_rejects_it() -> None:
    from pytest_inductor_templates.check.inputs import Inputs, later_inputs
    from pytest_inductor_templates.check.runner import CheckSubject, observe

    ids, mask = torch.tensor([[3, 1, 4, 1, 5]]), torch.tensor([[True, True, False, True, True]])
    every, floats_only = later_inputs(Inputs((ids,), {"mask": mask, "scale": torch.tensor(2.0)}))
    assert every.args[0].tolist() == [[5, 3, 1, 4, 1]] and every.kwargs["mask"].tolist() == [[True] * 3 + [False, True]]
    assert floats_only.args[0] is ids and every.kwargs["scale"].item() == 2.0  # one element: nothing to roll

    def sorted_lengths(lengths: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if lengths.tolist() != sorted(lengths.tolist(), reverse=True):
            raise ValueError("lengths must be sorted")
        return x * lengths.sum()

    first = Inputs((torch.tensor([3, 2, 1]), torch.arange(4.0)))
    observed = observe(CheckSubject(lambda: sorted_lengths, sorted_lengths, [first]))
    assert [x.tolist() for x in observed.expected] == [[0.0, 6.0, 12.0, 18.0], [18.0, 0.0, 6.0, 12.0]]


def test_a_value_mismatch_the_second_opinion_failed_keeps_its_float64_figures() -> None:
    """The figures go with the verdict (``CheckResult.float64_rmse``), so a diagnosis judges drift or miscompile
    from the failing check itself instead of compiling the model again."""
    from pytest_inductor_templates.diagnose.localise import rmse
    from pytest_inductor_templates.diagnose.numerics import at_failing_outputs

    torch.manual_seed(0)
    exact = torch.randn(64, 64, dtype=torch.float64)
    eager = exact.float()
    wrong = eager * 1.001  # a planted 0.1% error: far beyond eager's rounding
    verdict = compare(wrong, eager, reference64=lambda: exact)
    assert verdict.rule == "second opinion: RMSE"
    assert verdict.mismatches[0].float64_rmse == pytest.approx((rmse(wrong, exact), rmse(eager, exact)))
    unjudged = compare(wrong, eager)  # no float64 run: no figures
    assert unjudged.mismatches[0].float64_rmse is None
    rounded = exact * (1 + 1e-4 * torch.randn(64, 64, dtype=torch.float64))  # TF32 rounding's run: 1e-4 off
    under_tf32 = compare(eager * 1.01, eager, reference64=lambda: exact, reference_tf32=lambda: rounded)
    assert not under_tf32.ok and rmse(rounded, exact) > 100 * rmse(eager, exact)  # the allowance is TF32's
    assert under_tf32.mismatches[0].float64_rmse == pytest.approx((rmse(eager * 1.01, exact), rmse(eager, exact)))
    worst = at_failing_outputs({"call 1 of 2: out[0]": (2e-6, 1e-6), "call 1 of 2: out[1]": (1e-4, 1e-7)})
    assert worst.describe() == (
        "RMSE against float64 at the outputs (call 1 of 2: out[1]): compiled 0.0001, eager 1e-07 (1e+03x)"
    )
