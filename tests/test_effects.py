"""Did the template take effect: evidence per compiled item, the warning, --inductor-require-effect."""

from __future__ import annotations

import collections
import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from graphnet_tree import tensor_meta, write_sample
from inner_runs import run_pytest_warm, runpytest_warm

from conftest import CI_VARIABLES, QUIET, junit_properties, made_once_value
from pytest_inductor_templates.compile.compiled import CompileStats
from pytest_inductor_templates.compile.effects import effects_from, normalized, overall_effect
from pytest_inductor_templates.compile.evidence import CompileEvidence
from pytest_inductor_templates.templates.registry import TemplateRegistry
from pytest_inductor_templates.templates.selection import Selection

USER_TEMPLATES = """
[templates.scalar]
description = "no SIMD in CPU kernels"
settings = { "cpp.simdlen" = 1 }

[templates.descent]
description = "coordinate descent tuning alone: Triton only"
settings = { coordinate_descent_tuning = true }
"""
# A GraphNet-format sample without a GEMM or a convolution: one fused pointwise kernel, cheap to compile cold (a
# built-in like launch_bound compiles a dozen kernels), vectorized under default (so that no SIMD differs).
POINTWISE_MODEL = """
import torch


class GraphModule(torch.nn.Module):
    def forward(self, L_x_: torch.Tensor, L_scale_: torch.nn.parameter.Parameter):
        return (torch.tanh(L_x_ * L_scale_) - L_x_,)
"""
POINTWISE_META = tensor_meta("L_x_", [4, 64]) + tensor_meta("L_scale_", [64], mean=1.0, std=0.1)
POINTWISE = "inductor-samples.corpus/pointwise::{}[{}-cpu]"  # a junit test case, by kind and template
CONV_BN = "inductor-samples.builtin/conv_bn::{}[{}-cpu]"
TEMPLATES = "freezing,cpp_wrapper,aten,max_autotune,scalar,descent"
# What each template needs to show its effect: freezing folds conv_bn's parameters, cpp_wrapper and aten (its
# convolution is no GEMM) on it too; aten, max_autotune and the user's templates on the pointwise sample.
SELECTED = "conv_bn and (eager or freezing or cpp_wrapper or aten) or pointwise and not freezing and not cpp_wrapper"
SAMPLE_RUN = (
    "--benchmark-max-time=0.02", "--benchmark-min-rounds=1", "--junitxml=out.xml", "-o", "junit_family=xunit1",
    *QUIET, "--inductor-devices=cpu", "--inductor-isolation=none",  # evidence, not isolation: no worker to start
    "--inductor-cpu-probe=0", "--inductor-timing-min-seconds=0",  # nor the CPU probe, nor 2 s of paired rounds an item
)  # fmt: skip


def write_pointwise(root: Path) -> None:
    write_sample(root / "corpus" / "pointwise", {"model.py": POINTWISE_MODEL, "weight_meta.py": POINTWISE_META})


@dataclass
class TemplatesRun:
    """The run of every CPU template and the user's on what shows its effect (made once a session)."""

    returncode: int
    output: str
    props: dict[str, dict[str, str]]  # junit properties by test case
    entries: dict[str, dict]  # the benchmark JSON's extra_info by fullname


def _templates_run(root: Path) -> TemplatesRun:
    (root / "templates.toml").write_text(USER_TEMPLATES)
    write_pointwise(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root / "cache"))  # an empty cache: every effect observed
        for name in CI_VARIABLES:
            patch.delenv(name, raising=False)
        result = run_pytest_warm(
            root, "--inductor-samples", "--inductor-samples=corpus", "--inductor-templates-file=templates.toml",
            f"--inductor-template={TEMPLATES}", "-k", SELECTED, "--benchmark-json=run.json", *SAMPLE_RUN,
        )  # fmt: skip
    benchmarks = json.loads((root / "run.json").read_text())["benchmarks"] if (root / "run.json").exists() else []
    entries = {b["fullname"]: b["extra_info"] for b in benchmarks}
    props = junit_properties(root / "out.xml") if (root / "out.xml").exists() else {}
    return TemplatesRun(result.returncode, result.stdout + result.stderr, props, entries)


