"""Writes GraphNet-format sample directories for tests (the format docs/guide.md describes)."""

from __future__ import annotations

import json
from pathlib import Path

GOOD_MODEL = """
import torch
from torch import device


class GraphModule(torch.nn.Module):
    def forward(self, L_x_: torch.Tensor, L_self_modules_fc_parameters_weight_: torch.nn.parameter.Parameter,
                L_self_modules_fc_parameters_bias_: torch.nn.parameter.Parameter, L_ids_: torch.Tensor,
                L_scale_: torch.Tensor, L_mask_: torch.Tensor):
        linear = torch._C._nn.linear(L_x_, L_self_modules_fc_parameters_weight_, L_self_modules_fc_parameters_bias_)
        offsets = torch.arange(4, device=device(type="cuda", index=0))
        picked = linear[:, L_ids_.to(device(type="cuda", index=0)) % 8] + offsets.sum()
        ones = torch.ones(1, device="cuda:0").to(torch.device("cuda", 0))
        masked = torch.where(L_mask_, picked * L_scale_, ones)
        return (masked.relu(), linear.sum(dim=-1))
"""

GOOD_META = """
class Program_weight_tensor_meta_L_x_:
    name = "L_x_"
    shape = [4, 16]
    dtype = "torch.float32"
    device = "cuda:0"
    mean = 0.5
    std = 1.0
    data = None

class Program_weight_tensor_meta_L_self_modules_fc_parameters_weight_:
    name = "L_self_modules_fc_parameters_weight_"
    shape = [8, 16]
    dtype = "torch.float32"
    device = "cuda:0"
    mean = 0.0
    std = 0.2
    data = None

class Program_weight_tensor_meta_L_self_modules_fc_parameters_bias_:
    name = "L_self_modules_fc_parameters_bias_"
    shape = [8]
    dtype = "torch.float32"
    device = "cuda:0"
    mean = 0.1
    std = 0.0
    data = None

class Program_weight_tensor_meta_L_ids_:
    name = "L_ids_"
    shape = [6]
    dtype = "torch.int64"
    device = "cuda:0"
    mean = None
    std = None
    min_val = 3
    max_val = 7

class Program_weight_tensor_meta_L_scale_:
    name = "L_scale_"
    shape = [6]
    dtype = "torch.float32"
    device = "cuda:0"
    mean = 1.0
    std = 0.0
    data = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]

class Program_weight_tensor_meta_L_mask_:
    name = "L_mask_"
    shape = [4, 6]
    dtype = "torch.bool"
    device = "cuda:0"
    mean = None
    std = None
    data = None
"""

# Each broken sample, and the reason its items must fail with.
BROKEN = {
    "broken/syntax_error": (
        {"model.py": "class GraphModule(torch.nn.Module)\n    pass\n"},
        "corpus/broken/syntax_error/model.py:1: syntax error: expected ':'",
    ),
    "broken/no_weight_meta": ({"weight_meta.py": None}, "missing weight_meta.py"),
    "broken/unknown_dtype": (
        {"weight_meta.py": GOOD_META.replace('"torch.bool"', '"torch.boolean"')},
        "tensor L_mask_: unknown dtype 'torch.boolean'",
    ),
    "broken/signature_mismatch": (
        {"weight_meta.py": GOOD_META.replace('name = "L_mask_"', 'name = "L_mask2_"')},
        "metadata does not match forward: forward takes L_mask_ with no tensor metadata; "
        "metadata names L_mask2_, which forward does not take",
    ),
    "broken/graph_net_json": ({"graph_net.json": '{"framework": "torch",'}, "graph_net.json is not valid JSON"),
    "broken/float_shape": (
        {"weight_meta.py": GOOD_META.replace("shape = [8]", "shape = [8.5]")},
        "weight_meta.py: Program_weight_tensor_meta_L_self_modules_fc_parameters_bias_.shape must be a list of "
        "integers >= 0, got 8.5 in",
    ),
}


def tensor_meta(
    name: str,
    shape: list[int],
    dtype: str = "torch.float32",
    device: str = "cpu",
    mean: float | None = 0.0,
    std: float | None = 1.0,
    **extra: object,
) -> str:
    """One tensor's class of a ``weight_meta.py`` / ``input_meta.py`` (``extra``: ``data``, ``min_val``, ...)."""
    fields = {"name": name, "shape": shape, "dtype": dtype, "device": device, "mean": mean, "std": std}
    fields.update({"data": None} if not extra else extra)
    body = "".join(f"    {key} = {json_literal(value)}\n" for key, value in fields.items())
    return f"\nclass Program_weight_tensor_meta_{name}:\n{body}"


def json_literal(value: object) -> str:
    """A Python literal as GraphNet's files write it (``None``, numbers, strings, lists)."""
    return repr(value) if not isinstance(value, str) else json.dumps(value)


def write_sample(directory: Path, files: dict[str, str | None] | None = None) -> Path:
    """A good sample, with ``files`` replacing (or, for None, removing) some of its files."""
    contents: dict[str, str | None] = {
        "model.py": GOOD_MODEL,
        "weight_meta.py": GOOD_META,
        "input_meta.py": "",
        "graph_net.json": json.dumps({"framework": "torch", "num_devices_required": 1}),
        **(files or {}),
    }
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in contents.items():
        if text is not None:
            (directory / name).write_text(text)
    return directory


def write_tree(root: Path, good: tuple[str, ...] = ("vision/tiny", "nlp/tiny")) -> Path:
    """Good samples, then every broken kind, under ``root``."""
    for relative in good:
        write_sample(root / relative)
    for relative, (files, _) in BROKEN.items():
        write_sample(root / relative, files)
    return root


SMALL_META = """
class Program_weight_tensor_meta_L_x_:
    name = "L_x_"
    shape = [4, 8]
    dtype = "torch.float32"
    device = "cpu"
    mean = 0.0
    std = 1.0
    data = None
"""


def fault_model(forward: str = "", init: str = "", top: str = "") -> str:
    """A one-input GraphModule: ``init`` runs in ``__init__``, ``forward`` before it returns ``relu(x) + 1``."""
    return f"""
import ctypes, os, sys, time
import torch
{top}

class GraphModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        {init or "pass"}

    def forward(self, L_x_):
        {forward or "pass"}
        return (torch.relu(L_x_) + 1,)
"""


# Each fault sample: its model.py, and the outcome of its check items under isolation.
FAULTS = {
    "abort": (fault_model(forward="os.abort()"), "crashed"),
    "segfault": (fault_model(forward="ctypes.string_at(0)"), "crashed"),
    "os_exit": (fault_model(forward="os._exit(0)"), "crashed"),
    "sys_exit_init": (fault_model(init="sys.exit(3)"), "crashed"),
    "hang_compile": (fault_model(forward="if torch.compiler.is_compiling(): time.sleep(600)"), "timeout"),
    "hang_forward": (fault_model(forward="time.sleep(600)"), "timeout"),
}


def write_fault_sample(directory: Path, model: str, meta: str = SMALL_META) -> Path:
    """A sample with one small input and the given ``model.py``."""
    return write_sample(directory, {"model.py": model, "weight_meta.py": meta})
