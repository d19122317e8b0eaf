"""Peak memory per item: eager's and compiled's peak CUDA memory of a steady call, and their ratio, in the records,
the tables, the report, compare and its memory gate. Off CUDA nothing is measured: the CPU has no allocator peak.

The real runs here are on the CPU; the peaks a GPU would measure are written into copies of their saved records
(the one thing that cannot exist on this machine). tests/test_gpu_memory.py measures real peaks on a GPU.
"""

from __future__ import annotations

import io

from pytest_inductor_templates.check.result import CheckResult
from pytest_inductor_templates.engine.cell import CellResult, Verdict
from pytest_inductor_templates.machine import CPU
from pytest_inductor_templates.outcomes import Outcome
from pytest_inductor_templates.record import ItemRecord
from pytest_inductor_templates.report.records import write_cell
from pytest_inductor_templates.timing.memory_peak import PeakMemory, peak_memory
from pytest_inductor_templates.worker import protocol

MiB = 1024 * 1024


def test_nothing_is_measured_off_cuda() -> None:
    """On the CPU neither model is even called for a peak: there is none to read."""
    calls: list[str] = []
    assert peak_memory(lambda: calls.append("eager"), lambda: calls.append("compiled"), CPU) is None
    assert calls == []


def test_the_peaks_cross_the_worker_pipe_into_the_record() -> None:
    """A cell's peaks travel in the worker's reply (a pickle) and land in the bench item's record, in MiB, with
    eager / compiled as the ratio; a failed item keeps none."""
    peak = PeakMemory(eager_bytes=300 * MiB, compiled_bytes=240 * MiB + MiB // 2)
    stream = io.BytesIO()
    protocol.write_message(stream, protocol.Ran(CellResult(Verdict(CheckResult(Outcome.PASS)), peak=peak)))
    stream.seek(0)
    reply = protocol.read_message(stream)
    assert isinstance(reply, protocol.Ran) and reply.cell.peak == peak
    record = ItemRecord("builtin/x", "default", "cuda:0", "bench")
    write_cell(record, reply.cell)
    assert (record.eager_peak_mib, record.compiled_peak_mib) == (300.0, 240.5)
    assert record.memory_ratio == 300 / 240.5
    assert {"eager_peak_mib", "compiled_peak_mib", "memory_ratio"} <= set(record.to_dict())
    record.outcome = Outcome.RUNTIME_FAIL  # failed after its cell passed (a teardown, say)
    record.drop_speedup()
    assert not {"eager_peak_mib", "compiled_peak_mib", "memory_ratio"} & set(record.to_dict())
    assert PeakMemory(1, 0).ratio is None
