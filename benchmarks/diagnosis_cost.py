"""What one diagnosis costs: wall time, draws, eager runs and compiles, per sample, with a fault planted.

    python benchmarks/diagnosis_cost.py [CORPUS] [--device cpu|cuda] [--plant relu] [--samples ...]
                                        [--package-root DIR] [--tf32 off] [--budget 600] [--out DIR]

Each sample runs in a real pytest run of the plugin (`--inductor-diagnose`, one failing check item, the
`default` template) with the plant in a `sitecustomize.py` on `PYTHONPATH` (tests/diagnose_plants.py), as a broken
installed compiler would be. The same sitecustomize counts, in the diagnosis's processes only (the child and its
helpers), every call of the sample's `make_model` / `make_inputs` (draws), every call of an eager model built
from them (eager runs: the item's model called outside Dynamo, float64 runs included), and every Inductor graph
lowered (compiles). The counts come from torch and the sample classes, not from the plugin's own counters, so a
run with `--package-root` pointing at an older checkout (a worktree of b26ac35) gives the "before" figures.
Each repro is run with the plant (expected exit 1) and without it (expected 0).

Samples: `builtin/conv_bn`, `builtin/graph_break` and, with CORPUS, `torchvision/squeezenet1_0` (all call relu).
`--samples` takes `builtin/NAME` or a path relative to CORPUS. Inductor's caches: every diagnosis compiles from a
fresh Inductor cache of its own; the items compile with a cache folder of the run's own under --out (a planted
lowering's code must not land in the cache other runs read: it did, and the built-ins then failed there).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from diagnose_plants import PLANT_ENV, SITECUSTOMIZE  # noqa: E402

COUNT_ENV = "INDUCTOR_COUNT_FILE"
COUNTING = """

import sys as _sys

_COUNT_FILE = os.environ.get("INDUCTOR_COUNT_FILE")
_IN_DIAGNOSIS = _sys.argv[:1] == ["-c"] and "inductor-diagnose-" in (_sys.argv[-1] if len(_sys.argv) > 1 else "")


def _count(what):  # what, the process, when (so a run cut short still says where its time went)
    import time

    with open(_COUNT_FILE, "a") as _file:
        _file.write(f"{what} {os.getpid()} {time.time():.2f}\\n")


def count_eager_call(module, args):  # a forward pre-hook (module level: a saved model pickles it by name)
    import torch

    if not torch.compiler.is_compiling():
        _count("eager_run")


def _count_lowerings(graph_module):  # each Inductor graph lowering is a compile
    init = graph_module.GraphLowering.__init__

    def counted_init(self, *args, **kwargs):
        _count("compile")
        init(self, *args, **kwargs)

    graph_module.GraphLowering.__init__ = counted_init


class _CountAfterImport:  # wraps Inductor's GraphLowering as its module is imported, so that counting imports no
    # torch at the interpreter's start: the diagnosis's child then starts its helpers as early as it does unplanted
    def find_spec(self, name, path=None, target=None):
        if name != "torch._inductor.graph":
            return None
        import importlib.machinery

        _sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:  # not found: the import fails as it would have
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_count(module):
            exec_module(module)
            _count_lowerings(module)

        spec.loader.exec_module = exec_then_count
        return spec


if _COUNT_FILE and _IN_DIAGNOSIS:
    _count("process_start")
    _sys.meta_path.insert(0, _CountAfterImport())

    from pytest_inductor_templates.samples import builtin as _builtin, graphnet as _graphnet

    for _cls in (_builtin.BuiltinSample, _graphnet.GraphNetSample):
        def _wrap(cls=_cls):
            make_model, make_inputs = cls.make_model, cls.make_inputs

            def counted_model(self, device):
                import torch

                model = make_model(self, device)
                if str(device) == "meta":  # a skeleton for saved tensors: nothing drawn
                    return model
                _count("draw_model")
                if isinstance(model, torch.nn.Module):
                    model.register_forward_pre_hook(count_eager_call)
                return model

            def counted_inputs(self, device):
                _count("draw_inputs")
                return make_inputs(self, device)

            cls.make_model, cls.make_inputs = counted_model, counted_inputs
            if "make_model_and_inputs" in vars(cls):  # one pass over both draws (GraphNet's)
                both = cls.make_model_and_inputs

                def counted_both(self, device):
                    import torch

                    model, inputs = both(self, device)
                    _count("draw_inputs")
                    _count("draw_model")
                    if isinstance(model, torch.nn.Module):
                        model.register_forward_pre_hook(count_eager_call)
                    return model, inputs

                cls.make_model_and_inputs = counted_both

        _wrap()
