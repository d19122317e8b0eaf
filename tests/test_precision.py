"""--inductor-tf32: the scope sets torch's TF32 flags for an item and restores them, with an Inductor cache per mode.

Each case runs in a pytest subprocess of its own: torch's flags are process state and must not leak into this one.
"""

from __future__ import annotations

import pytest
from inner_runs import runpytest_warm

from conftest import usage_error_line

SCOPE_TESTS = """
import os

import pytest
import torch

from pytest_inductor_templates.compile import precision as p

b = torch.backends
STARTS = {
    "torch's defaults": "",
    "legacy cuDNN flag off": "b.cudnn.allow_tf32 = False",
    "matmul precision medium": "torch.set_float32_matmul_precision('medium')",
    "new API conv ieee": "b.cudnn.conv.fp32_precision = 'ieee'",
    "new API everything ieee": "b.fp32_precision = 'ieee'",
    "new API matmul tf32 only": "b.cuda.matmul.fp32_precision = 'tf32'",
}


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("mode", ["on", "off"])
@pytest.mark.parametrize("raises", [False, True], ids=["returns", "raises"])
def test_scope(start, mode, raises, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    exec(STARTS[start])
    before = p.snapshot()
    with pytest.raises(KeyError) if raises else __import__("contextlib").nullcontext():
        with p.tf32_scope(mode):
            inside = p.snapshot()
            from torch._inductor.runtime.cache_dir_utils import cache_dir

            assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == cache_dir() == str(tmp_path / f"tf32-{mode}")
            if raises:
                raise KeyError("the item raised")
    allowed = mode == "on"
    assert inside["cuda.matmul.allow_tf32"] is allowed and inside["cudnn.allow_tf32"] is allowed
    for setting in p.PRECISION_SETTINGS:
        assert inside[setting] in (p.ABSENT, "tf32" if allowed else "ieee"), setting
    from pytest_inductor_templates.check.float64 import tf32_enabled

    after = p.snapshot()
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)
    for flag, value in before.items():  # every flag torch would read before reads the same after
        if value is not p.UNREADABLE:
            assert after[flag] == value, (flag, value, after[flag])
    for setting in (*p.PARENT_SETTINGS, *p.PRECISION_SETTINGS):  # the settings themselves, always
        assert after[setting] == before[setting], setting


def test_the_cache_folder_is_restored_when_none_was_set(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    with p.tf32_scope("off"):
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == os.path.join(default_cache_dir(), "tf32-off")
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ


def test_no_mode_changes_nothing(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    before = p.snapshot()
    with p.tf32_scope(None):
        assert p.snapshot() == before and os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)


def test_each_mode_compiles_into_its_own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    for mode in ("off", "on"):
        torch._dynamo.reset()
        with p.tf32_scope(mode):
            torch.compile(lambda x, w: x @ w)(torch.randn(4, 8), torch.randn(8, 2))  # to ATen: no C++ to build
        assert any((tmp_path / f"tf32-{mode}").rglob("*.py")), mode  # the generated kernels went there
    assert sorted(child.name for child in tmp_path.iterdir()) == ["tf32-off", "tf32-on"]
"""


def test_the_scope_sets_and_restores_every_flag_and_the_cache_folder(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_scope=SCOPE_TESTS)
    result = runpytest_warm(pytester, "-p", "no:cacheprovider", "-q", "-W", "ignore::DeprecationWarning")
    result.assert_outcomes(passed=6 * 2 * 2 + 3)


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [((), "", None), (("--inductor-tf32=off",), "", "off"), ((), "inductor_tf32 = on", "on"),
     (("--inductor-tf32=OFF",), "inductor_tf32 = on", "off")],
)  # fmt: skip
def test_the_mode_is_read_from_the_command_line_or_ini(pytester: pytest.Pytester, args, ini, expected) -> None:
    from pytest_inductor_templates.settings import Settings

    pytester.makeini(f"[pytest]\n{ini}\n")
    assert Settings(pytester.parseconfigure(*args)).tf32 == expected


@pytest.mark.parametrize(
    ("args", "ini", "expected"),
    [
        (["--inductor-tf32=strict"], "", "--inductor-tf32 (command line): expected on or off, got 'strict'"),
        ([], "inductor_tf32 = tf32", "inductor_tf32 (tox.ini): expected on or off, got 'tf32'"),
    ],
)
def test_a_bad_mode_is_one_line(sentinel_test: pytest.Pytester, args, ini, expected) -> None:
    sentinel_test.makeini(f"[pytest]\n{ini}\n")
    assert expected in usage_error_line(sentinel_test.runpytest_inprocess(*args))
