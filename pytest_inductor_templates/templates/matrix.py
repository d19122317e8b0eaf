"""The template x device matrix: which devices are selected, and whether a (column, device) case can run."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from ..machine import CPU, Device
from ..settings import Sourced
from .selection import Selection

_CUDA_INDEX = re.compile(r"cuda:(\d+)")


def _cuda(index: int, visible: list[Device]) -> Device:
    name = f"cuda:{index}"
    return next((d for d in visible if d.name == name), Device(name, "cuda"))


def select_devices(raw: Sourced[str] | None, visible: list[Device]) -> list[Device]:
    """The matrix's devices: every CUDA device, else the CPU, unless the option names others."""
    cuda = [d for d in visible if d.type == "cuda"]
    if raw is None:
        return cuda or [CPU]
    chosen: list[Device] = []
    for token in (t.strip() for t in str(raw.value).split(",")):
        if token == "all":
            chosen += visible
        elif token == "cpu":
            chosen.append(CPU)
        elif token == "cuda":
            chosen += cuda or [_cuda(0, visible)]
        elif match := _CUDA_INDEX.fullmatch(token):
            chosen.append(_cuda(int(match[1]), visible))
        else:
            raise pytest.UsageError(
                f"{raw.origin}: unknown device {token!r}; use cpu, cuda, cuda:N, a comma list or all"
            )
    return list({d.name: d for d in chosen}.values())


def device_problem(device: Device, visible: list[Device]) -> str | None:
    """Why ``device`` cannot be used on this machine, or None."""
    if any(d.name == device.name for d in visible):
        return None
    count = sum(d.type == "cuda" for d in visible)
    if count == 0:
        return f"{device} is not available: this machine has no CUDA device"
    return f"{device} is not available: this machine has {count} CUDA device(s)"


@dataclass(frozen=True)
class Case:
    """One (column, device) cell of the matrix."""

    selection: Selection
    device: Device

    @property
    def id(self) -> str:
        return f"{self.selection.label}-{self.device.name}"

    def problem(self, visible: list[Device]) -> str | None:
        """Why this case cannot run here (the reason items are skipped with), or None."""
        reason = device_problem(self.device, visible)
        template = self.selection.template
        if reason or template is None:
            return reason
        unavailable = template.unavailable_reason() or template.device_problem(self.device)
        unavailable = unavailable or template.missing_packages()
        return f"template {template.name!r} is unavailable on {self.device}: {unavailable}" if unavailable else None

    @property
    def fallback_note(self) -> str | None:
        template = self.selection.template
        return template.fallback_note(self.device) if template else None
