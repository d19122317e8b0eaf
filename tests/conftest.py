"""Shared helpers for the plugin's own tests."""

from __future__ import annotations

import gc
import os
import pickle
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

# In-process pytester runs restore sys.modules afterwards; torch must already be imported
# here, or the second inner run would import its C extension twice.
import _pytest.pytester
import pytest
import torch
import torch._dynamo
import torch._dynamo.backends.registry
import torch._inductor.config
from inner_runs import SERVER_ENVIRONMENT, XDIST_WORKER_VARIABLES, standalone_environment

# torch's, Dynamo's and pytest's objects, imported above, are garbage never: out of the collector's reach, so that
# each collection in a test process (pytest's own at the end of every in-process run among them) walks only what
# was made since (as the warm interpreter's children do: inner_runs.FROZEN)
gc.freeze()

T = TypeVar("T")


class _TorchKeepingSnapshot(_pytest.pytester.SysModulesSnapshot):
    """pytester's snapshot of ``sys.modules`` around an in-process run, keeping the torch and Triton modules the run
    imported: a compile imports Inductor's modules lazily, and those register operator libraries and cache artifact
    types once a process; dropped and imported again by the next in-process compile, they raise ("Only a single
    TORCH_LIBRARY ...", "Artifact of type=autotune already registered")."""

    def __init__(self, preserve: Callable[[str], bool] | None = None) -> None:
        super().__init__(lambda name: name.startswith(("torch", "triton")) or bool(preserve and preserve(name)))


_pytest.pytester.SysModulesSnapshot = _TorchKeepingSnapshot  # type: ignore[misc]  # read by Pytester at each run


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="also run the tests marked slow (left out of CI)")


ISAS_CHECKED = "INDUCTOR_TESTS_VEC_ISAS_CHECKED"


def pytest_configure(config: pytest.Config) -> None:
    _trust_the_cpus_vector_isas()


def _trust_the_cpus_vector_isas() -> None:
    """Inductor checks each vector ISA the CPU claims by building a kernel and loading it in a fresh Python that
    imports torch, in every process that first compiles for the CPU: about 1.3 s of CPU a process, in some 60
    processes of the suite. Checked here once (the xdist controller; its workers inherit the answer): where every
    claimed ISA passed, the session's processes are told so (``TORCHINDUCTOR_VEC_ISA_OK=1``, read at torch's import)
    and pick the same ISA without the check; elsewhere they check as usual."""
    if "TORCHINDUCTOR_VEC_ISA_OK" in os.environ or ISAS_CHECKED in os.environ:
        return
    os.environ[ISAS_CHECKED] = "1"  # once a session, whatever it finds: the xdist workers inherit it
    code = "from torch._inductor.cpu_vec_isa import valid_vec_isa_list as v; print([str(i) for i in v()])"
    trusting = subprocess.Popen(  # its import of torch beside the checks here (the session's start waits for both)
        [sys.executable, "-c", code], env={**os.environ, "TORCHINDUCTOR_VEC_ISA_OK": "1"}, stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    from torch._inductor.cpu_vec_isa import valid_vec_isa_list

    checked = [str(isa) for isa in valid_vec_isa_list()]
    trusted = trusting.communicate()[0].strip()
    if trusting.returncode != 0:
        raise subprocess.CalledProcessError(trusting.returncode, trusting.args)
    if trusted == str(checked):  # the warm interpreter of inner runs starts later, told too
        os.environ["TORCHINDUCTOR_VEC_ISA_OK"] = SERVER_ENVIRONMENT["TORCHINDUCTOR_VEC_ISA_OK"] = "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow"):
        return
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.skip(reason="slow: left out of CI; run with --run-slow"))


# inner runs: short timing, the paired rounds' too (without a least span of 0 a compiled item's paired rounds on the
# CPU go on for up to 2 s while its band is wider than its target: 0.7-2.0 s an item of a built-in run here)
FAST = (
    "--benchmark-max-time=0.05",
    "--benchmark-min-rounds=3",
    "--inductor-cpu-probe=0",
    "--inductor-timing-min-seconds=0",
)
QUIET = ("-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning")  # inner runs: no cache, no torch warning


