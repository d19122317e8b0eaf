"""compiled_model with real torch.compile, in fresh pytest processes (compile state must not leak)."""

from __future__ import annotations

from pathlib import Path

import pytest
from inner_runs import run_pytest_warm, runpytest_warm

from conftest import made_once_value

STATS_TESTS = """
import torch
import torch._dynamo.config as dynamo_config
import torch._inductor.config as inductor_config

INDUCTOR_AT_IMPORT = inductor_config.get_config_copy()
DYNAMO_AT_IMPORT = dynamo_config.get_config_copy()


def shared(x):
    return (x.sin() * 2).relu()


def test_matches_eager_with_stats(compiled_model):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
    compiled = compiled_model(model)
    x = torch.randn(4, 8)
    torch.testing.assert_close(compiled(x), model(x))
    stats = compiled.stats
    assert (stats.graphs, stats.graph_breaks, stats.recompiles) == (1, 0, 0)
    assert stats.compile_seconds > 0 and stats.cudagraph_skips == 0


def test_graph_break_is_counted(compiled_model):
    def broken(x):
        y = x.cos()
        torch._dynamo.graph_break()
        return y + 1

    compiled = compiled_model(broken)
    compiled(torch.randn(3))
    assert (compiled.stats.graphs, compiled.stats.graph_breaks) == (2, 1)
    assert "graph_break" in compiled.stats.graph_break_reasons[0]


def test_recompile_is_counted(compiled_model):
    dynamo_config.automatic_dynamic_shapes = False   # restored by the plugin after this test
    compiled = compiled_model(shared)
    compiled(torch.randn(3))
    compiled(torch.randn(5))
    assert (compiled.stats.graphs, compiled.stats.recompiles) == (2, 1)


def test_recompile_limit_warns(compiled_model):
    dynamo_config.automatic_dynamic_shapes = False
    dynamo_config.recompile_limit = 2
    compiled = compiled_model(lambda x: x * 3)
    for n in range(1, 5):
        torch.testing.assert_close(compiled(torch.ones(n)), torch.full((n,), 3.0))
    assert compiled.stats.graphs == 2


def test_no_compiled_state_leaks_into_the_next_test(compiled_model):
    compiled = compiled_model(shared)
    compiled(torch.randn(3))
    assert (compiled.stats.graphs, compiled.stats.recompiles) == (1, 0)


def test_configs_are_back_to_what_they_were():
    assert inductor_config.get_config_copy() == INDUCTOR_AT_IMPORT
    assert dynamo_config.get_config_copy() == DYNAMO_AT_IMPORT
"""


def test_stats_isolation_and_recompile_warning(pytester: pytest.Pytester) -> None:
    """Graphs, breaks and recompiles are Dynamo's, the configs restored the plugin's: on Dynamo's eager backend (no
    Inductor compile to wait for, eight of them cold on CI)."""
    pytester.makepyfile(test_stats=STATS_TESTS)
    result = runpytest_warm(
        pytester,
        "--inductor-backend=eager",
        "-p",
        "no:randomly",
        "-W",
        "ignore::DeprecationWarning",
        "--inductor-cpu-probe=0",
    )
    result.assert_outcomes(passed=6, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "test_stats.py::test_recompile_limit_warns[[]default[]]",
            "*RecompileLimitWarning: Dynamo hit torch._dynamo.config.recompile_limit (2) for '<lambda>'*"
            "now runs it eagerly, uncompiled; last recompile reason: *size mismatch*",
        ]
    )


FREEZING_TESTS = """
import torch
import torch._inductor.config as inductor_config


def test_weight_update_after_first_call_is_not_seen(compiled_model):
    model = torch.nn.Linear(16, 16).eval()
    compiled = compiled_model(model)
    x = torch.randn(4, 16)
    first = compiled(x)          # no torch.no_grad() here: the template supplies it
    assert first.grad_fn is None
    with torch.no_grad():
        model.weight.add_(1.0)
    assert not torch.allclose(model(x), first)    # eager sees the update
    torch.testing.assert_close(compiled(x), first)  # the frozen compile does not


def test_freezing_is_not_left_on():
    assert inductor_config.freezing is False
"""


@pytest.fixture(scope="module")
def freezing_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> tuple[dict[str, int], str]:
    """One run of the freezing probe under the built-in freezing, a user template with ``freezing = true`` and
    default (which does not freeze): its outcome counts and output; made once a session."""
    return made_once_value(tmp_path_factory, worker_id, "freezing-run", _freezing_run)


def _freezing_run(root: Path) -> tuple[dict[str, int], str]:
    (root / "test_freezing.py").write_text(FREEZING_TESTS)
    (root / "templates.toml").write_text(
        '[templates.frozen_user]\ndescription = "frozen weights"\nsettings = { freezing = true }\n'
    )
    templates = ("--inductor-templates-file=templates.toml", "--inductor-template=freezing,frozen_user,default")
    result = run_pytest_warm(
        root, *templates, "-rA", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning", "--inductor-cpu-probe=0"
    )
    return pytest.RunResult.parse_summary_nouns(result.stdout.splitlines()), result.stdout


