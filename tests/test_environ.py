"""One environment variable set for a block (``environ.variable_set``)."""

from __future__ import annotations

import os

import pytest

from pytest_inductor_templates.environ import variable_set


@pytest.mark.parametrize("before", [None, "earlier"])
def test_the_variable_is_restored_and_what_the_block_set_stays(
    monkeypatch: pytest.MonkeyPatch, before: str | None
) -> None:
    if before is None:
        monkeypatch.delenv("PIT_SCOPED", raising=False)
    else:
        monkeypatch.setenv("PIT_SCOPED", before)
    monkeypatch.delenv("PIT_SET_INSIDE", raising=False)
    with variable_set("PIT_SCOPED", "1"):
        assert os.environ["PIT_SCOPED"] == "1"
        os.environ["PIT_SET_INSIDE"] = "kept"  # as an import inside the block may do
    assert os.environ.get("PIT_SCOPED") == before
    assert os.environ.get("PIT_SET_INSIDE") == "kept"