def made_once(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, make: Callable[[Path], None]
) -> Path:
    """A folder ``name`` that ``make`` fills once a session: under pytest-xdist the first worker to need it makes it
    and the others wait and read it (the recipe pytest-xdist documents for fixtures that should run once, with a
    plain flock: no lock object is left for a finalizer to release at the worker's exit)."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock, and no pytest-xdist run to keep apart
        fcntl = None

    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if worker_id != "master" else shared
    root = shared / name
    with open(shared / f"{name}.lock", "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (root / "made").exists():
            root.mkdir(exist_ok=True)
            make(root)
            (root / "made").write_text("")
    return root


def made_once_value(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str, compute: Callable[[Path], T]
) -> T:
    """``compute(folder)``'s value, computed once a session in a folder ``name`` by the first pytest-xdist worker to
    ask (``made_once``); the others read its pickle. For a module-scoped fixture's run: under pytest-xdist a module's
    tests land on both workers, and a module-scoped fixture alone would run once on each."""

    def make(root: Path) -> None:
        (root / "value.pickle").write_bytes(pickle.dumps(compute(root)))

    return pickle.loads((made_once(tmp_path_factory, worker_id, name, make) / "value.pickle").read_bytes())


class SharedRuns(Mapping[str, Path]):
    """Inner runs made once a session, each on first use: ``runs[name]`` makes run ``name`` in a folder of its own
    (``make(name, folder)``, behind its own lock) unless a test of this session already did, and gives the path of
    its benchmark JSON (``NAME.json``; its output and exit code beside it: ``output(name)``). Under pytest-xdist the
    workers make different runs at once; a worker waits only for a run it reads."""

    def __init__(
        self, tmp_path_factory: pytest.TempPathFactory, worker_id: str, names: tuple[str, ...], make: Callable
    ) -> None:
        self.factory, self.worker_id, self.names, self.make = tmp_path_factory, worker_id, names, make

    def __getitem__(self, name: str) -> Path:
        if name not in self.names:
            raise KeyError(name)
        folder = made_once(self.factory, self.worker_id, f"run-{name}", lambda root: self.make(name, root))
        return folder / f"{name}.json"

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def output(self, name: str) -> tuple[int, str]:
        """Run ``name``'s exit code and its output (stdout, then stderr)."""
        path = self[name]
        return int(path.with_suffix(".returncode").read_text()), path.with_suffix(".out").read_text()


@pytest.fixture(scope="session")
def shared_runs(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> SharedRuns:
    """The session's shared inner runs (tests/shared_runs.py), by name."""
    from shared_runs import RUNS, make_run

    return SharedRuns(tmp_path_factory, worker_id, tuple(RUNS), make_run)


@pytest.fixture(scope="session", autouse=True)
def session_inductor_cache(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[None]:
    """One Inductor cache for the session, shared by its xdist workers and every inner run they start: the first
    compile of a graph fills it, every later one of the same graph reads it warm, and no run depends on what the
    machine's default cache (``/tmp/torchinductor_USER``) holds from earlier sessions or other users. A cache named in
    the environment is kept (a CI cache kept between jobs, say). A test that needs a cold cache makes its own."""
    if "TORCHINDUCTOR_CACHE_DIR" in os.environ:
        yield
        return
    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if worker_id != "master" else shared
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCHINDUCTOR_CACHE_DIR", str(shared / "inductor-cache"))
        yield


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The plugin's command, as a user runs it."""
    command = [sys.executable, "-m", "pytest_inductor_templates.runs.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def outcomes(folder: Path) -> dict[tuple[str, str, str, str], str]:
    """(sample, template, device, kind) -> outcome of every record in ``folder/run.jsonl`` (printed, for a failure)."""
    from pytest_inductor_templates.runs.files import load

    run = load(str(folder / "run.jsonl"))
    print("\n".join(f"{r.outcome.value if r.outcome else '?':8} {r.nodeid} {r.reason}" for r in run.records))
    return {(r.sample, r.template, r.device, r.kind): r.outcome.value if r.outcome else "?" for r in run.records}


no_cuda_machine = pytest.mark.skipif(torch.cuda.is_available(), reason="expects a machine without a CUDA device")


def usage_error_line(result: pytest.RunResult) -> str:
    """The single ``ERROR:`` line of a run that ended with a usage error (exit code 4)."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str() + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
    return errors[0]


@pytest.fixture
def sentinel_test(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project with one test that would fail loudly if it ever ran."""
    pytester.makepyfile(test_sentinel="def test_must_not_run():\n    raise AssertionError('ran')\n")
    return pytester


CI_VARIABLES = ("CI", "BUILD_NUMBER")  # pytest prints whole failure messages in its short summary where one is set


@pytest.fixture(autouse=True)
def as_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest runs print as on a developer's terminal, on CI too."""
    for name in CI_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def run_pytest(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A real pytest run in a fresh process, in ``cwd``, not taken for an xdist worker."""
    command = [sys.executable, "-m", "pytest", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False, env=standalone_environment())


def junit_properties(junit: Path) -> dict[str, dict[str, str]]:
    """The ``user_properties`` of every test case in a JUnit XML file, by ``classname::name``."""
    found = {}
    for block in re.split(r"<testcase ", junit.read_text())[1:]:
        classname = re.search(r'\bclassname="([^"]*)"', block)
        name = re.search(r'\bname="([^"]*)"', block)
        assert classname is not None and name is not None, block[:200]
        found[f"{classname.group(1)}::{name.group(1)}"] = dict(
            re.findall(r'<property name="([^"]+)" value="([^"]*)"', block)
        )
    return found


@pytest.fixture(autouse=True)
def _inner_runs_are_standalone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest runs must not think they are xdist workers (pytest-benchmark would switch itself off)."""
    for name in XDIST_WORKER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