@pytest.fixture(scope="module")
def templates_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> TemplatesRun:
    return made_once_value(tmp_path_factory, worker_id, "effects-templates", _templates_run)


def test_each_cpu_template_reports_its_effect(templates_run: TemplatesRun) -> None:
    props, output = templates_run.props, templates_run.output
    assert templates_run.returncode == 0, output[-3000:]
    assert re.search(r"^=+ 18 passed, \d+ deselected, ", output, re.M), output[-3000:]  # no effect does not fail
    assert props[CONV_BN.format("check", "freezing")]["inductor_effect"] == "effect"
    assert re.fullmatch(
        r"freezing: \d+ parameter\(s\) frozen into constants",
        props[CONV_BN.format("check", "freezing")]["inductor_effect_evidence"],
    )
    cpp_wrapper = props[CONV_BN.format("check", "cpp_wrapper")]
    assert cpp_wrapper["inductor_effect_evidence"] == "cpp_wrapper: the wrapper is C++"
    for aten in (CONV_BN.format("check", "aten"), POINTWISE.format("check", "aten")):  # a convolution is no GEMM
        assert props[aten]["inductor_effect"] == "no effect"
        assert props[aten]["inductor_effect_evidence"] == "aten: no GEMM in the graph"
    assert props[POINTWISE.format("check", "max_autotune")]["inductor_effect_evidence"] == (
        "max_autotune: nothing to autotune: no GEMM or convolution in the graph"
    )
    assert "inductor_effect" not in props[CONV_BN.format("check", "eager")]
    assert "NoEffectWarning: template 'aten' had no effect: aten: no GEMM in the graph" in output
    pytest.LineMatcher(output.splitlines()).fnmatch_lines(
        [
            "*inductor-templates: check outcomes per template*",
            "aten * 2 * 2 * 0 * 0 * 0 * 0 * 0 * 0 * 0 * 0 * 0 * 100%",  # pass; no_effect 0: nothing failed for it
            "no_effect counts the items failed for having no effect, under --inductor-require-effect; without it, a "
            "template without effect passes and warns (its count is in the effect table below)",
            "*inductor-templates: did each template take effect (a warning: it fails an item only with "
            "--inductor-require-effect)*",
            "template*effect  no effect  not observed",
            "freezing*1          0             0",
            "*no effect*",
            "inductor-samples::corpus/pointwise::check[[]aten-cpu[]]: aten: no GEMM in the graph",
        ]
    )
    info = templates_run.entries["inductor-samples::corpus/pointwise::bench[aten-cpu]"]
    assert info["effect"] == "no effect" and info["effect_evidence"] == "aten: no GEMM in the graph"


def test_require_effect_fails_the_items_without_effect(pytester: pytest.Pytester) -> None:
    """On the session's compile cache (the aten check's compile is the first of this graph under aten: its code is
    Inductor's whether from the cache or not), not fresh: a fresh compile builds its C++ kernel in full."""
    pytester.makeini("[pytest]\ninductor_require_effect = true\n")
    write_pointwise(pytester.path)
    result = runpytest_warm(
        pytester, "--inductor-samples=corpus", "--inductor-template=aten", "--benchmark-skip", *SAMPLE_RUN
    )
    props = junit_properties(pytester.path / "out.xml")
    result.assert_outcomes(passed=1, failed=1, skipped=2)  # eager's check passes; aten's fails; no bench runs
    result.stdout.fnmatch_lines(["*no_effect: template 'aten' had no effect: aten: no GEMM in the graph*"])
    assert props[POINTWISE.format("check", "aten")]["inductor_outcome"] == "no_effect"
    assert props[POINTWISE.format("check", "eager")]["inductor_outcome"] == "pass"


