"""--inductor-sample-weights: a GraphNet sample's weights bound as the module's parameters and buffers (the default)
or passed as forward inputs (GraphNet's own convention); what freezing makes of each; compare and report."""

from __future__ import annotations

import json
import pickle
import re
import sys
from pathlib import Path

import pytest
import torch
from graphnet_tree import write_sample
from inner_runs import runpytest_warm

from conftest import QUIET, cli, junit_properties, usage_error_line
from pytest_inductor_templates.record import ItemRecord, Outcome
from pytest_inductor_templates.runs.files import Run, write_records
from pytest_inductor_templates.runs.markdown import as_markdown
from pytest_inductor_templates.samples.cast import CastSample
from pytest_inductor_templates.samples.graphnet import GraphNetSample, load_graph_module, module_name
from pytest_inductor_templates.samples.sources import weights_line

CPU = (*QUIET, "--inductor-devices=cpu")

# A captured graph as Dynamo writes one (weights copied into locals, released with ``= None``), with a graph break
# in the middle (a dynamic-shape operator, as in GraphNet's GAT) and a batch norm's momentum, a Python number GraphNet
# lifted to a 0-dim float64 tensor, read back with .item(). Its weights, by Dynamo's names: two parameters, a float32
# buffer, an int64 buffer and the momentum (bound as the module's number; passed as an input, a second break).
BREAK_MODEL = """
import torch


class GraphModule(torch.nn.Module):
    def forward(self, L_x_: torch.Tensor, L_self_modules_fc_parameters_weight_: torch.nn.parameter.Parameter,
                L_self_modules_fc_parameters_bias_: torch.nn.parameter.Parameter,
                L_self_modules_bn_buffers_running_mean_: torch.Tensor, L_self_modules_bn_momentum: torch.Tensor,
                L_self_modules_bn_buffers_num_batches_tracked_: torch.Tensor):
        l_x_ = L_x_
        l_self_modules_fc_parameters_weight_ = L_self_modules_fc_parameters_weight_
        l_self_modules_fc_parameters_bias_ = L_self_modules_fc_parameters_bias_
        l_self_modules_bn_buffers_running_mean_ = L_self_modules_bn_buffers_running_mean_
        l_self_modules_bn_momentum = L_self_modules_bn_momentum
        first = torch._C._nn.linear(l_x_, l_self_modules_fc_parameters_weight_, l_self_modules_fc_parameters_bias_)
        l_x_ = None
        momentum = l_self_modules_bn_momentum.item()
        l_self_modules_bn_momentum = None
        scaled = first.relu() * momentum
        positive = torch.nonzero(first > 0)
        second = torch._C._nn.linear(scaled, l_self_modules_fc_parameters_weight_, l_self_modules_fc_parameters_bias_)
        scaled = None
        first = l_self_modules_fc_parameters_weight_ = l_self_modules_fc_parameters_bias_ = None
        shifted = second - l_self_modules_bn_buffers_running_mean_ + L_self_modules_bn_buffers_num_batches_tracked_
        second = l_self_modules_bn_buffers_running_mean_ = None
        return (shifted, positive)
"""


def _meta(name: str, shape: list[int], dtype: str, extra: str) -> str:
    return (
        f"class Program_weight_tensor_meta_{name}:\n    name = {name!r}\n    shape = {shape}\n"
        f"    dtype = {dtype!r}\n    device = 'cuda:0'\n{extra}\n"
    )


BREAK_META = "\n".join(
    [
        _meta("L_x_", [4, 8], "torch.float32", "    mean = 0.0\n    std = 1.0\n    data = None"),
        _meta("L_self_modules_fc_parameters_weight_", [8, 8], "torch.float32", "    mean = 0.0\n    std = 1.0"),
        _meta("L_self_modules_fc_parameters_bias_", [8], "torch.float32", "    mean = 0.1\n    std = 0.5"),
        _meta("L_self_modules_bn_buffers_running_mean_", [8], "torch.float32", "    mean = 0.2\n    std = 0.5"),
        _meta("L_self_modules_bn_momentum", [], "torch.float64", "    data = [0.1]"),
        _meta("L_self_modules_bn_buffers_num_batches_tracked_", [], "torch.int64", "    data = [3]"),
    ]
)
PARAMETERS = ["L_self_modules_fc_parameters_weight_", "L_self_modules_fc_parameters_bias_"]
BUFFERS = ["L_self_modules_bn_buffers_running_mean_", "L_self_modules_bn_buffers_num_batches_tracked_"]
SCALAR = "L_self_modules_bn_momentum"  # read only with .item(): the module's Python number