"""

DEFAULT_SAMPLES = ("builtin/conv_bn", "builtin/graph_break")
CORPUS_SAMPLES = ("torchvision/squeezenet1_0",)


def plant_folder(out: Path) -> Path:
    folder = out / "plant"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE + COUNTING)
    return folder


def diagnose(sample: str, corpus: Path | None, args: argparse.Namespace, plant: Path, work: Path) -> dict:
    """One pytest run diagnosing ``sample``'s failing check item; its record, counts and repro exits."""
    work.mkdir(parents=True, exist_ok=True)
    counts = work / "counts.txt"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(plant), str(args.package_root)])
    env[PLANT_ENV], env[COUNT_ENV] = args.plant, str(counts)
    # planted code is compiled code: it goes to a cache of the run's own, never to the one every other run reads
    env["TORCHINDUCTOR_CACHE_DIR"] = str(plant.parent / "inductor-cache")
    if args.device == "cpu":
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")  # as the diagnosis's own child sets it on the CPU
    if sample.startswith("builtin/"):
        where = ["--inductor-samples=builtin", "-k", f"{sample.split('/', 1)[1]} and check"]
    else:
        assert corpus is not None, f"{sample}: a corpus sample needs CORPUS"
        where = [f"--inductor-samples={corpus / sample}", "-k", "check"]
    command = [
        sys.executable, "-m", "pytest", *where, "--inductor-template=default", f"--inductor-devices={args.device}",
        "--inductor-diagnose", f"--inductor-diagnose-budget={args.budget}", "--inductor-results=run.jsonl",
        "--inductor-repro-dir=repros", "--benchmark-disable", "-p", "no:randomly", "-p", "no:cacheprovider", "-q",
        *([f"--inductor-tf32={args.tf32}"] if args.tf32 else []),
        *([f"--inductor-diagnose-processes={args.processes}"] if args.processes else []),
    ]  # fmt: skip
    start = time.monotonic()
    if not args.collect:
        # a group of its own, killed whole when this script is interrupted or terminated (a step's limit); its
        # sample workers and the diagnosis child then end with their parents (before, opus-mt's diagnosis went on
        # beside the next sample's run)
        with subprocess.Popen(
            command, cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        ) as process:  # fmt: skip
            try:
                output, _ = process.communicate()
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                raise
        (work / "pytest.txt").write_text(output)
        (work / "run_seconds.txt").write_text(f"{time.monotonic() - start:.1f}")
    return collect(sample, work, env, args.plant, plant)


def collect(sample: str, work: Path, env: dict[str, str], plants: str, plant: Path) -> dict:
    """What the run in ``work`` left: the failing check item's record, the counts, the repro's exit codes."""
    records = []
    if (work / "run.jsonl").exists():
        records = [
            json.loads(line)["record"] for line in (work / "run.jsonl").read_text().splitlines() if '"record"' in line
        ]
    record = next((r for r in records if r.get("kind") == "check" and r.get("template") != "eager"), {})
    tally: dict[str, int] = {}
    counts = work / "counts.txt"
    for line in counts.read_text().splitlines() if counts.exists() else []:
        what = line.split()[0]
        tally[what] = tally.get(what, 0) + 1
    exits = None
    if record.get("repro"):
        repro = Path(record["repro"])
        repro = repro if repro.is_absolute() else work / repro
        exits = []
        for planted in (plants, ""):
            plain = dict(env, PYTHONPATH=str(plant), **{PLANT_ENV: planted})
            plain.pop(COUNT_ENV)
            exits.append(subprocess.run([sys.executable, str(repro)], env=plain, capture_output=True).returncode)
    wall = float((work / "run_seconds.txt").read_text()) if (work / "run_seconds.txt").exists() else float("nan")
    return {"sample": sample, "record": record, "tally": tally, "exits": exits, "run_seconds": wall}


