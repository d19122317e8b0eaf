"""TF32 on or off for a whole item (``--inductor-tf32``): torch's flags set for the item and restored after it, and an
Inductor cache of the mode's own.

CUDA runs float32 GEMMs and convolutions in TF32 where torch's flags allow it: by default cuDNN's convolutions do
and cuBLAS's GEMMs do not. Both sides of a check run under the same flags, so where eager is the less accurate side,
a small fault of the compiled model hides inside eager's own TF32 error. ``off`` holds float32 to float32 for eager
and compiled alike, ``on`` allows TF32 in both; without the option torch's flags stay as they are.

Two sets of flags say the same thing: the ``allow_tf32`` flags, and since torch 2.9 the ``fp32_precision`` settings
(``ieee`` or ``tf32``; ``none`` inherits from the level above). torch refuses to read a legacy flag that disagrees
with the new settings, so a mode is set through the legacy flags first and then the new settings of each operation
(``cuda.matmul``, ``cudnn.conv``, ``cudnn.rnn``), which leaves every flag readable and in agreement; a torch without
a flag is left without it. Inductor decides TF32 while it compiles and bakes the choice into its kernels, and its
FX graph cache's key covers matmul's precision but not cuDNN's: so each mode compiles into a cache folder of its own
(a ``tf32-on`` or ``tf32-off`` folder under the cache folder in force), lest a kernel compiled in one mode be reused
in the other. Neither torch nor pytest is imported at module level.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..environ import variable_set

TF32_MODES = ("on", "off")
CACHE_VARIABLE = "TORCHINDUCTOR_CACHE_DIR"
LEGACY_FLAGS = ("cuda.matmul.allow_tf32", "cudnn.allow_tf32")  # under torch.backends
PRECISION_SETTINGS = ("cuda.matmul.fp32_precision", "cudnn.conv.fp32_precision", "cudnn.rnn.fp32_precision")
PARENT_SETTINGS = ("fp32_precision", "cudnn.fp32_precision")  # not set by a mode: their children are, explicitly
UNREADABLE = object()  # a flag torch refuses to read (a legacy flag at odds with the new settings)
ABSENT = object()  # a flag this torch does not have


def _owner(path: str) -> tuple[Any, str]:
    import torch.backends

    *parents, name = path.split(".")
    owner: Any = torch.backends
    for part in parents:
        owner = getattr(owner, part)
    return owner, name


def read_flag(path: str) -> Any:
    """The value of ``torch.backends.<path>``; ``ABSENT`` where this torch lacks it, ``UNREADABLE`` where it refuses
    to read it."""
    try:
        owner, name = _owner(path)
    except AttributeError:
        return ABSENT
    try:
        return getattr(owner, name)
    except AttributeError:
        return ABSENT
    except RuntimeError:  # "you have used mix of the legacy and new APIs"
        return UNREADABLE


def _write(path: str, value: Any) -> None:
    owner, name = _owner(path)
    setattr(owner, name, value)


def _matmul_precision() -> Any:
    import torch

    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return UNREADABLE


def snapshot() -> dict[str, Any]:
    """Every flag the mode touches or depends on, as it is now (``float32_matmul_precision`` included: a legacy
    setter moves it)."""
    flags = {path: read_flag(path) for path in (*LEGACY_FLAGS, *PARENT_SETTINGS, *PRECISION_SETTINGS)}
    return {**flags, "float32_matmul_precision": _matmul_precision()}


def restore(before: dict[str, Any]) -> None:
    """Put back what ``snapshot`` read: the legacy flags and torch's float32 matmul precision first, then the
    ``fp32_precision`` settings, parents before children (setting a parent sets its children)."""
    import torch

    for path in LEGACY_FLAGS:
        if before[path] not in (ABSENT, UNREADABLE):
            _write(path, before[path])
    if before["float32_matmul_precision"] is not UNREADABLE:
        torch.set_float32_matmul_precision(before["float32_matmul_precision"])
    for path in (*PARENT_SETTINGS, *PRECISION_SETTINGS):
        if before[path] not in (ABSENT, UNREADABLE) and read_flag(path) != before[path]:
            _write(path, before[path])


def set_mode(mode: str) -> None:
    """TF32 allowed (``on``) or not (``off``) in cuBLAS's float32 GEMMs and cuDNN's convolutions and RNNs."""
    if mode not in TF32_MODES:
        raise ValueError(f"TF32 mode {mode!r}: expected on or off")
    allowed = mode == "on"
    for path in LEGACY_FLAGS:
        if read_flag(path) is not ABSENT:
            _write(path, allowed)
    for path in PRECISION_SETTINGS:
        if read_flag(path) is not ABSENT:
            _write(path, "tf32" if allowed else "ieee")


def cache_dir_for(mode: str) -> str:
    """The Inductor cache folder for ``mode``: a folder of its own under the one in force (TORCHINDUCTOR_CACHE_DIR,
    else Inductor's default), read without creating anything."""
    base = os.environ.get(CACHE_VARIABLE)
    if base is None:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        base = default_cache_dir()
    return os.path.join(os.path.abspath(base), f"tf32-{mode}")


@contextmanager
def _cache_dir(directory: str) -> Iterator[None]:
    """TORCHINDUCTOR_CACHE_DIR pointed at ``directory`` for the block, Inductor's in-memory caches cleared on the way
    in and out (they hold what was read from the other folder), the variable restored after (unset if it was)."""
    from .cache import clear_in_memory

    with variable_set(CACHE_VARIABLE, directory):
        try:
            clear_in_memory()
            yield
        finally:
            clear_in_memory()


@contextmanager
def tf32_scope(mode: str | None) -> Iterator[None]:
    """For the block (one whole item: compile, check and timing, eager and compiled alike): TF32 ``on`` or ``off``
    and that mode's own Inductor cache; torch's flags and the cache folder as they were after it, also when it raises.
    ``None`` (the option not given) changes nothing."""
    if mode is None:
        yield
        return
    if mode not in TF32_MODES:
        raise ValueError(f"TF32 mode {mode!r}: expected on or off")
    before = snapshot()
    try:
        with _cache_dir(cache_dir_for(mode)):
            set_mode(mode)
            yield
    finally:
        restore(before)
