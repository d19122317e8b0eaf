"""The session's conftest.py files imported in a fresh process of its own (the sample worker, a diagnosis), so that
the backends and templates they register at import exist there too."""

from __future__ import annotations

import importlib.util
import sys


def import_conftests(conftests: list[tuple[str, str]]) -> list[str]:
    """Import each (module name, file) not yet imported, in order; returns a line for each that failed (its file
    and its error)."""
    warnings = []
    for name, path in conftests:
        if name in sys.modules:
            continue
        try:
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except Exception as error:
            sys.modules.pop(name, None)
            text = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
            warnings.append(f"{path}: {type(error).__name__}: {text}" if text else f"{path}: {type(error).__name__}")
    return warnings
