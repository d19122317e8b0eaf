"""Planted compiler faults for the diagnosis tests, installed as a broken torch would be: a ``sitecustomize.py``
on ``PYTHONPATH`` that changes torch as it is imported, chosen by ``INDUCTOR_TEST_PLANT`` (a comma list), so the
test's process, the diagnosis child and the standalone repro all see it; a fresh process that never imports torch
starts as it would without the plant (a child of the tests' warm interpreter, torch imported, plants at once)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from inner_runs import WARM_START_MARK, run_python_warm

PLANT_ENV = "INDUCTOR_TEST_PLANT"

SITECUSTOMIZE = (
    WARM_START_MARK
    + """ (it plants now where torch is imported already)
import os
import sys

_PLANTS = set(filter(None, os.environ.get("INDUCTOR_TEST_PLANT", "").split(",")))


def _plant():
    import torch
    from torch._inductor import config, lowering
    from torch._inductor.decomposition import decompositions

    aten = torch.ops.aten

    def _replace(op, make):
        good = lowering.lowerings[op.default]
        bad = make(good)
        for key in (op, op.default):
            lowering.lowerings[key] = bad

    def _scaled(good, factor, when=lambda x: True):
        def lower(x, *args, **kwargs):
            out = good(x, *args, **kwargs)
            return lowering.lowerings[aten.mul.Tensor](out, factor) if when(x) else out
        return lower

    if "sigmoid" in _PLANTS:  # a wrong Inductor lowering: sigmoid x 1.001
        _replace(aten.sigmoid, lambda good: _scaled(good, 1.001))
    if "hardswish_decomp" in _PLANTS:  # a wrong decomposition (used from aot_eager_decomp_partition on)
        def _hardswish(x):
            return x * torch.clamp(x + 3, 0, 6) / 6 * 1.001
        decompositions[aten.hardswish.default] = _hardswish
        from torch._inductor import decomposition

        cached = getattr(decomposition, "fast_random_decomps", None)  # a copy made at a compile before the plant
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()
    if "tanh_aggressive_fusion" in _PLANTS:  # a lowering wrong only under aggressive_fusion=True
        _replace(aten.tanh, lambda good: _scaled(good, 1.001, lambda x: config.aggressive_fusion))
    if "hang_bisecting_lowerings" in _PLANTS:  # sigmoid's lowering hangs while the bisector bisects lowerings
        import time
        from torch._inductor.compiler_bisector import CompilerBisector

        def _hang(good):
            def lower(x, *args, **kwargs):
                if CompilerBisector.get_subsystem() == "lowerings":
                    with open(os.environ["INDUCTOR_TEST_MARKER"], "w") as marker:
                        marker.write(CompilerBisector.in_process_cache or "")
                    time.sleep(3600)
                return good(x, *args, **kwargs)
            return lower

        _replace(aten.sigmoid, _hang)
    if "relu_raises" in _PLANTS:  # Inductor's lowering of aten.relu raises: a compile failure
        def _raises(good):
            def lower(x, *args, **kwargs):
                raise RuntimeError("planted: no lowering for relu")
            return lower

        _replace(aten.relu, _raises)
    if "relu" in _PLANTS:  # a wrong Inductor lowering: relu x 1.001 (the issue's plant, for the cost benchmark)
        _replace(aten.relu, lambda good: _scaled(good, 1.001))
    if "relu_post_grad_pass" in _PLANTS:  # a wrong post-grad pass (not a lowering): each relu's result x 1.001
        from torch._inductor.custom_graph_pass import CustomGraphPass

        class _ScaleRelu(CustomGraphPass):
            def __call__(self, graph):
                for node in list(graph.nodes):
                    if node.op == "call_function" and node.target is aten.relu.default:
                        with graph.inserting_after(node):
                            scaled = graph.call_function(aten.mul.Tensor, (node, 1.001))
                        node.replace_all_uses_with(scaled, delete_user_cb=lambda user: user is not scaled)

            def uuid(self):
                return "planted-relu-post-grad-pass"

        config.post_grad_custom_post_pass = _ScaleRelu()
    if "cos_bf16" in _PLANTS:  # bf16 cos computed 3% off, unless Inductor emulates eager's precision casts
        _replace(aten.cos, lambda good: _scaled(
            good, 1.03, lambda x: x.get_dtype() == torch.bfloat16 and not config.emulate_precision_casts))


class _PlantAfterTorch:  # plants as torch is imported: a process that never imports it (each of Inductor's ISA
    # probes is a short python -c of its own) starts without it, not in the seconds an import of torch takes

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        exec_module = spec.loader.exec_module

        def exec_then_plant(module):
            exec_module(module)
            _plant()

        spec.loader.exec_module = exec_then_plant
        return spec


if _PLANTS and "torch" in sys.modules:  # run after torch's import (a child of the tests' warm interpreter)
    _plant()
elif _PLANTS:
    sys.meta_path.insert(0, _PlantAfterTorch())
"""
)


def plant_dir(tmp_path: Path) -> Path:
    """A directory holding the planting sitecustomize.py."""
    directory = tmp_path / "plant"
    directory.mkdir(exist_ok=True)
    (directory / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return directory


def planted_env(tmp_path: Path, plants: str) -> dict[str, str]:
    """The environment of a process that sees ``plants`` (empty: none)."""
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(plant_dir(tmp_path)), root])
    env[PLANT_ENV] = plants
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env


def run_python(tmp_path: Path, plants: str, code: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in ``tmp_path`` with ``plants`` planted (in the warm interpreter: the plant runs there)."""
    return run_python_warm(tmp_path, code, timeout, env=planted_env(tmp_path, plants))


def run_repro(tmp_path: Path, repro: str, plants: str) -> subprocess.CompletedProcess[str]:
    """``python repro.py`` with ``plants`` planted and without the plugin on the path (torch alone)."""
    env = planted_env(tmp_path, plants)
    env["PYTHONPATH"] = str(plant_dir(tmp_path))
    return subprocess.run(
        [sys.executable, repro], env=env, capture_output=True, text=True, timeout=600, cwd=Path(repro).parent
    )
