"""The plugin's fixtures. Each one is a docstring and a call into the module that does its work."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ..check.result import CheckResult
from . import user_tests
from .sample_items import CASE_KEY
from .session import plugin_state, torch_device


@pytest.fixture
def inductor_selection(request: pytest.FixtureRequest) -> Any:
    """The compile selection (template, mode or options) of this test's matrix column."""
    return getattr(request, "param", plugin_state(request.config).session.columns[0])


@pytest.fixture
def inductor_device(request: pytest.FixtureRequest) -> Any:
    """The ``torch.device`` of this test's matrix row (``--inductor-devices``)."""
    return request.param if hasattr(request, "param") else torch_device(plugin_state(request.config).session.devices[0])


@pytest.fixture
def compiled_model(request: pytest.FixtureRequest, inductor_selection: Any) -> Iterator[Any]:
    """A factory: ``compiled_model(module_or_function)`` compiles it with this test's template.

    Skips when the template cannot run on the test's device. Dynamo is reset and the
    Inductor and Dynamo configs are restored around the test.
    """
    yield from user_tests.compiled_models(plugin_state(request.config).session, request)


@pytest.fixture
def inductor_check(request: pytest.FixtureRequest, inductor_selection: Any) -> Iterator[Callable[..., CheckResult]]:
    """``inductor_check(model, *args, **kwargs)``: compile with this test's template, compare with eager.

    Eager runs twice (a disagreement skips the test as eager_nondeterministic); the compiled model
    runs on the inputs and on a second input, and a mismatch fails the test with every differing
    output named. Tolerances: ``@pytest.mark.inductor_tolerance``, else ``--inductor-tolerance``,
    else torch.testing's per-dtype defaults with atol scaled to each output; an output beyond its tolerance
    gets the float64 second opinion.
    """
    yield from user_tests.checks(plugin_state(request.config).session, request)


@pytest.fixture
def inductor_benchmark(
    request: pytest.FixtureRequest, inductor_selection: Any, benchmark: Any
) -> Iterator[Callable[..., CheckResult]]:
    """``inductor_benchmark(model, *args, **kwargs)``: check it compiled against eager, then time both.

    The compiled model is timed after an untimed warm-up, as pytest-benchmark times it, and its rounds go into
    the ``benchmark`` fixture (so its JSON, storage and comparison options apply); on CUDA with a synchronizing
    timer, and device time from CUDA events in extra_info. Then eager and compiled are timed in pairs, round by
    round; the speedup (the median of the per-round ratios) and its 95% interval go into extra_info. A failed
    check fails the test.
    """
    yield from user_tests.benchmarks(plugin_state(request.config).session, request, benchmark)


@pytest.fixture
def inductor_sample(request: pytest.FixtureRequest) -> Any:
    """The (sample, template, device) triple of a sample item, shared by the triple's items: built in the
    worker process (or, with --inductor-isolation=none, in this one) on first use."""
    return plugin_state(request.config).session.triples.get(request.node.stash[CASE_KEY])
