"""Describing what went wrong in one line: an exception, and the compile stage it came from."""

from __future__ import annotations


def first_line(error: BaseException) -> str:
    """``TypeName: the first non-empty line of the message``."""
    text = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


_STAGES = (
    ("LoweringException", "lowering"),
    ("CppCompileError", "C++ compilation"),
    ("CompilationError", "Triton compilation"),
    ("NoValidChoicesError", "autotuning"),
)


def compile_stage(error: BaseException, backend: str) -> str:
    """Where compilation failed: Dynamo's tracing, or the backend (and the backend's step when known)."""
    seen: BaseException | None = error
    while seen is not None:
        for class_name, stage in _STAGES:
            if type(seen).__name__ == class_name:
                return f"backend {backend!r}, {stage}"
        seen = seen.__cause__ or seen.__context__
    return f"backend {backend!r}"


def innermost(error: BaseException) -> BaseException:
    """The backend's own exception inside Dynamo's BackendCompilerFailed wrapper."""
    return getattr(error, "inner_exception", None) or error
