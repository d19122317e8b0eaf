"""Inner pytest runs in a warm interpreter: each run is ``pytest.main`` in a child forked from a server process that has
already imported torch, Dynamo, Inductor, pytest and pytest-benchmark (a ``multiprocessing`` forkserver, one
per test process, started on first use). The child gets the environment, working directory, ``sys.path`` and
``sys.argv`` a fresh ``python -m pytest`` would have, its fds 1 and 2 go to files, and it ends with ``os._exit``.

What a fresh interpreter reads at its start or at torch's import (a ``sitecustomize.py``, ``TORCH*`` variables read
at import) the warm one read once, in the server: a run that plants such a thing is refused here and belongs in a
fresh process (``runpytest_subprocess``, ``conftest.run_pytest``), but for what a child reads again itself (Inductor's
compile threads: ``DECIDED_AGAIN``) and a start file that says it may run after torch's import (``WARM_START_MARK``).
Inside a warm run, ``sys.executable`` is a shim (``WARM_SHIM``) that forks the Pythons the run starts (its xdist
workers, the plugin's sample workers and diagnosis children) from the same server."""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import json
import multiprocessing
import multiprocessing.reduction
import os
import runpy
import select
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from _pytest.pathlib import make_numbered_dir
from _pytest.pytester import RunResult

PRELOAD = (
    "torch",
    "torch._dynamo",
    "torch._inductor.compile_fx",
    "compiled_once",  # one compile, so that each run's first compile finds what it sets up once done
    "pytest",
    "pytest_benchmark.plugin",
    "inner_runs",
)  # not this plugin nor pytest-xdist (0.1 s): pytest rewrites their asserts as it imports them, and warns if it can't
# FROZEN: a child starts by moving the objects it inherits from the server (torch's, Dynamo's, Inductor's, pytest's
# modules: garbage never) out of the garbage collector's reach (gc.freeze), so that each collection in the child walks
# only what the run made; pytest's own at its end (gc_collect_harder) took 0.44 s of a trivial run's 0.77 s of CPU.
IMPORT_TIME_PREFIXES = ("TORCH", "PYTORCH", "TRITON", "OMP_", "MKL_", "KMP_")  # read by torch as it is imported
READ_AT_USE = frozenset({"TORCHINDUCTOR_CACHE_DIR"})  # read by Inductor at each use: a run may set its own
DECIDED_AGAIN = frozenset({"TORCHINDUCTOR_COMPILE_THREADS"})  # read at Inductor's import: a child decides it again
START_FILES = ("sitecustomize.py", "usercustomize.py")
WARM_START_MARK = "# inner_runs: may run after torch's import"  # a sitecustomize.py that says so runs in a warm child
XDIST_WORKER_VARIABLES = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")
PYTHON_C = "--inner-runs-python-c"  # run_warm's first argument for python -c CODE in place of pytest
SERVER_ENVIRONMENT = dict(os.environ)  # the environment the server starts in (the test process's, as it started)


def standalone_environment() -> dict[str, str]:
    """This process's environment without the xdist worker variables, for inner pytest runs."""
    return {k: v for k, v in os.environ.items() if k not in XDIST_WORKER_VARIABLES}


@cache
def _context() -> multiprocessing.context.ForkServerContext:
    """The forkserver, started now with its modules imported (and nothing run: no thread, no compile pool)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(PRELOAD))
    now = dict(os.environ)
    os.environ.clear()
    os.environ.update(SERVER_ENVIRONMENT)
    tests = str(Path(__file__).resolve().parent)  # the preloads of this folder (forkserver.main ignores sys.path)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [tests, SERVER_ENVIRONMENT.get("PYTHONPATH")]))
    try:
        multiprocessing.forkserver.ensure_running()
    finally:
        os.environ.clear()
        os.environ.update(now)
    return context


@cache
def _site_path() -> tuple[str, ...]:
    """``sys.path`` of a fresh interpreter after its script folder and ``PYTHONPATH`` (the standard library, site)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    code = "import sys; print('\\n'.join(sys.path[1:]))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return tuple(out.stdout.splitlines())


def _import_time_plants(cwd: Path, env: Mapping[str, str]) -> list[str]:
    """What a run in ``cwd`` with ``env`` plants that only a fresh interpreter reads (variables, start files), but
    what a warm child reads again itself (``DECIDED_AGAIN``, a ``WARM_START_MARK`` start file)."""
    changed = sorted(
        name
        for name in {*env, *SERVER_ENVIRONMENT}
        if name.startswith(IMPORT_TIME_PREFIXES)
        and name not in READ_AT_USE | DECIDED_AGAIN
        and env.get(name) != SERVER_ENVIRONMENT.get(name)
    )
    folders = [str(cwd), *_python_path(env)]
    warm = _warm_start_file(env)
    planted = [str(Path(f) / n) for f in folders for n in START_FILES if (Path(f) / n).exists()]
    return changed + [path for path in planted if path != str(warm)]


