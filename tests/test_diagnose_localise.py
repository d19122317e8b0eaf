"""The operator step's reading of compiled intermediates and the float64 runs of the operator step and the repro
(``diagnose/localise.py``, ``diagnose/standalone.py``), without Inductor."""

from __future__ import annotations

import pytest


def _aten_graph():
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    def model(x, w):
        return torch.relu(x @ w).sin() + x.sum()

    return make_fx(model)(torch.randn(4, 4), torch.randn(4, 4))


def test_a_lowering_the_bisector_named_is_the_only_intermediate_read() -> None:
    """With the bisector's lowering named, the step's compile gets one more output, that node (on a GPU, opus-mt's
    step compiled every intermediate unfused: 153 s of its diagnosis); with no name, every floating intermediate."""
    from pytest_inductor_templates.diagnose.localise import holds, intermediates_to_read

    graph = _aten_graph()
    every = intermediates_to_read(graph)
    assert "relu" in every and len(every) >= 4, every  # mm, relu, sin, sum, add
    assert intermediates_to_read(graph, "relu") == ["relu"]
    assert intermediates_to_read(graph, "relu_99") == every
    assert holds(graph, "relu") and not holds(graph, "relu_99")  # the child reads the graphs that hold it alone


def test_a_graph_holding_a_tensor_constant_is_read_in_float64() -> None:
    """The float64 opinion of every node runs a copy of the graph; a graph that holds a tensor (opus-mt's aten
    graph on the H100) is copied before widening: a copy made under the widening mode turned the tensor's copy to
    float64 over its float32 storage, and the operator step failed with ``Expected a Storage of type double``."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from pytest_inductor_templates.diagnose.localise import node_values

    table = torch.randn(4, 4)

    def model(x):
        return torch.relu(x + table)

    graph = make_fx(model)(torch.randn(4, 4))
    constant = next(n.target for n in graph.graph.nodes if n.op == "get_attr")
    x = torch.randn(4, 4)
    wide = node_values(graph, [x], wide=True)
    assert wide["relu"].dtype == torch.float64
    assert torch.allclose(wide["relu"], torch.relu(x.double() + table.double()))
    assert getattr(graph, constant).dtype == torch.float32  # the graph itself is left as it was


def test_the_repros_float64_opinion_covers_a_module_that_holds_a_buffer() -> None:
    """The standalone repro judges with the float64 opinion a module that holds a buffer too: its copy is made
    before widening (made under it, the copy failed and the repro judged without the opinion, unlike the check)."""
    import torch

    from pytest_inductor_templates.diagnose import standalone

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("scale", torch.linspace(1.0, 2.0, 64))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * self.scale).sin()

    def off_by_a_thousandth(graph: torch.fx.GraphModule, example: list) -> object:
        return lambda *args: [out * 1.001 for out in graph(*args)]

    code, message = standalone.check(Scaled(), [torch.randn(64)], backend=off_by_a_thousandth, fresh=False)
    assert code == 1 and "against float64: compiled RMSE" in message, message


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit's, as Inductor imports it
def test_a_graph_with_an_operator_that_refuses_float64_is_localised_without_the_float64_opinion() -> None:
    """An aten graph holding an operator with no float64 kernel (opus-mt's ``_scaled_dot_product_efficient_attention``
    on an H100: ``Only fp32, half & bf16 supported``) is still localised: the named node is compared with eager
    alone (the operator step failed with that error before)."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    from pytest_inductor_templates.diagnose.capture import CapturedGraph
    from pytest_inductor_templates.diagnose.localise import first_divergence

    @torch.library.custom_op("inductor_templates_tests::no_double", mutates_args=(), schema="(Tensor x) -> Tensor")
    def no_double(x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float64:
            raise RuntimeError("Only fp32, half & bf16 supported at the moment")
        return x * 2

    @no_double.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    def model(x):
        return (torch.relu(no_double(x)) + 1,)  # a tuple, as AOT autograd's forward graphs return

    x = torch.randn(8, 8)
    graph = make_fx(model)(x)
    finding = first_divergence(CapturedGraph(None, [x], graph), {}, None, named="relu")
    assert finding is not None and (finding.name, finding.target) == ("relu", "aten.relu"), finding
    assert finding.compiled_rmse is None and not finding.diverges


def test_a_frozen_models_weights_reach_the_operator_step_and_the_repro(tmp_path) -> None:
    """Under freezing Dynamo keeps the module's weights as attributes of its graph, not inputs: AOT autograd passes
    them to the aten graph before the inputs, and the repro's module carries the item's values, not the random ones
    torch writes it with (a new user's freezing diagnosis: the operator step failed with ``Expected positional
    argument for parameter arg1_1``, and two runs of its repro disagreed)."""
    import types

    import torch

    from pytest_inductor_templates.diagnose.capture import capture
    from pytest_inductor_templates.diagnose.localise import first_divergence
    from pytest_inductor_templates.diagnose.repro import load_module, write_repro
    from pytest_inductor_templates.templates.registry import Template
    from pytest_inductor_templates.templates.selection import Selection

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Sigmoid()).eval()
    with torch.no_grad():  # running statistics of their own: buffers that matter, after the parameters
        model[1].running_mean.uniform_(-1, 1), model[1].running_var.uniform_(0.5, 2)
    x = torch.randn(4, 8)
    build = types.SimpleNamespace(
        make_model=lambda device: model, make_inputs=lambda device: [types.SimpleNamespace(args=(x,), kwargs={})]
    )
    request = types.SimpleNamespace(device=types.SimpleNamespace(name="cpu"), no_grad=True)
    selection = Selection(template=Template("freezing", "frozen weights", {"freezing": True}))
    (entry,) = capture(request, selection, build)  # type: ignore[arg-type]
    assert len(entry.kept) == 6 and len(entry.inputs) == 1, (list(entry.kept), entry.inputs)  # 4, 2 buffers; x
    assert len(entry.aten_inputs) == sum(node.op == "placeholder" for node in entry.aten.graph.nodes)
    assert first_divergence(entry, selection.config_patches, None) is None  # compiled as eager: nothing diverges
    path = write_repro(
        tmp_path, entry, name="frozen", what="", options=None, patches=selection.config_patches, no_grad=True,
        tolerance=None,
    )  # fmt: skip
    assert path is not None
    built = load_module(path)["built"](str(tmp_path))
    with torch.no_grad():
        assert torch.equal(built(*entry.inputs)[0], model(x))  # the item's weights, not torch.randn's
