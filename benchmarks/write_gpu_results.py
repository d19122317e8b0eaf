"""Write docs/gpu-results.md from the GPU checks' logs: environment, commands, the plugin's own report.

Usage: python benchmarks/write_gpu_results.py LOG_DIR [LOG_DIR ...] > docs/gpu-results.md
LOG_DIRs hold what benchmarks/run_gpu_checks.sh wrote: env.txt, gpu_tests.txt and results-*.json shards
(merged with ``pytest-inductor-templates merge``, rendered with ``pytest-inductor-templates report``).
"""

from __future__ import annotations

import datetime
import re
import sys
from pathlib import Path

from pytest_inductor_templates.run_report import as_markdown
from pytest_inductor_templates.runs import from_data, load, merge


def main(directories: list[Path]) -> int:
    shards = sorted(p for d in directories for p in d.glob("results-*.json"))
    if not shards:
        print("no results-*.json shards in " + ", ".join(map(str, directories)), file=sys.stderr)
        return 2
    run = from_data("merged", merge([load(str(p)) for p in shards]))
    env = next((d / "env.txt" for d in directories if (d / "env.txt").exists()), None)
    tests = [d / "gpu_tests.txt" for d in directories if (d / "gpu_tests.txt").exists()]
    machine = run.data.get("machine_info", {})
    print("# pytest-inductor-templates on the H200: every template, every built-in sample\n")
    print(f"Written {datetime.date.today()} from {len(shards)} shard(s): {', '.join(p.name for p in shards)}.\n")
    print(
        f"- GPU: {machine.get('gpu')} (sm {machine.get('gpu_compute_capability')}), driver {machine.get('gpu_driver')}"
    )
    print(f"- torch {machine.get('torch')}, CUDA {machine.get('cuda')}, Triton {machine.get('triton')}")
    if env is not None:
        print(f"- `nvidia-smi` / versions as logged: `{' | '.join(env.read_text().split(chr(10))[:2])}`")
    print("\nCommand (one shard per sample group, `SAMPLES_K` picking the samples):\n")
    print("```bash\nSHARD=a SAMPLES_K='...' bash benchmarks/run_gpu_checks.sh results")
    print(
        "pytest-inductor-templates merge results-*.json -o merged.json && pytest-inductor-templates report merged.json"
    )
    print("```\n")
    print("Each cell: check outcome / effect verdict / speedup over eager (eager median / median, wall time per")
    print("call with a synchronizing timer). A failed item shows its outcome and no speedup.\n")
    print(as_markdown(run))
    demo = [line for f in tests for line in f.read_text().splitlines() if re.search(r"RAW|compiled_model:", line)]
    if demo:
        print("\n## The CUDA-graph overwrite, demonstrated (tests/test_gpu_cudagraphs.py)\n")
        print("```")
        print("\n".join(dict.fromkeys(demo)))
        print("```")
    return 0


if __name__ == "__main__":
    sys.exit(main([Path(p) for p in sys.argv[1:]]))
