"""The setting: the smallest subset of the selection's Inductor settings that, on the defaults, still fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .steplog import StepLog

NO_SETTINGS = "no settings (the backend's defaults)"
NONE_NEEDED = "none needed (fails under default too)"


def describe(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in settings.items())


def smallest_failing(settings: dict[str, Any], fails: Callable[[dict[str, Any]], bool], log: StepLog) -> str:
    """The empty set first, then each setting alone, then one-by-one removal from the whole set (a subset from
    which no single setting can be dropped). ``fails(subset)`` checks the selection with only ``subset``."""
    if not settings:
        return NO_SETTINGS

    def check(subset: dict[str, Any]) -> bool:
        failing = fails(subset)
        log.write("setting_check", settings=describe(subset) or "(none)", failing=failing)
        return failing

    if check({}):
        return NONE_NEEDED
    if len(settings) == 1:
        return describe(settings)
    for key, value in settings.items():
        if check({key: value}):
            return describe({key: value})
    kept = dict(settings)
    for key in list(settings):
        trial = {k: v for k, v in kept.items() if k != key}
        if len(trial) > 1 and check(trial):
            kept = trial
    return describe(kept)