@pytest.fixture
def break_sample(tmp_path: Path) -> Path:
    return write_sample(tmp_path / "corpus" / "bn", {"model.py": BREAK_MODEL, "weight_meta.py": BREAK_META}).parent


def test_parameters_and_buffers_follow_dynamos_names(break_sample: Path) -> None:
    """``_parameters_`` become parameters (frozen: no grad); every other weight a buffer (the 0-dim int64 count
    too, read as a tensor), but the momentum read only with .item(), which is the module's Python number; the real
    input stays a forward argument."""
    sample = GraphNetSample(break_sample, "bn")
    model = sample.make_model("cpu")
    assert [name for name, _ in model.named_parameters()] == PARAMETERS
    assert not any(p.requires_grad for p in model.parameters())
    buffers = dict(model.named_buffers())
    assert list(buffers) == BUFFERS
    assert buffers["L_self_modules_bn_buffers_num_batches_tracked_"].dim() == 0
    assert type(getattr(model, SCALAR)) is float and getattr(model, SCALAR) == pytest.approx(0.1)
    first, second = sample.make_inputs("cpu")
    assert list(first.kwargs) == list(second.kwargs) == ["L_x_"]
    assert model(**first.kwargs)[0].shape == (4, 8)


def test_both_modes_compute_the_same_from_the_same_tensors(break_sample: Path) -> None:
    """The weights and inputs get the same values in both modes: only how the weights reach the graph differs."""
    bound, passed = GraphNetSample(break_sample, "bn"), GraphNetSample(break_sample, "bn", weights="inputs")
    assert bound.id == passed.id  # runs of both modes match by id
    model, inputs = bound.make_model("cpu"), bound.make_inputs("cpu")
    graph, arguments = passed.make_model("cpu"), passed.make_inputs("cpu")
    assert not list(graph.parameters()) and not list(graph.buffers())
    scalar = torch.tensor(getattr(model, SCALAR), dtype=torch.float64)  # the number, as the input carries it
    state = {**dict(model.named_parameters()), **dict(model.named_buffers()), SCALAR: scalar}
    for bound_set, passed_set in zip(inputs, arguments, strict=True):
        assert set(passed_set.kwargs) == set(state) | set(bound_set.kwargs)
        for name, tensor in passed_set.kwargs.items():
            assert torch.equal(tensor, state[name] if name in state else bound_set.kwargs[name]), name
        assert torch.equal(model(**bound_set.kwargs)[0], graph(**passed_set.kwargs)[0])
    fresh = bound.make_model("cpu")  # a fresh model: new tensors, the same values
    for name, tensor in fresh.named_parameters():
        assert tensor is not state[name] and torch.equal(tensor, state[name])