def test_cuda_graphs_on_cpu_are_no_effect_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        "import torch\n\n"
        "def test_block(inductor_check):\n"
        "    inductor_check(torch.nn.Linear(8, 8).eval(), torch.randn(2, 8))\n"
    )
    result = runpytest_warm(
        pytester,
        '--inductor-options={"triton.cudagraphs": true}',
        "--inductor-require-effect",
        "--inductor-cpu-probe=0",
        *QUIET,
        "--inductor-devices=cpu",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*no_effect: template 'options-*' had no effect: cudagraphs: CUDA graphs skipped: graph runs on cpu*"]
    )


def test_user_templates_are_judged_against_default(templates_run: TemplatesRun) -> None:
    scalar = templates_run.props[POINTWISE.format("check", "scalar")]
    descent = templates_run.props[POINTWISE.format("check", "descent")]
    assert scalar["inductor_effect_evidence"] == "settings: the compiled code differs from default's"
    assert descent["inductor_effect_evidence"] == "settings: the compiled code is default's"  # Triton-only on CPU
    assert descent["inductor_effect"] == "no effect"


def _judge(name: str, code: str, capability=(9, 0), device="cuda", **kwargs) -> str:
    selection = Selection(template=TemplateRegistry()[name])
    evidence = CompileEvidence(codes=[code])
    effects = effects_from(selection, CompileStats(graphs=1), evidence, device, capability, **kwargs)
    return f"{overall_effect(effects)} | " + "; ".join(map(str, effects))


TMA_CHOSEN = "triton_tem_fused_mm_persistent_tma_0 ... tl.make_tensor_descriptor("
ATEN_MM = "extern_kernels.mm(buf0, arg1_1, out=buf1)"
NO_CUTLASS = "the CUTLASS Python library (cutlass_library) is not installed"
RULES = [
    ("tma", TMA_CHOSEN, {}, "effect | tma: a persistent TMA GEMM kernel was chosen"),
    (
        "tma",
        "def triton_tem_fused_mm_persistent_1(",
        {},
        "effect | tma: the persistent (non-TMA) GEMM kernel was chosen",
    ),
    ("tma", ATEN_MM, {}, "no effect | tma: autotuning chose another kernel (ATen, or a non-persistent template)"),
    ("tma", ATEN_MM, {"capability": (8, 0)}, "no effect | tma: TMA needs compute capability 9.0, this GPU has 8.0"),
    ("tma", "triton_poi_fused_relu_0", {}, "no effect | tma: no GEMM in the graph"),
    ("cutlass", "cutlass_gemm_kernel_0", {}, "effect | cutlass: a CUTLASS kernel was chosen"),
    ("cutlass", ATEN_MM, {"cutlass_missing": NO_CUTLASS}, f"no effect | cutlass: {NO_CUTLASS}"),
    ("aten", "def triton_tem_fused_mm_0(", {}, "no effect | aten: a GEMM did not go to ATen"),
    ("aten", ATEN_MM, {}, "effect | aten: the GEMMs went to ATen"),
    (
        "max_autotune",
        "def triton_tem_fused_mm_0(",
        {},
        "effect | max_autotune: a Triton template kernel was chosen (autotune results from a cache)",
    ),
    (
        "triton",
        "async_compile.triton('triton_poi_fused_0'",
        {},
        "effect | triton: the wrapper is Python, with Triton kernels",
    ),
]


@pytest.mark.parametrize(("name", "code", "kwargs", "expected"), RULES)
def test_rules_for_what_cannot_be_compiled_here(name: str, code: str, kwargs: dict, expected: str) -> None:
    assert _judge(name, code, **kwargs) == expected


