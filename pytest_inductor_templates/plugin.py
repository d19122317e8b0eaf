"""pytest hooks, wired to the modules that do the work. torch is imported only once the plugin is used."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from . import fixtures, hookspec, settings
from .check.outcomes import CheckResult
from .report.benchmark_json import BenchmarkJson
from .report.book import RecordBook
from .report.item_records import complete
from .report.terminal import TerminalSummary
from .samples.items import CASE_KEY, SAMPLE_MARKER, collect_sample_items, release_after
from .samples.triples import PreparedTriple
from .session import SESSION_KEY, TEMPLATES_MARKER, InductorSession
from .timing.bench import quiet_unused_fixture

SETTINGS_KEY = pytest.StashKey[settings.Settings]()
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


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.getoption("inductor_list_templates"):
        return None
    import torch

    from .machine import visible_devices
    from .session import build_registry
    from .templates.listing import listing

    print(listing(build_registry(config, settings.Settings(config)), visible_devices(), torch.__version__))
    return 0


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    config.stash[SETTINGS_KEY] = settings.Settings(config)
    user_templates = config.pluginmanager.hook.pytest_inductor_templates.get_hookimpls()
    if config.stash[SETTINGS_KEY].any_set or user_templates:  # validate before any test runs
        _session(config)
    book = RecordBook()
    config.pluginmanager.register(book, "inductor-templates-records")
    xdist_active = config.getoption("dist", "no") != "no" or "PYTEST_XDIST_WORKER" in os.environ
    config.pluginmanager.register(TerminalSummary(book, xdist_active), "inductor-templates-summary")
    if config.pluginmanager.hasplugin("benchmark"):
        left_out = lambda: config.stash[SESSION_KEY].left_out if SESSION_KEY in config.stash else []  # noqa: E731
        config.pluginmanager.register(BenchmarkJson(book, left_out), "inductor-templates-benchmark")


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


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if CASE_KEY in item.stash:
        release_after(item, nextitem, _session(item.config).triples)


def pytest_report_header(config: pytest.Config) -> list[str]:
    if SESSION_KEY in config.stash:
        return config.stash[SESSION_KEY].header_lines()
    return ["inductor-templates: template default (no --inductor-* option given)"]


@pytest.fixture
def inductor_selection(request: pytest.FixtureRequest) -> Any:
    """The compile selection (template, mode or options) of this test's matrix column."""
    return getattr(request, "param", _session(request.config).columns[0])


@pytest.fixture
def inductor_device(request: pytest.FixtureRequest) -> Any:
    """The ``torch.device`` of this test's matrix row (``--inductor-devices``)."""
    import torch

    return getattr(request, "param", torch.device(_session(request.config).devices[0].name))


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
    device time from CUDA events in extra_info. Eager is timed the same way in the same test; the
    speedup (eager median / compiled median) goes into extra_info. A failed check fails the test.
    """
    yield from fixtures.benchmarks(_session(request.config), request, benchmark)


@pytest.fixture
def inductor_sample(request: pytest.FixtureRequest) -> PreparedTriple:
    """The prepared (sample, template, device) triple of a sample item, shared by the triple's items."""
    return _session(request.config).triples.get(request.node.stash[CASE_KEY])
