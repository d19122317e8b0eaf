"""pytest hooks, wired to the modules that do the work. torch is imported only once the plugin is used."""

from __future__ import annotations

import os
from typing import Any

import pytest

from . import hookspec, option_table
from .integrations.auto_workers import auto_workers
from .integrations.benchmark import BenchmarkJson, quiet_unused_fixture, quiet_xdist_warning, timing_switched_off_by
from .integrations.timeout import TimeoutWatch
from .integrations.xdist import XdistHooks, group_triples, pin_this_worker, worker_count
from .items import user_tests
from .items.sample_items import (
    CASE_KEY,
    SAMPLE_MARKER,
    DiagnosesAfterItems,
    collect_sample_items,
    release_after,
    timed_by_the_plugin,
)
from .items.session import TEMPLATES_MARKER, PluginState, plugin_state, templates_listing
from .machine import machine_info
from .report.book import RecordBook, stop_on_sigterm
from .report.records import complete, record_of
from .report.terminal import TerminalSummary
from .runs.results_file import ResultsWriter
from .worker.remote import RemoteTriples

pytest_plugins = ("pytest_inductor_templates.items.fixtures",)

BOOK_NAME = "inductor-templates-records"
XDIST_NAME = "inductor-templates-xdist"
MATRIX_FIXTURES = ("compiled_model", "inductor_check", "inductor_benchmark", "inductor_device", "inductor_selection")
MARKERS = (
    f"{SAMPLE_MARKER}: an item of the sample x template x device matrix",
    f"{TEMPLATES_MARKER}(*names, exclude=()): run this test under these templates only, or not under excluded",
    f"{user_tests.TOLERANCE_MARKER}(rtol, atol): the tolerance inductor_check uses in this test",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    option_table.register(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def _help_only(config: pytest.Config) -> bool:
    """``pytest --help`` or ``--version``: nothing is read or validated (and torch is not imported)."""
    return bool(getattr(config.option, "help", False) or getattr(config.option, "version", 0))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if _help_only(config):
        return None
    options = plugin_state(config).options
    if not options.list_templates:
        group_triples(config, bool(options.all("inductor_samples")), options.isolated)
        return None
    print(templates_listing(config, options))
    return 0


@pytest.hookimpl(optionalhook=True, tryfirst=True)  # pytest-xdist's hook: unused without it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` for a run of samples: the workers this host's CPUs, memory and GPUs fit (None: xdist's count)."""
    state = plugin_state(config)
    state.auto_workers = auto_workers(config, state.options)
    return state.auto_workers.count if state.auto_workers is not None else None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if _help_only(config):
        return
    pin_this_worker(config)  # before anything here initialises CUDA
    state = plugin_state(config)
    if not hasattr(config, "workerinput"):
        state.time_for_workers(worker_count(config))  # -n N (auto resolved by now): the workers' thread count
    if state.options.any_set or config.pluginmanager.hook.pytest_inductor_templates.get_hookimpls():
        _ = state.session  # every option and template checked before any test runs
    _register_reporting(config, state)


def _register_reporting(config: pytest.Config, state: PluginState) -> None:
    """The plugin objects that collect and write the records, and the optional integrations' hooks."""
    options, timing = state.options, state.timing
    controller = not hasattr(config, "workerinput")  # not a pytest-xdist worker
    results = ResultsWriter(options.results) if options.results is not None and controller else None

    def info() -> dict[str, Any]:  # what machine_info gains (a copy: the cached one stays)
        return {**machine_info(options.tf32), **timing.machine_info(), "xdist_workers": worker_count(config)}

    book = RecordBook(results, info)
    config.pluginmanager.register(book, BOOK_NAME)
    config.pluginmanager.register(DiagnosesAfterItems(book), "inductor-templates-diagnoses-after-items")
    xdist_active = config.getoption("dist", "no") != "no" or "PYTEST_XDIST_WORKER" in os.environ
    cases = lambda: state.resolved.matrix_cases if state.resolved is not None else []  # noqa: E731
    summary = TerminalSummary(book, xdist_active, options.require_run, cases)
    config.pluginmanager.register(summary, "inductor-templates-summary")
    config.pluginmanager.import_plugin("pytest_inductor_templates.report.progress")  # per-sample progress lines
    if controller and (options.any_set or state.resolved is not None):  # only where the plugin is used
        config.add_cleanup(stop_on_sigterm())
    if config.pluginmanager.hasplugin("xdist") and controller:
        resolved = state.resolved
        hooks = resolved.xdist_hooks(config, options, state.auto_workers) if resolved is not None else XdistHooks()
        config.pluginmanager.register(hooks, XDIST_NAME)
    if options.html is not None and controller:
        from .report.html_report import HtmlReport

        left = lambda: state.resolved.left_out if state.resolved is not None else []  # noqa: E731
        config.pluginmanager.register(HtmlReport(options.html, book, info, left), "inductor-templates-html")
    if config.pluginmanager.hasplugin("html") and controller:
        from .integrations.html_results import HtmlResultsColumns

        config.pluginmanager.register(HtmlResultsColumns(), "inductor-templates-pytest-html")
    if config.pluginmanager.hasplugin("timeout"):
        config.pluginmanager.register(TimeoutWatch(), "inductor-templates-timeout")
    if config.pluginmanager.hasplugin("benchmark"):
        left_out = lambda: state.resolved.left_out if state.resolved is not None else []  # noqa: E731
        used = lambda: state.resolved is not None or bool(book.records)  # noqa: E731
        config.pluginmanager.register(BenchmarkJson(book, used, left_out, info), "inductor-templates-benchmark")


@pytest.hookimpl(trylast=True)  # after the test's own parametrize marks: ids read test[user-params-template]
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not any(name in metafunc.fixturenames for name in MATRIX_FIXTURES):
        return
    user_tests.marker_tolerance(metafunc.definition)  # a bad marker fails this module's collection, in one line
    with_device = "inductor_device" in metafunc.fixturenames
    params = plugin_state(metafunc.config).session.test_params(metafunc.definition, with_device)
    names = ("inductor_selection", "inductor_device") if with_device else ("inductor_selection",)
    metafunc.parametrize(names, params)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state = plugin_state(config)
    if state.resolved is not None and state.resolved.samples:
        resolved = state.resolved
        items.extend(collect_sample_items(session, resolved.samples, resolved.sample_cases, resolved.visible))
    if any(name in getattr(item, "fixturenames", ()) for item in items for name in user_tests.CHECKING_FIXTURES):
        user_tests.prepare_checking_tests(state.session, items)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: runs after pytest-benchmark's makereport
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    complete(item, report)
    quiet_unused_fixture(item)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Every item of the plugin runs (builds, compiles, checks, is timed) with the session's intra-op threads;
    the count in force before comes back after the last of a run of the plugin's items."""
    if record_of(item) is None:
        return (yield)
    scope = plugin_state(item.config).threads
    scope.enter()
    try:
        return (yield)
    finally:
        if nextitem is None or record_of(nextitem) is None:
            scope.leave()


@pytest.hookimpl(trylast=True)  # after pytest's own teardown: a warning turned error here (-W error) cannot skip it
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if CASE_KEY in item.stash:
        release_after(item, nextitem, plugin_state(item.config).session.triples)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the sample worker while the first items are set up: its torch import overlaps them. Under pytest-xdist,
    no "benchmarks are disabled" warning where the plugin times every benchmark item itself."""
    resolved = plugin_state(session.config).resolved
    if resolved is not None:
        quiet_xdist_warning(session.config, session.items, timed_by_the_plugin)
    if resolved is not None and isinstance(resolved.triples, RemoteTriples) and not session.config.option.collectonly:
        if any(CASE_KEY in item.stash and item.get_closest_marker("skip") is None for item in session.items):
            resolved.triples.worker.start()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workerinput"):
        return
    state = plugin_state(config)
    book: RecordBook = config.pluginmanager.get_plugin(BOOK_NAME)
    if book.fails_for_nothing_run(state.options.require_run, exitstatus):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    book.end(session.exitstatus, state.resolved.left_out if state.resolved is not None else [])


def pytest_unconfigure(config: pytest.Config) -> None:
    resolved = plugin_state(config).resolved if not _help_only(config) else None
    if resolved is not None:
        resolved.triples.close()


@pytest.hookimpl(trylast=True)  # after the header's, which probes where it is shown
def pytest_sessionstart(session: pytest.Session) -> None:
    state, config = plugin_state(session.config), session.config
    timed = timing_switched_off_by(config) is None and not config.option.collectonly
    if state.resolved is not None and not hasattr(config, "workerinput") and timed:
        state.timing.steadiness  # noqa: B018  the CPU-speed probe where no header ran it (-q, --no-header)


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = plugin_state(config)
    if state.resolved is None:
        return ["inductor-templates: template default (no --inductor-* option given)"]
    xdist: XdistHooks | None = config.pluginmanager.get_plugin(XDIST_NAME)
    return (
        state.resolved.header_lines()
        + state.timing.header_lines(timed=timing_switched_off_by(config) is None)
        + (xdist.header_lines() if xdist is not None else [])
    )