def test_cuda_graph_rule_and_the_not_observed_verdicts() -> None:
    cudagraphs = Selection(template=TemplateRegistry()["cudagraphs"])
    recorded = effects_from(cudagraphs, CompileStats(graphs=2), CompileEvidence(codes=["x"]), "cuda", (9, 0), 2)
    assert str(recorded[0]) == "cudagraphs: 2 CUDA graph(s) recorded, no skip reported for 2 graph(s)"
    skipped = CompileStats(graphs=1, cudagraph_skips=1, cudagraph_skip_reasons=["mutated inputs (1 instances)"])
    assert str(effects_from(cudagraphs, skipped, CompileEvidence(), "cuda", (9, 0))[0]) == (
        "cudagraphs: CUDA graphs skipped: mutated inputs (1 instances)"
    )
    cached = CompileEvidence(codes=["extern_kernels.mm("], cache_lookups=collections.Counter(fxgraph_cache_hit=1))
    max_autotune = Selection(template=TemplateRegistry()["max_autotune"])
    assert overall_effect(effects_from(max_autotune, CompileStats(graphs=1), cached, "cuda", (9, 0))) == "not observed"
    from_autotune_cache = CompileEvidence(codes=["extern_kernels.mm("], choices=12)
    assert str(effects_from(max_autotune, CompileStats(graphs=1), from_autotune_cache, "cuda", (9, 0))[0]) == (
        "max_autotune: autotuning chose among 12 choice(s) timed earlier (cache)"
    )
    default = Selection(template=TemplateRegistry()["default"])
    assert effects_from(default, CompileStats(), CompileEvidence(), "cpu") == []


def test_normalized_code_ignores_paths_hashes_and_comments() -> None:
    one = "# kernel path: /tmp/torchinductor_root/ab/cabcdefghijklmnopqrstuvwx.py\nbuf0 = empty((4,))\n"
    two = "# kernel path: /tmp/torchinductor_me/zz/czyxwvutsrqponmlkjihgfedcb.py\nbuf0 = empty((4,))\n"
    assert normalized(one) == normalized(two) and normalized(one) != normalized(two.replace("4", "5"))


@pytest.mark.parametrize(
    ("counts", "skips", "calls", "expected"),
    [
        ([0, 0, 1], 0, 2, "cudagraphs: 1 CUDA graph(s) recorded, no skip reported for 0 graph(s)"),
        ([0, 0, 0], 0, 2, "cudagraphs: no CUDA graph was recorded, even on repeated calls"),
        ([0], 1, 0, "cudagraphs: CUDA graphs skipped: mutated inputs"),
        ([2], 0, 0, "cudagraphs: 2 CUDA graph(s) recorded, no skip reported for 0 graph(s)"),
    ],
)
def test_cuda_graphs_are_counted_again_after_repeat_calls(
    monkeypatch: pytest.MonkeyPatch, counts: list[int], skips: int, calls: int, expected: str
) -> None:
    """CUDA-graph trees record a shape on its second call: a check that called each shape once saw none yet."""
    import torch

    from pytest_inductor_templates.compile import effects as effect_report
    from pytest_inductor_templates.compile.compiled import CompiledModel
    from pytest_inductor_templates.compile.isolation import CompileWatcher
    from pytest_inductor_templates.machine import Device

    remaining = iter(counts)
    monkeypatch.setattr(effect_report, "recorded_cuda_graphs", lambda index: next(remaining))
    selection = Selection(template=TemplateRegistry()["cudagraphs"])
    model = CompiledModel(torch.nn.Identity(), selection, CompileWatcher())
    model.stats.cudagraph_skips = skips
    model.stats.cudagraph_skip_reasons = ["mutated inputs"] * skips
    repeated: list[int] = []
    gpu = Device("cuda:0", "cuda", "a GPU", (9, 0))
    effects = effect_report.effects_of(model, selection, gpu, None, lambda: repeated.append(1))
    assert (len(repeated), str(effects[0])) == (calls, expected)
