"""What a new user meets first on a CPU machine: the header without ``-n``, a run where nothing could run, what a
``default``-only run says of its effect and its skips, and the plot's labels inside the image."""

from __future__ import annotations

import pytest

from conftest import QUIET


def test_without_xdist_the_header_says_nothing_of_its_workers(pytester: pytest.Pytester) -> None:
    """No ``-n``: no xdist worker times anything, so no line says ``0 workers share the CPU``."""
    result = pytester.runpytest_inprocess("--inductor-samples", "-k", "launch_bound", "--co", *QUIET)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert "inductor-templates: devices: cpu" in result.stdout.str()  # the plugin's header is there
    assert "pytest-xdist" not in "\n".join(line for line in result.stdout.lines if "inductor-templates:" in line)
