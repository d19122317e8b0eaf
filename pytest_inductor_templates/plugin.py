"""pytest hooks, wired to the modules that do the work. torch is imported only once the plugin is used."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from . import fixtures, hookspec, settings
from .check.outcomes import CheckResult
from .limits import item_limit
from .machine import machine_info
from .report.benchmark_json import BenchmarkJson
from .report.book import RecordBook, stop_on_sigterm
from .report.item_records import complete, record_of
from .report.terminal import TerminalSummary
from .runs.results_file import ResultsWriter
from .samples.items import CASE_KEY, SAMPLE_MARKER, collect_sample_items, release_after
from .samples.triples import Triple
from .session import SESSION_KEY, TEMPLATES_MARKER, InductorSession, templates_listing, torch_device
from .timing.bench import quiet_unused_fixture
from .timing.policy import TIMING_KEY, TimingSettings
from .timing.threads import ThreadScope
from .worker.remote import RemoteTriples
from .worker.xdist import XdistHooks, group_triples, pin_this_worker

SETTINGS_KEY = pytest.StashKey[settings.Settings]()
THREADS_KEY = pytest.StashKey[ThreadScope]()
BOOK_NAME = "inductor-templates-records"
XDIST_NAME = "inductor-templates-xdist"
MATRIX_FIXTURES = ("compiled_model", "inductor_check", "inductor_benchmark", "inductor_device", "inductor_selection")
MARKERS = (
    f"{SAMPLE_MARKER}: an item of the sample x template x device matrix",
    f"{TEMPLATES_MARKER}(*names, exclude=()): run this test under these templates only, or not under excluded",
    f"{fixtures.TOLERANCE_MARKER}(rtol, atol): the tolerance inductor_check uses in this test",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.register(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def _settings(config: pytest.Config) -> settings.Settings:
    """The options, read once: at the command line's main hook, or at configure in a pytest-xdist worker."""
    if SETTINGS_KEY not in config.stash:
        config.stash[SETTINGS_KEY] = settings.Settings(config)
    return config.stash[SETTINGS_KEY]


def _help_only(config: pytest.Config) -> bool:
    """``pytest --help`` or ``--version``: nothing is read or validated (and torch is not imported)."""
    return bool(getattr(config.option, "help", False) or getattr(config.option, "version", 0))


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if _help_only(config):
        return None
    chosen = _settings(config)
    if not chosen.list_templates:
        group_triples(config, bool(chosen.all("inductor_samples")), chosen.isolated)
        return None
    print(templates_listing(config, chosen))
    return 0


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    if _help_only(config):
        return
    pin_this_worker(config)  # before anything here initialises CUDA
    _settings(config)
    config.stash[TIMING_KEY] = TimingSettings.from_settings(config.stash[SETTINGS_KEY])
    config.stash[THREADS_KEY] = ThreadScope(config.stash[TIMING_KEY].threads)
    user_templates = config.pluginmanager.hook.pytest_inductor_templates.get_hookimpls()
    if config.stash[SETTINGS_KEY].any_set or user_templates:  # validate before any test runs
        _session(config)
    options = config.stash[SETTINGS_KEY]
    controller = not hasattr(config, "workerinput")  # not a pytest-xdist worker
    results = ResultsWriter(options.results) if options.results is not None and controller else None
    timing = config.stash[TIMING_KEY]
    info = lambda: {**machine_info(), **timing.machine_info()}  # noqa: E731  (a copy: the cached one stays)
    book = RecordBook(results, info)
    config.pluginmanager.register(book, BOOK_NAME)
    xdist_active = config.getoption("dist", "no") != "no" or "PYTEST_XDIST_WORKER" in os.environ
    summary = TerminalSummary(book, xdist_active, options.require_run)
    config.pluginmanager.register(summary, "inductor-templates-summary")
    config.pluginmanager.import_plugin("pytest_inductor_templates.report.progress")  # per-sample progress lines
    if controller and (options.any_set or SESSION_KEY in config.stash):  # only where the plugin is used
        config.add_cleanup(stop_on_sigterm())
    if config.pluginmanager.hasplugin("xdist") and controller:
        hooks = config.stash[SESSION_KEY].xdist_hooks(config, options) if SESSION_KEY in config.stash else None
        config.pluginmanager.register(hooks or XdistHooks(), XDIST_NAME)
    if config.pluginmanager.hasplugin("benchmark"):
        left_out = lambda: config.stash[SESSION_KEY].left_out if SESSION_KEY in config.stash else []  # noqa: E731
        used = lambda: SESSION_KEY in config.stash or bool(book.records)  # noqa: E731
        benchmark_json = BenchmarkJson(book, used, left_out, info)
        config.pluginmanager.register(benchmark_json, "inductor-templates-benchmark")


def _session(config: pytest.Config) -> InductorSession:
    if SESSION_KEY not in config.stash:
        config.stash[SESSION_KEY] = InductorSession.from_settings(config, config.stash[SETTINGS_KEY])
    return config.stash[SESSION_KEY]