def _python_path(env: Mapping[str, str]) -> list[str]:
    return list(filter(None, env.get("PYTHONPATH", "").split(os.pathsep)))


def _warm_start_file(env: Mapping[str, str]) -> Path | None:
    """The sitecustomize.py a fresh interpreter started with ``env`` would import from its ``PYTHONPATH``, where it
    says it may run after torch's import (``WARM_START_MARK``: it changes torch's modules, not how they import)."""
    for folder in _python_path(env):
        start = Path(folder) / "sitecustomize.py"
        if start.exists():
            return start if start.read_text().startswith(WARM_START_MARK) else None
    return None


def _run_start_file(env: Mapping[str, str]) -> None:
    """In a warm child: the ``WARM_START_MARK`` sitecustomize.py a fresh interpreter would have run at its start."""
    if (start := _warm_start_file(env)) is not None:
        module = types.ModuleType("sitecustomize")
        module.__file__ = str(start)
        sys.modules["sitecustomize"] = module
        exec(compile(start.read_text(), str(start), "exec"), module.__dict__)


def _decide_again() -> None:
    """What Inductor's import decided from the ``DECIDED_AGAIN`` variables, decided again from this child's environment
    and CPUs (a fresh interpreter's import would have seen them)."""
    import torch._inductor.config as config

    config.compile_threads = config.decide_compile_threads()


def _refuse_import_time_plants(cwd: Path, env: Mapping[str, str]) -> None:
    """Fail the test whose run depends on what only a fresh interpreter reads."""
    if planted := _import_time_plants(cwd, env):
        pytest.fail(f"this inner run needs a fresh interpreter (read at start or torch's import: {planted})")


def _child(
    args: list[str],
    cwd: str,
    env: dict[str, str],
    path: list[str],
    out: str,
    err: str,
    shim: str,
    cpus: frozenset[int] | None = None,
) -> None:
    """In the forked child: ``python -m pytest ARGS`` as a fresh interpreter would run it (``python -c CODE`` where
    ARGS is ``[PYTHON_C, CODE]``), on ``cpus`` if given, then exit; its pytest-xdist workers and the Pythons it starts
    itself (``sys.executable``: the plugin's processes) start through ``shim``."""
    gc.freeze()  # the server's objects (torch's modules) stay out of every collection here: FROZEN
    if cpus is not None:
        os.sched_setaffinity(0, cpus)
    for fd, name in ((1, out), (2, err)):
        target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)

    def main() -> int:
        _as_started(cwd, env, path, shim)
        _xdist_workers_through(shim)
        if args[:1] == [PYTHON_C]:
            return _python_c(args[1], args[2:])
        sys.argv[:] = [str(Path(pytest.__file__).with_name("__main__.py")), *args]
        return int(pytest.main(args))

    _run_then_exit(main)