@pytest.mark.parametrize("mode", ["parameters", "inputs"])
def test_model_and_inputs_in_one_pass_are_make_model_and_make_inputs(
    break_sample: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A diagnosis's one draw: the model and both input sets from one pass over the seeded draws (each tensor's
    draws made once, not once for the model and again for the inputs), with the values, names and kinds that
    ``make_model`` and ``make_inputs`` give."""
    from pytest_inductor_templates.samples import graphnet

    sample = GraphNetSample(break_sample, "bn", weights=mode)
    model, inputs = sample.make_model("cpu"), sample.make_inputs("cpu")
    passes: list[str] = []
    for name in ("rebuild", "skip_draws"):
        real = getattr(graphnet, name)
        monkeypatch.setattr(
            graphnet, name, lambda meta, generator, real=real: passes.append(meta.name) or real(meta, generator)
        )
    both, sets = sample.make_model_and_inputs("cpu")
    once = [meta.name for meta in sample.metas]  # as make_model then make_inputs would give every weight twice
    assert sorted(passes) == sorted([*once, "L_x_"]), passes  # and the second set redraws the input alone
    assert dict(both.named_parameters()).keys() == dict(model.named_parameters()).keys()
    assert dict(both.named_buffers()).keys() == dict(model.named_buffers()).keys()
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        assert torch.equal(tensor, dict([*both.named_parameters(), *both.named_buffers()])[name]), name
    if mode == "parameters":
        assert getattr(both, SCALAR) == getattr(model, SCALAR)
    for one, other in zip(inputs, sets, strict=True):
        assert one.kwargs.keys() == other.kwargs.keys()
        assert all(torch.equal(one.kwargs[k], other.kwargs[k]) for k in one.kwargs)
    passes.clear()  # a cast sample (--inductor-sample-dtype) draws in one pass too, then casts
    cast_model, cast_sets = CastSample(sample, "bfloat16").make_model_and_inputs("cpu")
    assert sorted(passes) == sorted([*once, "L_x_"]), passes
    assert cast_sets[0].kwargs["L_x_"].dtype == torch.bfloat16
    assert torch.equal(cast_sets[0].kwargs["L_x_"], inputs[0].kwargs["L_x_"].to(torch.bfloat16))
    if mode == "parameters":
        assert cast_model.L_self_modules_fc_parameters_weight_.dtype == torch.bfloat16


def test_a_triple_is_built_from_one_pass_over_the_draws(break_sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An item's build (and each timing repeat's) draws the model and its inputs in one pass: every tensor's draws
    once, not once for the inputs and again for the model; its fresh eager models are copies of the model as built,
    with the same values, not drawn again."""
    from pytest_inductor_templates.engine.triples import SampleCase, TripleCache
    from pytest_inductor_templates.machine import CPU
    from pytest_inductor_templates.samples import graphnet
    from pytest_inductor_templates.templates.matrix import Case
    from pytest_inductor_templates.templates.registry import BUILTIN_TEMPLATES
    from pytest_inductor_templates.templates.selection import Selection

    sample = GraphNetSample(break_sample, "bn")
    passes: list[str] = []
    for name in ("rebuild", "skip_draws"):
        real = getattr(graphnet, name)
        monkeypatch.setattr(
            graphnet, name, lambda meta, generator, real=real: passes.append(meta.name) or real(meta, generator)
        )
    default = next(t for t in BUILTIN_TEMPLATES if t.name == "default")
    cache = TripleCache()
    try:
        triple = cache.get(SampleCase(sample, Case(Selection(template=default), CPU), "check"))
        assert triple.problem is None and len(triple.inputs) == 2
        once = sorted([*(meta.name for meta in sample.metas), "L_x_"])
        assert sorted(passes) == once, passes
        eager = [triple.fresh_eager() for _ in range(3)]  # the check's reference, eager's second run, the timing's
        assert sorted(passes) == once, passes  # copies of the model as built: no weight drawn again
        drawn = sample.make_model("cpu")
        for model in eager:
            for name, tensor in [*drawn.named_parameters(), *drawn.named_buffers()]:
                assert torch.equal(tensor, dict([*model.named_parameters(), *model.named_buffers()])[name]), name
    finally:
        cache.release()


def test_the_mode_survives_pickling_and_the_cast_wrapper(break_sample: Path) -> None:
    for mode in ("parameters", "inputs"):
        sample = pickle.loads(pickle.dumps(GraphNetSample(break_sample, "bn", weights=mode)))
        assert sample.weights_mode == mode and sample.id == "corpus/bn"
        assert CastSample(sample, "bfloat16").weights_mode == mode
    with pytest.raises(ValueError, match="weights must be one of parameters, inputs"):
        GraphNetSample(break_sample, "bn", weights="params")


def test_module_names_are_unique_to_path_and_device(break_sample: Path, tmp_path: Path) -> None:
    """The loaded model.py is in sys.modules (Dynamo looks it up by name) under a name of its own for each file and
    device: a sample's CPU and CUDA copies are different modules (their device strings differ)."""
    path = break_sample / "bn" / "model.py"
    cpu, cuda = load_graph_module(path, "cpu"), load_graph_module(path, "cuda:0")
    assert cpu.__module__ != cuda.__module__
    assert sys.modules[cpu.__module__].GraphModule is cpu and sys.modules[cuda.__module__].GraphModule is cuda
    assert module_name(path, "cpu") == cpu.__module__ != module_name(path, "cuda:1")
    other = write_sample(tmp_path / "elsewhere" / "bn", {"model.py": BREAK_MODEL, "weight_meta.py": BREAK_META})
    assert module_name(other / "model.py", "cpu") != module_name(path, "cpu")
    assert load_graph_module(path, "cpu") is cpu  # loaded once while the file is unchanged
    model = GraphNetSample(break_sample, "bn").make_model("cpu")
    assert sys.modules[type(model).__module__].GraphModule is type(model)


