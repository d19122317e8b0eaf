"""pytest-benchmark hooks: GPU fields in machine_info, records in the JSON, no silent cross-GPU compare."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ..runs.files import write_records
from .book import RecordBook

GPU_FIELDS = ("gpu", "gpu_compute_capability")


class BenchmarkJson:
    """Registered only when pytest-benchmark is active (its hookspecs exist only then). The JSON hooks act only
    in a session that used the plugin (a plain benchmark run's JSON stays as pytest-benchmark writes it, and
    torch is not imported for it); the compare guard, whenever the saved run is one of the plugin's."""

    def __init__(
        self,
        book: RecordBook,
        used: Callable[[], bool],
        left_out: Callable[[], list[tuple[str, str]]],
        machine_info: Callable[[], dict[str, Any]],
    ) -> None:
        self.book = book
        self.used = used  # whether this session used the plugin (an option, a fixture, a sample item)
        self.left_out = left_out  # the templates --inductor-template=all left out, with why
        self.machine_info = machine_info  # GPU, torch, Triton, timing threads, ... (the results file's too)

    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        if self.used():
            machine_info.update(self.machine_info())

    def pytest_benchmark_update_json(
        self, config: pytest.Config, benchmarks: list[Any], output_json: dict[str, Any]
    ) -> None:
        """Each timed entry's ``extra_info`` gets its item's record; ``inductor_templates`` gets every item's
        record (pytest-benchmark stores only what it timed: a compile failure must still show)."""
        if not self.used():
            return
        write_records(output_json, self.book.records, self.left_out())
        if self.book.interrupted:
            output_json["inductor_templates"]["partial"] = self.book.interrupted

    def pytest_benchmark_compare_machine_info(
        self, config: pytest.Config, benchmarksession: Any, machine_info: dict[str, Any], compared_benchmark: Any
    ) -> None:
        saved = compared_benchmark.get("machine_info", {})
        if not all(field in saved for field in GPU_FIELDS):  # (a saved run of the plugin's, used or not here)
            return  # not saved by this plugin: pytest-benchmark's own warning covers it
        here = self.machine_info()
        if any(saved.get(field) != here.get(field) for field in GPU_FIELDS):
            raise pytest.UsageError(
                f"--benchmark-compare: the saved run was timed on {_describe(saved)}, this one runs on "
                f"{_describe(here)}; compare runs of the same GPU (keep them apart with --benchmark-storage), "
                "or compare speedups with `pytest-inductor-templates compare`"
            )


def _describe(info: dict[str, Any]) -> str:
    if not info.get("gpu"):
        return "no GPU"
    return f"{info['gpu']} (sm {info.get('gpu_compute_capability')})"