def _as_started(cwd: str, env: Mapping[str, str], path: list[str], shim: str) -> None:
    """This warm child set up as a fresh interpreter started in ``cwd`` with ``env`` and ``path`` would be (what
    Inductor's import decided from the environment, a ``WARM_START_MARK`` start file); the Pythons it starts go
    through ``shim``."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:] = path
    _decide_again()
    _run_start_file(env)
    sys.executable = shim


def _python_c(code: str, argv: list[str]) -> int:
    """``python -c CODE ARGV...``'s main module."""
    sys.argv[:] = ["-c", *argv]
    exec(compile(code, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
    return 0


def _run_then_exit(main: Callable[[], int]) -> None:
    """Run ``main`` as an interpreter runs its main module and exit with its code (a SystemExit's; 1 after a
    traceback), the exit functions run first, as the interpreter would at its exit (Inductor's compile pool, say)."""
    code = 1
    try:
        code = main()
    except SystemExit as ended:
        code = ended.code if isinstance(ended.code, int) else 0 if ended.code is None else 1
    except BaseException:
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_warm(
    cwd: Path,
    args: Sequence[str],
    env: Mapping[str, str],
    timeout: float | None = None,
    cpus: frozenset[int] | None = None,
) -> RunResult:
    """``python -m pytest ARGS`` in ``cwd`` with exactly ``env``, in a child of the warm interpreter (pinned to
    ``cpus`` if given, as a ``preexec_fn`` would pin a fresh one); killed after ``timeout`` seconds
    (``pytest.Pytester.TimeoutExpired``)."""
    _refuse_import_time_plants(cwd, env)
    context = _context()
    path = [str(cwd), *_python_path(env), *_site_path()]
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="inner-run-") as folder:
        out, err = os.path.join(folder, "stdout"), os.path.join(folder, "stderr")
        child = context.Process(
            target=_child, args=(list(args), str(cwd), dict(env), path, out, err, _warm_shim(), cpus), daemon=False
        )
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise pytest.Pytester.TimeoutExpired(f"{timeout} second timeout expired running: pytest {args}")
        outlines, errlines = (Path(name).read_text(errors="replace").splitlines() for name in (out, err))
    print("\n".join(outlines))
    print("\n".join(errlines), file=sys.stderr)
    return RunResult(child.exitcode, outlines, errlines, time.monotonic() - start)


WARM_SHIM = """#!{python} -S
# A `python [-u] [-B] -c CODE ARGS` or `python [-u] [-B] -m MODULE ARGS` (a pytest-xdist worker's start, a sample
# worker's, a diagnosis child's) forked from the warm interpreter of the test process that listens on {address!r}: the
# child gets this process's stdin, stdout and stderr (and a session of its own where this process leads one), the
# signals this process is sent, and its exit is this process's. Any other use of python (a script, other options),
# or one that interpreter declines (a variable read at torch's import differs from its own), is the real python.
import json, os, select, signal, socket, sys

args = sys.argv[1:]
at = 0
while at < len(args) and args[at] in ("-u", "-B"):
    at += 1
if len(args) < at + 2 or args[at] not in ("-c", "-m"):
    os.execv({python!r}, [{python!r}, *args])
starter = os.getppid()
connection = socket.socket(socket.AF_UNIX)
connection.connect({address!r})
session = os.getsid(0) == os.getpid()
asked = {{"args": args, "cwd": os.getcwd(), "env": dict(os.environ), "session": session}}
request = json.dumps(asked).encode()
socket.send_fds(connection, [len(request).to_bytes(8, "big")], [0, 1, 2])
connection.sendall(request)
answers = connection.makefile("rb")
said = answers.readline().split()
if said[:1] != [b"forked"]:
    os.execv({python!r}, [{python!r}, *args])
child = int(said[1])


def send(number, _=None):
    try:
        os.kill(child, number)
    except ProcessLookupError:
        pass


for number in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(number, send)
null = os.open(os.devnull, os.O_RDWR)
for fd in (0, 1):  # the child alone holds the pipes now: the reader sees their end when it ends
    os.dup2(null, fd)
while not select.select([connection], [], [], 1.0)[0]:
    if os.getppid() != starter:  # the starter was killed outright: the child ends as it would have seen it
        try:
            os.killpg(child, signal.SIGKILL) if session else os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
ret = int(answers.readline() or 1)
if ret < 0:  # killed by a signal: so is this process
    if -ret not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(-ret, signal.SIG_DFL)
    os.kill(os.getpid(), -ret)
sys.exit(ret)
"""
PARENT_VARIABLE = "PYTEST_INDUCTOR_PARENT"  # the plugin's parent_watch.PARENT_ENV (not imported here: PRELOAD)


def _xdist_workers_through(shim: str) -> None:
    """In an inner run's process: pytest-xdist's workers (execnet's popen gateways) start through ``shim``, which
    forks them from the warm interpreter, in place of a fresh ``sys.executable`` (a spec naming its python stands)."""
    try:
        import execnet.gateway_io as gateway_io
    except ImportError:
        return
    popen_args = gateway_io.popen_args

    def warm(spec: Any) -> list[str]:
        args = popen_args(spec)
        return args if spec.python else [shim, *args[1:]]

    gateway_io.popen_args = warm


class _HandedFd:
    """A file descriptor that a forkserver child receives as its own (duplicated as the child starts)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, ...]:  # pickled as the child starts: the forkserver passes the fd on
        return _received, (multiprocessing.reduction.DupFd(self.fd),)


def _received(handed: Any) -> int:
    return handed.detach()


def _worker_child(
    fds: tuple[int, ...],
    args: list[str],
    cwd: str,
    env: dict[str, str],
    path: list[str],
    starter: int,
    session: bool,
    cpus: set[int],
    shim: str,
) -> None:
    """In the forked child: ``python [-u] [-B] -c CODE ARGS`` or ``-m MODULE ARGS`` (a pytest-xdist worker's start,
    a plugin's process) on the stdin, stdout and stderr handed over as ``fds``, as a fresh interpreter started by the
    shim ``starter`` would run it (in a session of its own where ``session``), then exit. It ends when the shim does
    (killed in its place), and the Pythons it starts go through ``shim``."""
    gc.freeze()  # FROZEN
    if session:
        os.setsid()
    os.sched_setaffinity(0, cpus)  # its starter's, as a fresh process inherits them
    _end_with(starter, session)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)

    def main() -> int:
        at = next(i for i, arg in enumerate(args) if arg in ("-c", "-m"))
        unbuffered = "-u" in args[:at]  # stdout written through, as -u has it
        sys.dont_write_bytecode = "-B" in args[:at]
        sys.stdin = open(0, closefd=False)  # the interpreter's streams on the handed-over fds, as a fresh one has them
        out = io.FileIO(1, "w", closefd=False)
        sys.stdout = io.TextIOWrapper(out if unbuffered else io.BufferedWriter(out), write_through=unbuffered)
        err = io.BufferedWriter(io.FileIO(2, "w", closefd=False))
        sys.stderr = io.TextIOWrapper(err, errors="backslashreplace", line_buffering=True)
        started = env
        if PARENT_VARIABLE in env:  # the plugin's process watches its parent: this one's is the forkserver
            started = {**env, PARENT_VARIABLE: str(os.getppid())}
        _as_started(cwd, started, path, shim)
        if args[at] == "-c":
            return _python_c(args[at + 1], args[at + 2 :])
        sys.path[0] = os.getcwd()  # -m puts the folder first, -c an empty string
        sys.argv[:] = ["-m", *args[at + 2 :]]
        runpy.run_module(args[at + 1], run_name="__main__", alter_sys=True)
        return 0

    _run_then_exit(main)


def _end_with(shim: int, session: bool) -> None:
    """Kill this process (its group where it leads a session: its own children with it, as the plugin's
    ``parent_watch.end_group`` does) when the process ``shim`` ends (killed, say, as a fresh Python in its place
    would be)."""

    def end() -> None:
        if session:
            os.killpg(0, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    try:
        handle = os.pidfd_open(shim)
    except ProcessLookupError:
        end()
    except OSError:  # no pidfd here: look every half second
        handle = None

    def watch() -> None:
        if handle is not None:
            select.select([handle], [], [])
        else:
            while _alive(shim):
                time.sleep(0.5)
        end()

    threading.Thread(target=watch, name="end-with-shim", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@cache
def _warm_shim() -> str:
    """The path of this process's ``WARM_SHIM`` (and its server thread, started now), for an inner run's pytest-xdist
    workers and the Pythons its processes start: any variable read at torch's import that differs from the warm
    interpreter's sends them to a fresh one."""
    folder = tempfile.mkdtemp(prefix="warm-python-")
    owner = os.getpid()  # removed at this process's exit, never at that of a child that runs the exit functions
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(folder, ignore_errors=True))
    address, shim = os.path.join(folder, "warm.sock"), os.path.join(folder, "python")
    Path(shim).write_text(WARM_SHIM.format(python=sys.executable, address=address))
    os.chmod(shim, 0o755)
    context = _context()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            size, fds, _, _ = socket.recv_fds(self.request, 8, 3)
            starter = struct.unpack("3i", self.request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
            cpus = os.sched_getaffinity(starter)
            try:
                request = bytearray()
                while len(request) < int.from_bytes(size, "big") and (part := self.request.recv(1 << 16)):
                    request += part
                asked = json.loads(request)
                cwd, env = asked["cwd"], asked["env"]
                if len(fds) != 3 or _import_time_plants(Path(cwd), env):
                    self.request.sendall(b"fresh\n")
                    return
                path = ["", *_python_path(env), *_site_path()]
                handed = tuple(_HandedFd(fd) for fd in fds)
                child = context.Process(
                    target=_worker_child,
                    args=(handed, asked["args"], cwd, env, path, starter, asked["session"], cpus, shim),
                )
                child.start()
                # only this thread waits for it: Process.start's cleanup in another thread would poll it too, and
                # of two polls racing on its end one reads 255 for its exit code
                multiprocessing.process._children.discard(child)  # type: ignore[attr-defined]
            finally:
                for fd in fds:
                    os.close(fd)
            with contextlib.suppress(OSError):  # a shim killed meanwhile (a worker stopped at its deadline)
                self.request.sendall(f"forked {child.pid}\n".encode())
            child.join()
            with contextlib.suppress(OSError):
                self.request.sendall(f"{child.exitcode}\n".encode())

    server = socketserver.ThreadingUnixStreamServer(address, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return shim


def runpytest_warm(pytester: pytest.Pytester, *args: str, timeout: float | None = None) -> RunResult:
    """``pytester.runpytest_subprocess(*args)`` in the warm interpreter: the same arguments, folder and environment."""
    basetemp = make_numbered_dir(root=pytester.path, prefix="runpytest-", mode=0o700)
    args = (f"--basetemp={basetemp}", *args)
    for plugin in pytester.plugins:
        if not isinstance(plugin, str):
            raise ValueError(f"an inner run takes its plugins by name: {plugin}")
        args = ("-p", plugin, *args)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH", "")]))
    return run_warm(Path.cwd(), args, env, timeout)


def run_python_warm(
    cwd: Path, code: str, timeout: float | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -c CODE`` in ``cwd`` with ``env`` (this process's environment, as ``subprocess.run`` gives it) in the
    warm interpreter: for a script that imports torch and what it tests, and plants nothing read at start."""
    result = run_warm(cwd, (PYTHON_C, code), standalone_environment() if env is None else env, timeout)
    stdout, stderr = ("".join(f"{line}\n" for line in lines) for lines in (result.outlines, result.errlines))
    return subprocess.CompletedProcess(["python", "-c", code], int(result.ret), stdout, stderr)


def run_pytest_warm(
    cwd: Path,
    *args: str,
    timeout: float | None = None,
    cpus: frozenset[int] | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``conftest.run_pytest(cwd, *args)`` in the warm interpreter (its result as ``subprocess.run`` gives it), on
    ``cpus`` if given, with ``env`` (this process's environment by default)."""
    result = run_warm(cwd, args, standalone_environment() if env is None else env, timeout, cpus)
    stdout, stderr = ("".join(f"{line}\n" for line in lines) for lines in (result.outlines, result.errlines))
    return subprocess.CompletedProcess(["pytest", *args], int(result.ret), stdout, stderr)


SHIM = """#!{python} -S
# `python -m pytest ARGS` runs in the warm interpreter of the test that put this folder first on PATH (its answer:
# exit code, stdout, stderr); any other use of python is the real one.
import json, os, socket, sys

args = sys.argv[1:]
if args[:2] != ["-m", "pytest"]:
    os.execv({python!r}, [{python!r}, *args])
env = dict(os.environ)
connection = socket.socket(socket.AF_UNIX)
connection.connect(env.pop({variable!r}))
connection.sendall(json.dumps({{"args": args[2:], "cwd": os.getcwd(), "env": env}}).encode())
connection.shutdown(socket.SHUT_WR)
answer = json.loads(b"".join(iter(lambda: connection.recv(1 << 16), b"")))
sys.stdout.write(answer["out"])
sys.stderr.write(answer["err"])
sys.exit(answer["ret"])
"""
SHIM_VARIABLE = "INDUCTOR_TESTS_WARM_PYTHON"


@contextlib.contextmanager
def warm_python_on_path(folder: Path, path: str | None = None) -> Iterator[dict[str, str]]:
    """The variables that make a shell's ``python -m pytest ARGS`` (a script's, a CI step's) run in the warm
    interpreter (``run_warm``, with that process's folder and environment) while this context lasts: a ``python``
    shim in ``folder``, first on ``PATH`` (then ``path``, this process's by default), that sends its arguments to a
    server thread here; any other use of ``python`` runs the real one. A run ``run_warm`` refuses fails the test."""
    folder.mkdir(parents=True, exist_ok=True)
    shim, address = folder / "python", str(folder / "warm.sock")
    shim.write_text(SHIM.format(python=sys.executable, variable=SHIM_VARIABLE))
    shim.chmod(0o755)
    refused: list[BaseException] = []

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            asked = json.loads(self.rfile.read())
            try:
                result = run_warm(Path(asked["cwd"]), asked["args"], asked["env"])
                answer = {"ret": int(result.ret), "out": _text(result.outlines), "err": _text(result.errlines)}
            except BaseException as error:  # refused: the test fails below, the shim exits 1
                refused.append(error)
                answer = {"ret": 1, "out": "", "err": f"warm python refused: {error}\n"}
            self.wfile.write(json.dumps(answer).encode())

    server = socketserver.UnixStreamServer(address, Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"PATH": f"{folder}{os.pathsep}{os.environ['PATH'] if path is None else path}", SHIM_VARIABLE: address}
    finally:
        server.shutdown()
        server.server_close()
    if refused:
        raise refused[0]


def _text(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in lines)
