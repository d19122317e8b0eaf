"""pytest hooks: options, validation, header, the template list and the compiled_model fixture."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import hookspec, options
from .session import SESSION_KEY, CompiledModelFactory, InductorSession


def pytest_addoption(parser: pytest.Parser) -> None:
    options.register(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    if not config.getoption("inductor_list_templates"):
        return None
    import torch

    from .environment import visible_devices
    from .listing import listing
    from .session import build_registry

    print(listing(build_registry(config), visible_devices(), torch.__version__))
    return 0


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    if options.any_selected(config):  # validate before any test runs
        config.stash[SESSION_KEY] = InductorSession.from_config(config)


def _session(config: pytest.Config) -> InductorSession:
    if SESSION_KEY not in config.stash:
        config.stash[SESSION_KEY] = InductorSession.from_config(config)
    return config.stash[SESSION_KEY]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any("compiled_model" in getattr(item, "fixturenames", ()) for item in items):
        _session(config)  # user templates from conftest are validated before any test runs


def pytest_report_header(config: pytest.Config) -> list[str]:
    if SESSION_KEY in config.stash:
        return config.stash[SESSION_KEY].header_lines()
    return ["inductor-templates: template default (no --inductor-* option given)"]


@pytest.fixture
def compiled_model(request: pytest.FixtureRequest) -> Iterator[CompiledModelFactory]:
    """A factory: ``compiled_model(module_or_function)`` compiles it with the session's selection.

    Skips when the selected template cannot run here. Dynamo is reset and the
    Inductor and Dynamo configs are restored around the test.
    """
    yield from _session(request.config).compiled_models(request)