def test_freezing_folds_weights_whoever_defined_the_template(freezing_run) -> None:
    """Whoever turns freezing on gets an inference-only column: a user template with ``freezing = true`` runs
    its compiled calls without grad as the built-in does, so the weights really are folded."""
    counts, stdout = freezing_run
    assert counts == {"passed": 3, "failed": 1}, stdout  # the failure: default's (below)
    for template in ("freezing", "frozen_user"):
        assert f"PASSED test_freezing.py::test_weight_update_after_first_call_is_not_seen[{template}]" in stdout
    assert "template freezing, template frozen_user, template default from --inductor-template (command line)" in (
        stdout
    )
    assert "inductor-templates: frozen_user: inference only: compiled calls run under" in stdout


def test_freezing_needs_inference_whoever_asks_for_it() -> None:
    from pytest_inductor_templates.templates.registry import Template
    from pytest_inductor_templates.templates.selection import Selection

    assert Template("mine", "", {"freezing": True}).requires.inference_only
    assert not Template("mine", "", {"freezing": False}).requires.inference_only
    options = Selection(options={"freezing": True, "max_autotune": True})
    assert options.inference_only and options.config_patches == {"freezing": True}
    assert options.compile_options == {"max_autotune": True}


def test_without_freezing_the_same_probe_sees_the_update(freezing_run) -> None:
    counts, stdout = freezing_run
    assert counts["failed"] == 1, stdout
    assert "FAILED test_freezing.py::test_weight_update_after_first_call_is_not_seen[default]" in stdout
    assert "PASSED test_freezing.py::test_freezing_is_not_left_on" in stdout


CUDAGRAPHS_ON_CPU = """
import torch


def test_cudagraph_skip_is_reported(compiled_model):
    compiled = compiled_model(lambda x: x.exp() + 1)
    x = torch.randn(5)
    out = compiled(x)
    torch.testing.assert_close(out, x.exp() + 1)
    assert compiled.stats.cudagraph_skips == 1
    assert compiled.stats.cudagraph_skip_reasons == ["graph runs on cpu: CUDA graphs need CUDA tensors"]
    print(compiled.stats.summary())
"""


def test_reduce_overhead_on_cpu_reports_the_cudagraph_skip(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cpu_graphs=CUDAGRAPHS_ON_CPU)
    result = runpytest_warm(
        pytester, "--inductor-mode=reduce-overhead", "-s", "-W", "ignore::DeprecationWarning", "--inductor-cpu-probe=0"
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*effective Inductor settings: triton.cudagraphs=True*",
            "*1 graph(s), 0 graph break(s), 0 recompile(s), CUDA graphs skipped 1x (graph runs on cpu*",
        ]
    )


COMPILE_FLAGS_TESTS = """
import torch
import torch._dynamo.config as dynamo_config


def test_graph_break_under_fullgraph(compiled_model):
    def broken(x):
        y = x.cos()
        torch._dynamo.graph_break()
        return y + 1

    compiled_model(broken)(torch.randn(3))


def test_dynamic_shapes_compile_once(compiled_model):
    dynamo_config.automatic_dynamic_shapes = False
    compiled = compiled_model(lambda x: x.sin() * 2)
    for n in (3, 5, 7):
        torch.testing.assert_close(compiled(torch.ones(n)), torch.ones(n).sin() * 2)
    assert (compiled.stats.graphs, compiled.stats.recompiles) == (1, 0)
"""


def test_backend_fullgraph_and_dynamic_reach_torch_compile(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_flags=COMPILE_FLAGS_TESTS)
    result = runpytest_warm(
        pytester,
        "--inductor-backend=aot_eager",
        "--inductor-fullgraph",
        "--inductor-dynamic",
        "-W",
        "ignore::DeprecationWarning",
        "--inductor-cpu-probe=0",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*torch._dynamo.exc.Unsupported: Call to `torch._dynamo.graph_break()`*"])
    result.stdout.fnmatch_lines(["FAILED test_flags.py::test_graph_break_under_fullgraph[[]default[]]*"])


DEPRECATION_TESTS = """
import warnings

import torch


def test_compiled(compiled_model):
    warnings.warn("the user's own deprecation", DeprecationWarning)
    compiled_model(torch.nn.Linear(8, 8))(torch.randn(2, 8))


def test_checked(inductor_check):
    inductor_check(torch.nn.Conv2d(3, 4, 3), torch.randn(1, 3, 8, 8))
"""


def test_torchs_own_deprecation_warnings_are_not_reported_against_the_users_test(pytester: pytest.Pytester) -> None:
    """torch warns from its own modules while the plugin compiles (its jit's script_method, as Inductor imports
    torch.utils.mkldnn); pytest would list them under the user's test file. The user's own warnings still show."""
    import subprocess
    import sys

    imported = subprocess.run(  # what Inductor imports as it compiles: does this torch warn there?
        [sys.executable, "-W", "always::DeprecationWarning", "-c", "import torch, torch.utils.mkldnn"],
        capture_output=True,
        text=True,
    )
    if "torch/jit/_script.py" not in imported.stderr or "DeprecationWarning" not in imported.stderr:
        pytest.skip("this torch warns no deprecation of its own while compiling")  # torch 2.13 does: 14 of them
    pytester.makepyfile(test_user=DEPRECATION_TESTS)
    result = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--inductor-template=default",
        "--inductor-devices=cpu",
        "--inductor-cpu-probe=0",
        "test_user.py",
    )
    result.assert_outcomes(passed=2)
    summary = result.stdout.str().split("warnings summary")[1].split("-- Docs")[0]
    assert "DeprecationWarning: the user's own deprecation" in summary, summary
    assert "site-packages/torch" not in summary and "script_method" not in summary, summary
    result.stdout.fnmatch_lines(["*= 2 passed, 1 warning in *"])