def test_a_weight_the_module_already_has_an_attribute_for_is_a_sample_error(tmp_path: Path) -> None:
    from pytest_inductor_templates.samples.base import SampleError

    model = BREAK_MODEL.replace(
        "class GraphModule(torch.nn.Module):\n",
        "class GraphModule(torch.nn.Module):\n    L_self_modules_bn_momentum = 0.1\n",
    )
    files = {"model.py": model, "weight_meta.py": BREAK_META}
    sample = GraphNetSample(write_sample(tmp_path / "c" / "s", files).parent, "s")
    with pytest.raises(SampleError, match="cannot bind weight L_self_modules_bn_momentum to the module: GraphModule"):
        sample.make_model("cpu")
    GraphNetSample(sample.root, "s", weights="inputs").make_model("cpu")  # passed as inputs, nothing is bound


def _frozen_per_graph(model: torch.nn.Module, inputs: dict) -> list[int]:
    """How many weights freezing folded into constants, per graph Inductor compiled (fresh caches)."""
    from torch._inductor.utils import fresh_cache

    from pytest_inductor_templates.compile.evidence import CompileEvidence, gather
    from pytest_inductor_templates.compile.isolation import isolated_compile_state

    evidence = CompileEvidence()
    with isolated_compile_state(), fresh_cache(), torch.no_grad(), torch._inductor.config.patch(freezing=True):
        with gather(evidence):
            torch.compile(model)(**inputs)
    return [len(set(re.findall(r"_frozen_param\d+", code))) for code in evidence.codes]


# Inductor's CPU lowering imports torch.utils.mkldnn, whose ScriptModules warn on torch 2.13
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
def test_the_weights_stay_the_modules_on_both_sides_of_a_graph_break(break_sample: Path) -> None:
    """The graph breaks at the dynamic-shape operator: the weights reach the code Dynamo resumes after it as
    locals, and are still the module's parameters and buffers there (Dynamo marks them static), so freezing folds
    them in both graphs; the momentum, the module's number, breaks nothing. Passed as inputs, freezing folds nothing,
    and the momentum's .item() is a third graph."""
    sample = GraphNetSample(break_sample, "bn")
    frozen = _frozen_per_graph(sample.make_model("cpu"), sample.make_inputs("cpu")[0].kwargs)
    assert len(frozen) == 2 and all(frozen), frozen
    passed = GraphNetSample(break_sample, "bn", weights="inputs")
    frozen_inputs = _frozen_per_graph(passed.make_model("cpu"), passed.make_inputs("cpu")[0].kwargs)
    assert len(frozen_inputs) == 3 and sum(frozen_inputs) == 0, frozen_inputs


def test_a_weight_read_as_a_tensor_besides_its_item_stays_a_tensor() -> None:
    """Only a weight the graph reads with ``.item()`` alone is a number: one also read as a tensor (or copied on to
    another name) stays one."""
    import ast

    from pytest_inductor_templates.samples.graphnet_scalars import item_only

    source = (
        "def forward(self, L_x_, L_a, L_b, L_c, L_d):\n"
        "    l_a = L_a\n    a = l_a.item()\n    l_a = None\n"  # Dynamo's copy, read, release: a number
        "    b = L_b.item() + L_b.sum()\n"  # read as a tensor too
        "    l_c = L_c\n    other = l_c\n    c = other.item()\n"  # copied on: not followed
        "    d = L_d.item()\n"  # read directly: a number
        "    return L_x_ * (a + b + c + d)\n"
    )
    forward = ast.parse(source).body[0]
    assert isinstance(forward, ast.FunctionDef)
    assert item_only(forward, frozenset({"L_a", "L_b", "L_c", "L_d"})) == {"L_a", "L_d"}
    stored = {  # a weight or its local assigned anything but its copy and None: a tensor
        "unpacked": "a, = L_w\n    return L_w.item() + a",
        "chained": "l_w = m = L_w\n    return l_w.item() + m * 2",
        "kept elsewhere": "self.kept = L_w\n    return L_w.item()",
        "local reused": "l_w = L_w\n    a = l_w.item()\n    l_w = L_x\n    return a + l_w.item()",
        "updated in place": "L_w += 1\n    return L_w.item()",
    }
    for case, body in stored.items():
        forward = ast.parse(f"def forward(self, L_w, L_x):\n    {body}\n").body[0]
        assert isinstance(forward, ast.FunctionDef)
        assert item_only(forward, frozenset({"L_w", "L_x"})) == set(), case


