"""Hooks that users implement in ``conftest.py``."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec
def pytest_inductor_templates(config: pytest.Config) -> list[Any]:
    """Return user templates: ``Template`` objects or tables with a ``name``.

    A table takes the fields of a ``[templates.NAME]`` table of the templates file::

        def pytest_inductor_templates(config):
            return [{"name": "autotune_graphs", "extends": "max_autotune",
                     "settings": {"triton.cudagraphs": True},
                     "description": "max_autotune plus CUDA graphs"}]
    """