@pytest.hookimpl(trylast=True)  # after the test's own parametrize marks: ids read test[user-params-template]
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not any(name in metafunc.fixturenames for name in MATRIX_FIXTURES):
        return
    fixtures.marker_tolerance(metafunc.definition)  # a bad marker fails this module's collection, in one line
    with_device = "inductor_device" in metafunc.fixturenames
    params = _session(metafunc.config).test_params(metafunc.definition, with_device)
    names = ("inductor_selection", "inductor_device") if with_device else ("inductor_selection",)
    metafunc.parametrize(names, params)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if SESSION_KEY in config.stash and config.stash[SESSION_KEY].samples:
        state = config.stash[SESSION_KEY]
        items.extend(collect_sample_items(session, state.samples, state.sample_cases, state.visible))
    if any(name in getattr(item, "fixturenames", ()) for item in items for name in fixtures.CHECKING_FIXTURES):
        fixtures.prepare_checking_tests(_session(config), items)


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
    scope = item.config.stash[THREADS_KEY]
    scope.enter()
    try:
        return (yield)
    finally:
        if nextitem is None or record_of(nextitem) is None:
            scope.leave()


@pytest.hookimpl(trylast=True)  # after pytest's own teardown: a warning turned error here (-W error) cannot skip it
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if CASE_KEY in item.stash:
        release_after(item, nextitem, _session(item.config).triples)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the sample worker while the first items are set up: its torch import overlaps them."""
    state = session.config.stash.get(SESSION_KEY, None)
    if state is not None and isinstance(state.triples, RemoteTriples) and not session.config.option.collectonly:
        if any(CASE_KEY in item.stash and item.get_closest_marker("skip") is None for item in session.items):
            state.triples.worker.start()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    book: RecordBook = config.pluginmanager.get_plugin(BOOK_NAME)
    if hasattr(config, "workerinput"):
        return
    if book.fails_for_nothing_run(config.stash[SETTINGS_KEY].require_run, exitstatus):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    book.end(session.exitstatus, config.stash[SESSION_KEY].left_out if SESSION_KEY in config.stash else [])


def pytest_unconfigure(config: pytest.Config) -> None:
    if SESSION_KEY in config.stash:
        config.stash[SESSION_KEY].triples.close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    if SESSION_KEY not in config.stash:
        return ["inductor-templates: template default (no --inductor-* option given)"]
    xdist: XdistHooks | None = config.pluginmanager.get_plugin(XDIST_NAME)
    return (
        config.stash[SESSION_KEY].header_lines()
        + config.stash[TIMING_KEY].header_lines()
        + (xdist.header_lines() if xdist is not None else [])
    )


@pytest.fixture
def inductor_selection(request: pytest.FixtureRequest) -> Any:
    """The compile selection (template, mode or options) of this test's matrix column."""
    return getattr(request, "param", _session(request.config).columns[0])


@pytest.fixture
def inductor_device(request: pytest.FixtureRequest) -> Any:
    """The ``torch.device`` of this test's matrix row (``--inductor-devices``)."""
    return request.param if hasattr(request, "param") else torch_device(_session(request.config).devices[0])


@pytest.fixture
def compiled_model(request: pytest.FixtureRequest, inductor_selection: Any) -> Iterator[Any]:
    """A factory: ``compiled_model(module_or_function)`` compiles it with this test's template.

    Skips when the template cannot run on the test's device. Dynamo is reset and the
    Inductor and Dynamo configs are restored around the test.
    """
    yield from fixtures.compiled_models(_session(request.config), request)


@pytest.fixture
def inductor_check(request: pytest.FixtureRequest, inductor_selection: Any) -> Iterator[Callable[..., CheckResult]]:
    """``inductor_check(model, *args, **kwargs)``: compile with this test's template, compare with eager.

    Eager runs twice (a disagreement skips the test as eager_nondeterministic); the compiled model
    runs on the inputs and on a second input, and a mismatch fails the test with every differing
    output named. Tolerances: ``@pytest.mark.inductor_tolerance``, else ``--inductor-tolerance``,
    else torch.testing's per-dtype defaults with atol scaled to each output; an output beyond its tolerance
    gets the float64 second opinion.
    """
    yield from fixtures.checks(_session(request.config), request)


@pytest.fixture
def inductor_benchmark(
    request: pytest.FixtureRequest, inductor_selection: Any, benchmark: Any
) -> Iterator[Callable[..., CheckResult]]:
    """``inductor_benchmark(model, *args, **kwargs)``: check it compiled against eager, then time both.

    The compiled model is timed through pytest-benchmark's ``benchmark`` fixture (so its JSON, storage
    and comparison options apply), after an untimed warm-up; on CUDA with a synchronizing timer, and
    device time from CUDA events in extra_info. Then eager and compiled are timed in pairs, round by round;
    the speedup (the median of the per-round ratios) and its 95% interval go into extra_info. A failed check
    fails the test.
    """
    yield from fixtures.benchmarks(_session(request.config), request, benchmark)


@pytest.fixture
def inductor_sample(request: pytest.FixtureRequest) -> Triple:
    """The (sample, template, device) triple of a sample item, shared by the triple's items: built in the
    worker process (or, with --inductor-isolation=none, in this one) on first use."""
    state = _session(request.config)
    return state.triples.get(request.node.stash[CASE_KEY], item_limit(request.node, state.timeout))
