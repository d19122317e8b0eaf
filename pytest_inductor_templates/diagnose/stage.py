"""The stage: torch's own CompilerBisector, made safe to run inside the plugin.

Traps it avoids (torch 2.13): while a bisection runs, ``torch.compile`` replaces the backend it is given by the
stage's name, dropping the plugin's backend and the template's options, unless
``test_configs.bisect_keep_custom_backend_for_inductor`` is set (where this torch lacks it, the template's
options are applied as a scoped config patch at the inductor stage instead); its cleanup runs in a
``__del__``, so the checked function must never raise; it has no timeout (the child is killed at the budget).
"""

from __future__ import annotations

import contextlib
import gc
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..compile.failures import first_line
from .steplog import StepLog

KEEP_BACKEND = "bisect_keep_custom_backend_for_inductor"
_OVERLOAD_REPR = re.compile(r"<OpOverload\(op='([^']+)', overload='([^']+)'\)>")


def readable(debug_info: str | None) -> str | None:
    """The bisector's debug info, an operator's ``repr`` written as its name: ``aten.hardswish.default``."""
    if debug_info and (match := _OVERLOAD_REPR.fullmatch(debug_info.strip())):
        return f"{match[1]}.{match[2]}"
    return debug_info


@dataclass
class StageResult:
    """What the bisector found: ``backend`` None when no stage fails under it."""

    backend: str | None
    subsystem: str | None = None
    debug_info: str | None = None
    error: str | None = None  # the bisector raised (a flaky failure, say): what it had found is kept
    clean: bool = True  # the bisector's state was clean afterwards

    def describe(self) -> str:
        if self.backend is None:
            return "no stage fails under the bisector"
        text = self.backend
        if self.subsystem:
            text += f" / {self.subsystem}"
            if self.debug_info and self.debug_info != self.subsystem:
                text += f": {self.debug_info}"
        return text


def keeps_custom_backend() -> bool:
    """Whether this torch can keep a non-string backend at the bisector's inductor stage."""
    from torch._inductor import config

    return hasattr(config.test_configs, KEEP_BACKEND)


def bisector_state() -> dict[str, Any]:
    """What of the bisector's state can leak into later compiles; all falsy when clean."""
    from torch._inductor.compiler_bisector import BACKENDS, CompilerBisector

    return {
        "enabled": CompilerBisector.bisection_enabled,
        "state_dir": CompilerBisector.in_process_cache,
        "backend": CompilerBisector.get_backend(),
        "pre_grad_graph": BACKENDS["inductor"][0].name == "pre_grad_graph",
    }


def _force_clean(state_dir: str) -> None:
    from torch._inductor.compiler_bisector import BACKENDS, CompilerBisector

    CompilerBisector.bisection_enabled = False
    CompilerBisector.in_process_cache = None
    if BACKENDS["inductor"][0].name == "pre_grad_graph":
        del BACKENDS["inductor"][0]
    shutil.rmtree(state_dir, ignore_errors=True)


@contextlib.contextmanager
def _restored_configs() -> Iterator[None]:
    """Every Inductor and Dynamo config key as it was before the block."""
    import torch._dynamo.config as dynamo_config
    import torch._inductor.config as inductor_config

    saved = [(c, c.get_config_copy()) for c in (inductor_config, dynamo_config)]
    try:
        yield
    finally:
        for config, before in saved:
            for key, value in config.get_config_copy().items():
                if key in before and value is not before[key] and value != before[key]:
                    setattr(config, key, before[key])


def find_stage(fails: Callable[[], bool | None], log: StepLog, temp_root: str | None = None) -> StageResult:
    """Bisect with ``fails()`` answering the bisector's current question ("does it still fail?";
    ``bisect.Answers``). A check that cannot run (None, or a raise: the bisector's own change broke the build, as
    its ``cse`` change does on torch 2.13) names no culprit: at a stage it counts as passing, under a subsystem's
    change as still failing. Never raises."""
    from torch._inductor import config
    from torch._inductor.compiler_bisector import CompilerBisector

    before = bisector_state()
    if any(before.values()):
        return StageResult(None, error=f"the bisector was already active: {before}", clean=False)
    keep = keeps_custom_backend()

    def good() -> bool:  # the bisector's fn: True when the fault is gone; never raises
        subsystem = CompilerBisector.get_subsystem()
        try:
            failing = fails()
        except BaseException as error:  # a raise would leave the bisector enabled
            log.write("bisect_check", subsystem=subsystem, failing=None, error=first_line(error))
            failing = None
        if failing is None:  # could not run: a stage did not show the fault, a subsystem's change fixed nothing
            return not subsystem
        return not failing

    state_dir = tempfile.mkdtemp(prefix="bisect-", dir=temp_root)
    result: StageResult
    with (
        _restored_configs(),
        config.patch({f"test_configs.{KEEP_BACKEND}": True}) if keep else contextlib.nullcontext(),
    ):
        CompilerBisector.in_process_cache = state_dir
        try:
            found = CompilerBisector.do_bisect(good)
            result = (
                StageResult(found.backend, found.subsystem, readable(found.debug_info))
                if found is not None
                else StageResult(None)
            )
        except Exception as error:
            result = StageResult(None, error=first_line(error))
            del error
        gc.collect()  # runs DisableBisect.__del__ of a bisection that raised
    after = bisector_state()
    if any(after.values()):
        _force_clean(state_dir)
        result.clean = not any(bisector_state().values())
    shutil.rmtree(state_dir, ignore_errors=True)
    log.write(
        "stage",
        backend=result.backend,
        subsystem=result.subsystem,
        debug_info=result.debug_info,
        error=result.error,
        clean=result.clean,
        kept_backend=keep,
        describe=result.describe(),
    )
    return result


def stage_from_checks(records: list[dict[str, Any]]) -> str | None:
    """What a bisection stopped part way had found, from its logged checks: the first stage that failed on
    its own, and the first subsystem whose disabling made the failure go away."""
    stage = next(
        (
            r["backend"]
            for r in records
            if r.get("step") == "bisect_check" and r.get("failing") and not r.get("subsystem")
        ),
        None,
    )
    if stage is None:
        return None
    fixed = next(
        (
            r["subsystem"]
            for r in records
            if r.get("step") == "bisect_check"
            and r.get("backend") == stage
            and r.get("subsystem")
            and r.get("run_state") == "test_disable"
            and r.get("failing") is False
        ),
        None,
    )
    return f"{stage} / {fixed}" if fixed else stage
