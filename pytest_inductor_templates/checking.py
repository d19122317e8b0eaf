"""Compiled-versus-eager comparison of nested outputs."""

from __future__ import annotations

from typing import Any

from .outputs import leaves
from .samples.base import Tolerance


class OutputMismatch(AssertionError):
    """Compiled outputs differ from eager; the message names the leaf."""


def compare_outputs(actual: Any, expected: Any, tolerance: Tolerance | None = None) -> None:
    """Raise OutputMismatch unless ``actual`` matches ``expected`` leaf by leaf."""
    import torch

    got, want = leaves(actual), leaves(expected)
    if [p for p, _ in got] != [p for p, _ in want] or type(actual) is not type(expected):
        raise OutputMismatch(
            f"output structure differs: compiled {type(actual).__name__} with leaves {[p for p, _ in got]}, "
            f"eager {type(expected).__name__} with leaves {[p for p, _ in want]}"
        )
    for (path, a), (_, e) in zip(got, want, strict=True):
        if isinstance(e, torch.Tensor):
            kwargs = {"rtol": tolerance.rtol, "atol": tolerance.atol} if tolerance else {}
            try:
                torch.testing.assert_close(a, e, equal_nan=True, **kwargs)
            except AssertionError as error:
                raise OutputMismatch(f"{path}: {error}") from None
        elif a != e:
            raise OutputMismatch(f"{path}: compiled {a!r} != eager {e!r}")