@pytest.mark.parametrize("mode", ["parameters", "inputs"])
def test_freezing_folds_the_weights_bound_as_parameters_only(pytester: pytest.Pytester, mode: str) -> None:
    """A real run under freezing: both modes build and pass the check; the effect evidence says what was folded,
    and with the weights as inputs it names the cause."""
    write_sample(pytester.path / "corpus" / "tiny")
    result = runpytest_warm(
        pytester, "--inductor-samples=corpus", "--inductor-template=freezing", "--benchmark-disable",
        "--inductor-isolation=none", "--junitxml=out.xml", "-o", "junit_family=xunit1",
        f"--inductor-sample-weights={mode}", *CPU,
    )  # fmt: skip
    result.assert_outcomes(passed=4)  # (eager, freezing) x (check, bench)
    result.stdout.fnmatch_lines([f"inductor-templates: GraphNet sample weights: {mode} (*"])
    properties = junit_properties(pytester.path / "out.xml")
    assert {p["inductor_sample_weights"] for p in properties.values()} == {mode}  # every item's record says it
    check = properties["inductor-samples.corpus/tiny::check[freezing-cpu]"]
    if mode == "parameters":
        assert check["inductor_effect"] == "effect"
        assert re.fullmatch(
            r"freezing: [1-9]\d* parameter\(s\) frozen into constants", check["inductor_effect_evidence"]
        )
    else:
        assert check["inductor_effect"] == "no effect"
        assert check["inductor_effect_evidence"] == (
            "freezing: no parameter was frozen into a constant (the sample's 2 weights are forward inputs, "
            "--inductor-sample-weights=inputs: freezing folds a module's parameters and buffers, not inputs)"
        )


@pytest.mark.parametrize("where", ["command line", "ini"])
def test_a_bad_mode_is_one_line_and_exit_4(sentinel_test: pytest.Pytester, where: str) -> None:
    if where == "ini":
        sentinel_test.makeini("[pytest]\ninductor_sample_weights = params\n")
        line = usage_error_line(sentinel_test.runpytest_inprocess())
        assert line == "ERROR: inductor_sample_weights (tox.ini): expected one of parameters, inputs, got 'params'"
    else:
        line = usage_error_line(sentinel_test.runpytest_inprocess("--inductor-sample-weights=params"))
        assert line == (
            "ERROR: --inductor-sample-weights (command line): expected one of parameters, inputs, got 'params'"
        )


def test_the_header_line_names_the_mode(break_sample: Path) -> None:
    from pytest_inductor_templates.samples.builtin import BUILTIN_SAMPLES

    assert weights_line(list(BUILTIN_SAMPLES)) is None
    line = weights_line([*BUILTIN_SAMPLES, GraphNetSample(break_sample, "bn")])
    assert line is not None and line.startswith("GraphNet sample weights: parameters (")
    passed = weights_line([CastSample(GraphNetSample(break_sample, "bn", weights="inputs"), "bfloat16")])
    assert passed is not None and passed.startswith("GraphNet sample weights: inputs (")


# compare and report, on saved runs whose records say how the weights were passed


def _records(sample: str, speedup: float, weights: str | None) -> list[ItemRecord]:
    check = ItemRecord(sample, "default", "cpu", "check", outcome=Outcome.PASS, sample_weights=weights)
    bench = ItemRecord(sample, "default", "cpu", "bench", outcome=Outcome.PASS, sample_weights=weights)
    bench.speedup, bench.speedup_low, bench.speedup_high = speedup, speedup * 0.99, speedup * 1.01
    bench.median = bench.compiled_median = 1e-3 / speedup
    bench.eager_median = 1e-3
    return [check, bench]