def row(result: dict) -> str:
    record, tally = result["record"], result["tally"]
    mine = record.get("diagnosis_compiles")
    own = f" (record: {record.get('diagnosis_draws')}/{record.get('diagnosis_eager_runs')}/{mine})" if mine else ""
    return (
        f"{result['sample']}: diagnosis {record.get('diagnosis_seconds')} s "
        f"(pytest run {result['run_seconds']:.0f} s); "
        f"draws {tally.get('draw_model', 0)}+{tally.get('draw_inputs', 0)} (model+inputs), eager runs "
        f"{tally.get('eager_run', 0)}, compiles {tally.get('compile', 0)}{own}; repro exits {result['exits']}\n"
        f"    {record.get('diagnosis')}"
    )


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")  # a terminate ends the pytest run's group as an interrupt does


def main() -> int:
    signal.signal(signal.SIGTERM, _terminated)
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("corpus", nargs="?", type=Path, help="a GraphNet corpus (adds torchvision/squeezenet1_0)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--plant", default="relu", help="the plants of tests/diagnose_plants.py, comma-separated")
    parser.add_argument("--samples", nargs="*", help="builtin/NAME or a path under CORPUS")
    parser.add_argument("--package-root", type=Path, default=ROOT, help="the checkout whose plugin runs")
    parser.add_argument("--tf32", choices=("on", "off"), help="--inductor-tf32 for every run (off on a GPU)")
    parser.add_argument("--budget", type=float, default=600.0, help="--inductor-diagnose-budget")
    parser.add_argument("--out", type=Path, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--collect", action="store_true", help="only read what earlier runs left in --out")
    parser.add_argument("--processes", type=int, help="--inductor-diagnose-processes (default: the plugin's)")
    parser.add_argument("--expect-stage", help="the proof: each diagnosis's stage starts so (inductor / lowerings)")
    parser.add_argument("--expect-op", help="the proof: its first diverging op starts so, with a model.py line")
    parser.add_argument("--expect-kind", help="the proof: numerics or miscompile")
    parser.add_argument("--max-seconds", type=float, help="the proof: each diagnosis took at most this")
    args = parser.parse_args()
    samples = args.samples or [*DEFAULT_SAMPLES, *(CORPUS_SAMPLES if args.corpus else ())]
    out = args.out or Path(tempfile.mkdtemp(prefix="diagnosis-cost-"))
    plant = plant_folder(out)
    commit = subprocess.run(
        ["git", "-C", str(args.package_root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"diagnosis_cost: plugin at {args.package_root} ({commit}), device {args.device}, plant {args.plant}")
    results = []
    corpus = args.corpus.resolve() if args.corpus else None  # the runs' working folders are elsewhere
    for sample in samples:
        result = diagnose(sample, corpus, args, plant, out / sample.replace("/", "_"))
        results.append(result)
        print(row(result), flush=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    print(f"diagnosis_cost: runs in {out}")
    if not any((args.expect_stage, args.expect_op, args.expect_kind, args.max_seconds)):
        return 0
    failed = [f"{r['sample']}: {why}" for r in results for why in unexpected(r, args)]
    for line in failed:
        print(f"proof: {line}")
    print(f"proof: {len(results) - len({f.split(':')[0] for f in failed})} of {len(results)} samples as expected")
    return 1 if failed else 0


def unexpected(result: dict, args: argparse.Namespace) -> list[str]:
    """What in one diagnosis is not what the proof expects."""
    record, found = result["record"], []
    if args.expect_stage and not (record.get("diagnosis_stage") or "").startswith(args.expect_stage):
        found.append(f"stage {record.get('diagnosis_stage')!r}")
    op = record.get("diagnosis_op") or ""
    if args.expect_op and not (op.startswith(args.expect_op) and "model.py:" in op):
        found.append(f"op {op!r}")
    if args.expect_kind and record.get("diagnosis_kind") != args.expect_kind:
        found.append(f"kind {record.get('diagnosis_kind')!r}")
    seconds = record.get("diagnosis_seconds")
    partial = "partial" in (record.get("diagnosis") or "")
    if args.max_seconds and (seconds is None or seconds > args.max_seconds or partial):
        found.append(f"{seconds} s (at most {args.max_seconds:g}, complete)")
    if result["exits"] != [1, 0]:
        found.append(f"repro exits {result['exits']} (expected [1, 0]: with the plant, without)")
    return found


if __name__ == "__main__":
    sys.exit(main())
