"""Write docs/results/gpu-results.md from the GPU checks' logs: environment, commands, the plugin's own report.

Usage: python benchmarks/write_gpu_results.py [--note=TEXT ...] LOG_DIR [LOG_DIR ...] > docs/results/gpu-results.md
LOG_DIRs, oldest first, hold what benchmarks/run_gpu_checks.sh wrote: env.txt, gpu_tests.txt, fidelity.txt,
crosscheck.txt, templates.txt (``pytest --inductor-list-templates`` and an ``all`` run's header) and
results-*.json shards (merged as ``pytest-inductor-templates merge`` does, rendered as ``pytest-inductor-templates
report`` does). A sample that a later shard ran again keeps only the later row; the page says so.
"""

from __future__ import annotations

import datetime
import re
import sys
from pathlib import Path

from pytest_inductor_templates.runs.files import SECTION, Run, from_data, load, merge
from pytest_inductor_templates.runs.markdown import as_markdown

RATIO = re.compile(r"ratio (plugin / \w+ )?\d")


def without_samples(run: Run, samples: set[str]) -> Run:
    """The run without the entries and records of ``samples`` (a later shard re-ran them)."""
    data = dict(run.data)
    data["benchmarks"] = [b for b in data["benchmarks"] if b.get("extra_info", {}).get("sample") not in samples]
    section = dict(data[SECTION])
    section["items"] = [r for r in section["items"] if r.get("sample") not in samples]
    data[SECTION] = section
    return from_data(run.path, data)


def samples_of(run: Run) -> list[str]:
    return list(dict.fromkeys(sample for sample, _, _ in run.cells))


def logs_named(directories: list[Path], name: str) -> list[Path]:
    return [d / name for d in directories if (d / name).exists()]


def print_fenced(heading: str, lines: list[str]) -> None:
    """A heading (with its blank lines) and ``lines`` in a code block; nothing without lines."""
    if lines:
        print(heading)
        print("```")
        print("\n".join(dict.fromkeys(lines)))
        print("```")


def latest_rows(runs: list[Run], shards: list[Path]) -> tuple[list[Run], list[str]]:
    """The shards in the order given; a sample re-run by a later shard keeps only the later shard's row."""
    runs = list(runs)
    notes = []
    for index, run in enumerate(runs):
        samples = set(samples_of(run))
        for earlier in range(index):
            replaced = samples & set(samples_of(runs[earlier]))
            if replaced:
                runs[earlier] = without_samples(runs[earlier], replaced)
                notes.append(
                    f"{', '.join(sorted(replaced))}: the row from {shards[index].name} "
                    f"({run.data.get('datetime', '?')}) replaces the one in {shards[earlier].name}"
                )
    return runs, notes


def main(directories: list[Path], extra_notes: list[str]) -> int:
    shards = [p for d in directories for p in sorted(d.glob("results-*.json"))]
    if not shards:
        print("no results-*.json shards in " + ", ".join(map(str, directories)), file=sys.stderr)
        return 2
    as_run = [load(str(p)) for p in shards]
    runs, notes = latest_rows(as_run, shards)
    notes += extra_notes
    merged, dropped = merge(runs)
    notes += dropped  # the eager items of later shards, as `merge` reports them
    run = from_data("merged", merged)
    env = next(iter(logs_named(directories, "env.txt")), None)
    machine = run.data.get("machine_info", {})
    cpu = machine.get("cpu", {})
    # the table first, then how to read a cell, then how the run went
    print("# pytest-inductor-templates on the H200: every template, every built-in sample\n")
    print(as_markdown(run))
    print("\nEach cell: check outcome / effect verdict / speedup over eager (eager and compiled timed in pairs, round")
    print("by round, with a synchronizing timer: the median of the per-round ratios, ± the half-width of its 95%")
    print("interval, `unstable` where it stayed wider than ±2%). A failed item shows its outcome and no speedup;")
    print("`default` has no verdict (it turns nothing on). A **no effect** cell is a finding, not a failure: its")
    print("reason is listed above (no GEMM for a GEMM template, or autotuning chose another kernel).")
    print("\n## How the run went\n")
    print(f"- Written {datetime.date.today()} from {len(shards)} shard(s): {', '.join(p.name for p in shards)}.")
    print(
        f"- GPU: {machine.get('gpu')} (sm {machine.get('gpu_compute_capability')}), driver {machine.get('gpu_driver')}"
        f"; CPU: {cpu.get('brand_raw', '?')}, {cpu.get('hz_actual_friendly', '?')}, {cpu.get('count', '?')} cores"
    )
    print(f"- torch {machine.get('torch')}, CUDA {machine.get('cuda')}, Triton {machine.get('triton')}")
    if env is not None:
        print(f"- `nvidia-smi` / versions as logged: `{' | '.join(env.read_text().split(chr(10))[:2])}`")
    print("- Most built-ins are small, so per-call CPU overhead decides their speedups on this machine's CPU; the")
    print("  GPU-sized ones (transformer_block, conv_stack, gemm_chain) keep the GPU busy.")
    for note in notes:
        print(f"- {note}")
    print("\nCommands, in the order run (`results` runs with Inductor's FX graph cache off, so every effect comes from")
    print("a real lowering; Triton-kernel and autotune caches may be warm from an earlier `samples` step):\n")
    print("```bash")
    for path, shard in zip(shards, as_run, strict=True):
        samples = [sample.removeprefix("builtin/") for sample in samples_of(shard)]
        name = path.stem.removeprefix("results-")
        print(
            f"SHARD={name} SAMPLES_K='{' or '.join(samples)}' bash benchmarks/run_gpu_checks.sh results"
            f"  # {shard.data.get('datetime', '?')}"
        )
    print("python benchmarks/write_gpu_results.py LOG_DIRS > docs/results/gpu-results.md  # merge, then report")
    print("```")
    left_out = [line for f in logs_named(directories, "templates.txt") for line in f.read_text().splitlines()]
    print_fenced(
        "\nTemplates not run on this machine, from the header of an `--inductor-template=all` run here:\n",
        [line for line in left_out if "all: left out" in line],
    )
    fidelity = logs_named(directories, "fidelity.txt")[-1:]
    print_fenced(
        "\n## Timing fidelity (`python benchmarks/timing_fidelity.py`, the last run)\n",
        [line.rstrip() for f in fidelity for line in f.read_text().splitlines() if RATIO.search(line)],
    )
    crosscheck = logs_named(directories, "crosscheck.txt")[-1:]
    print_fenced(
        "\n## The same speedups by another method (`python benchmarks/speedup_crosscheck.py`)\n\n"
        "Plain `torch.compile` timed with `torch.utils.benchmark.Timer`, no plugin code in the timed path.\n"
        "These samples are small: per-call CPU overhead (guards, wrapper, launches) decides their speedups.\n",
        [line for f in crosscheck for line in f.read_text().splitlines() if line.startswith("builtin/")],
    )
    shown = re.compile(r"RAW|compiled_model:|median wall|passed|failed")
    print_fenced(
        "\n## GPU tests (`pytest tests -m gpu -s`): the CUDA-graph overwrite, the timer waiting for the GPU\n",
        [
            line
            for f in logs_named(directories, "gpu_tests.txt")
            for line in f.read_text().splitlines()
            if shown.search(line)
        ],
    )
    return 0


if __name__ == "__main__":
    arguments = sys.argv[1:]
    notes = [a.removeprefix("--note=") for a in arguments if a.startswith("--note=")]
    sys.exit(main([Path(a) for a in arguments if not a.startswith("--note=")], notes))
