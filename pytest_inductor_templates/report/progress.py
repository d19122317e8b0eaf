"""Per-sample progress on long runs: a line where pytest shows its own progress, as each sample's items end.

``inductor-templates: builtin/conv_bn done (2 templates, 4 items: 3 passed, 1 failed); sample 2 of 5, 10 of 24
items, 41 s elapsed, about 1 min 40 s left``. Read from the items' node ids (``inductor-samples::SAMPLE::KIND[...]``)
and the reports pytest logs, so it works as well on the pytest-xdist controller, which sees the workers' reports
and their collected ids but no items. Quiet under ``-q``. Registered by ``pytest_configure`` below.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any

import pytest

PLUGIN_NAME = "inductor-templates-progress"
PREFIX = "inductor-samples::"


def sample_of(nodeid: str) -> tuple[str, str] | None:
    """The sample and the ``TEMPLATE-DEVICE`` of a sample item's node id, or None for any other item."""
    if not nodeid.startswith(PREFIX):
        return None
    sample, _, rest = nodeid[len(PREFIX) :].rpartition("::")
    _, _, params = rest.partition("[")
    return (sample, params.removesuffix("]")) if sample else None


def duration(seconds: float) -> str:
    """``41 s``, ``3 min 05 s``, ``2 h 04 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class SampleProgress:
    """Counts each sample's items as they end and writes one line when a sample's last item has ended."""

    def __init__(self, config: pytest.Config, clock: Any = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self.expected: dict[str, Counter[str]] = {}  # per sample: its items per TEMPLATE-DEVICE
        self.ended: dict[str, Counter[str]] = defaultdict(Counter)
        self.outcomes: dict[str, Counter[str]] = defaultdict(Counter)  # per sample: passed, failed, skipped
        self.status: dict[str, str] = {}  # per running item: its outcome so far
        self.samples_done = 0
        self.start: float | None = None

    @property
    def quiet(self) -> bool:
        return self.config.get_verbosity() < 0 or hasattr(self.config, "workerinput")

    def expect(self, nodeids: list[str]) -> None:
        """The sample items this run will report (once: every pytest-xdist worker collects the same)."""
        if self.expected:
            return
        for nodeid in nodeids:
            if (found := sample_of(nodeid)) is not None:
                self.expected.setdefault(found[0], Counter())[found[1]] += 1

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.expect([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.expect(ids)

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self.start is None and sample_of(nodeid) is not None:
            self.start = self.clock()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if sample_of(report.nodeid) is None or self.status.get(report.nodeid) == "failed":
            return
        if report.failed or report.skipped:
            self.status[report.nodeid] = report.outcome
        elif report.when == "call":
            self.status[report.nodeid] = "passed"

    @pytest.hookimpl(trylast=True)  # after pytest has written its own progress for the item
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        found = sample_of(nodeid)
        if found is None or found[0] not in self.expected:
            return
        sample, params = found
        self.ended[sample][params] += 1
        self.outcomes[sample][self.status.pop(nodeid, "passed")] += 1
        if sum(self.ended[sample].values()) < sum(self.expected[sample].values()):
            return
        self.samples_done += 1
        if not self.quiet:
            self.write(self.line(sample))

    def line(self, sample: str) -> str:
        templates = len(self.expected[sample])
        items = sum(self.expected[sample].values())
        result = ", ".join(f"{n} {o}" for o in ("passed", "failed", "skipped") if (n := self.outcomes[sample][o]))
        total = sum(sum(c.values()) for c in self.expected.values())
        ended = sum(sum(c.values()) for c in self.ended.values())
        elapsed = self.clock() - (self.start if self.start is not None else self.clock())
        left = f", about {duration(elapsed / ended * (total - ended))} left" if ended < total else ""
        return (
            f"inductor-templates: {sample} done ({templates} template{'s' if templates != 1 else ''}, {items} "
            f"item{'s' if items != 1 else ''}: {result}); sample {self.samples_done} of {len(self.expected)}, "
            f"{ended} of {total} items, {duration(elapsed)} elapsed{left}"
        )

    def write(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        reporter.ensure_newline()
        writer = getattr(reporter, "_tw", None)  # under pytest-xdist, ensure_newline misses the line of dots
        if getattr(writer, "width_of_current_line", 0):
            reporter.write("\n")
        reporter.write(line, flush=True)
        reporter.currentfspath = -2  # as pytest marks a line of its own: its next progress starts a new line


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(SampleProgress(config), PLUGIN_NAME)