def _run(path: Path, *records: list[ItemRecord]) -> Path:
    data: dict = {"machine_info": {"torch": "2.13"}, "benchmarks": []}
    write_records(data, [r for group in records for r in group], [])
    path.write_text(json.dumps(data))
    return path


def test_compare_refuses_speedups_across_weight_modes(tmp_path: Path) -> None:
    """A GraphNet sample's speedup with its weights as inputs against one with them as parameters is not compared,
    nor gated, nor in the geomean; a sample whose mode is the same in both runs (or a built-in) is."""
    base = _run(tmp_path / "base.json", _records("corpus/a", 2.0, "inputs"), _records("builtin/b", 2.0, None))
    fell = _run(tmp_path / "fell.json", _records("corpus/a", 1.0, "parameters"), _records("builtin/b", 2.0, None))
    result = cli("compare", str(base), str(fell), "--fail-on", "speedup:5%")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "note: GraphNet sample weights were passed differently (inputs -> parameters on 1 entry): those speedups "
        "are not compared, nor in the geomeans or the gate"
    ) in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith("corpus/a [cpu]"))
    assert "not compared: weights inputs -> parameters" in row
    assert "over 1 sample timed in both runs (of the 2 rows below)" in result.stdout  # the geomean: builtin/b alone
    same = _run(tmp_path / "same.json", _records("corpus/a", 1.0, "inputs"), _records("builtin/b", 2.0, None))
    assert cli("compare", str(base), str(same), "--fail-on", "speedup:5%").returncode == 1  # same mode: gated
    rows = json.loads(cli("compare", str(base), str(fell), "--format", "json").stdout)["templates"]["default"]["rows"]
    a = next(r for r in rows if r["sample"] == "corpus/a")
    assert (a["base_sample_weights"], a["new_sample_weights"], a["speedup_change"]) == ("inputs", "parameters", None)


def test_compare_with_only_other_modes_exits_2_and_a_pre_field_run_counts_as_inputs(tmp_path: Path) -> None:
    """Runs saved before records named the mode passed GraphNet weights as inputs: against a parameters run, nothing
    compares; correctness alone still does."""
    old = _run(tmp_path / "old.json", _records("corpus/a", 2.0, None))
    new = _run(tmp_path / "new.json", _records("corpus/a", 1.0, "parameters"))
    result = cli("compare", str(old), str(new))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "pytest-inductor-templates compare: error: nothing to compare: the runs passed GraphNet sample weights "
        "differently (inputs -> parameters on 1 entry): parameters and inputs are different programs, whose speedups "
        "do not compare (--fail-on correctness alone compares outcomes; rerun one with the other's "
        "--inductor-sample-weights)"
    )
    assert cli("compare", str(old), str(new), "--fail-on", "correctness").returncode == 0
    same = _run(tmp_path / "same.json", _records("corpus/a", 2.0, "inputs"))
    assert cli("compare", str(old), str(same)).returncode == 0


def test_report_says_which_mode_ran(tmp_path: Path) -> None:
    from pytest_inductor_templates.runs.files import load

    run = load(
        str(_run(tmp_path / "run.json", _records("corpus/a", 2.0, "parameters"), _records("builtin/b", 2.0, None)))
    )
    assert as_markdown(run).startswith(
        "GraphNet sample weights: `parameters` (the module's parameters and buffers, as deployed).\n"
    )
    mixed = Run(
        "mixed",
        {"inductor_templates": {}},
        [*_records("corpus/a", 2.0, "parameters"), *_records("corpus/c", 2.0, "inputs")],
    )
    assert as_markdown(mixed).splitlines()[0] == (
        "GraphNet sample weights: `inputs` (forward inputs, as GraphNet runs them): 2 item(s); "
        "`parameters` (the module's parameters and buffers, as deployed): 2 item(s)."
    )
    assert not as_markdown(load(str(_run(tmp_path / "b.json", _records("builtin/b", 2.0, None))))).startswith(
        "GraphNet"
    )
