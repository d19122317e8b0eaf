"""The command line of the probes that run each sample in a fresh process of their own (``process_offset.py``,
``reload_bias.py``): ``CORPUS SAMPLE [SAMPLE ...] [--device D]`` with ``$OUT``, and the child's ``--one``."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def child_or_args(one: Callable[[Path, str, str], Any], default_out: str) -> tuple[str, Path, Path, list[str]] | None:
    """In a child (``--one CORPUS SAMPLE DEVICE``): ``one`` run and its JSON printed, then None. Else the device
    (``--device``, default cuda), the corpus, the output folder ($OUT, else ``default_out``; made) and the samples."""
    if sys.argv[1] == "--one":
        print(json.dumps(one(Path(sys.argv[2]), sys.argv[3], sys.argv[4])))
        return None
    args, device = sys.argv[1:], "cuda"
    if "--device" in args:
        at = args.index("--device")
        device = args[at + 1]
        del args[at : at + 2]
    out = Path(os.environ.get("OUT", default_out))
    out.mkdir(parents=True, exist_ok=True)
    return device, Path(args[0]).resolve(), out, args[1:]
