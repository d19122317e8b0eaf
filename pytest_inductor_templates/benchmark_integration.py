"""pytest-benchmark hooks: GPU fields in machine_info, speedups in the JSON, no silent cross-GPU compare."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .environment import machine_info
from .report import OutcomeReport
from .results import add_speedups_to_json
from .runs import SECTION
from .speedup_report import SpeedupReport

GPU_FIELDS = ("gpu", "gpu_compute_capability")


class BenchmarkIntegration:
    """Registered only when pytest-benchmark is active (its hookspecs exist only then)."""

    def __init__(
        self, outcomes: OutcomeReport, speedups: SpeedupReport, left_out: Callable[[], list[tuple[str, str]]]
    ) -> None:
        self.outcomes = outcomes
        self.speedups = speedups
        self.left_out = left_out  # the templates --inductor-template=all left out, with why

    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        machine_info.update(_machine_info())

    def pytest_benchmark_update_json(
        self, config: pytest.Config, benchmarks: list[Any], output_json: dict[str, Any]
    ) -> None:
        add_speedups_to_json(output_json.get("benchmarks", []))
        output_json[SECTION] = {"outcomes": self._outcome_records()}
        if left_out := self.left_out():
            output_json[SECTION]["left_out"] = [{"template": name, "reason": why} for name, why in left_out]

    def _outcome_records(self) -> list[dict[str, Any]]:
        """Every sample check's outcome, and every untimed failure of a bench item: pytest-benchmark
        records only what it timed, and a compile failure must still show in the saved run."""
        fields = ("sample", "template", "device", "outcome", "reason", "nodeid")
        checked = [
            (r.sample, r.template, r.device, r.outcome.value, r.reason, r.nodeid)
            for r in self.outcomes.records
            if r.sample is not None
        ]
        keys = {row[:3] for row in checked}
        untimed = [
            (e.sample, e.template, e.device, e.outcome, e.reason, e.fullname)
            for e in self.speedups.entries
            if e.median is None and e.key not in keys
        ]
        return [dict(zip(fields, row, strict=True)) for row in checked + untimed]

    def pytest_benchmark_compare_machine_info(
        self, config: pytest.Config, benchmarksession: Any, machine_info: dict[str, Any], compared_benchmark: Any
    ) -> None:
        saved = compared_benchmark.get("machine_info", {})
        if not all(field in saved for field in GPU_FIELDS):
            return  # not saved by this plugin: pytest-benchmark's own warning covers it
        here = _machine_info()
        if any(saved.get(field) != here.get(field) for field in GPU_FIELDS):
            raise pytest.UsageError(
                f"--benchmark-compare: the saved run was timed on {_describe(saved)}, this one runs on "
                f"{_describe(here)}; compare runs of the same GPU (keep them apart with --benchmark-storage), "
                "or compare speedups with `pytest-inductor-templates compare`"
            )


def _machine_info() -> dict[str, Any]:
    return dict(machine_info())  # a copy: the cached one stays as measured


def _describe(info: dict[str, Any]) -> str:
    if not info.get("gpu"):
        return "no GPU"
    return f"{info['gpu']} (sm {info.get('gpu_compute_capability')})"
