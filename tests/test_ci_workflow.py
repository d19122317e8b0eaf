"""The CI workflow of docs/ci.md, run as written on a small project through four commits.

The shell steps are taken from the doc itself (so it cannot drift from what is tested) and run as GitHub
Actions runs them: ``bash -eo pipefail`` per step, a step without ``if:`` only while every earlier one
succeeded, ``if: always()`` in any case. The ``uses:`` steps and the install step are not run: the project is
a git repository made here, and the plugin is installed already. The steps' ``python -m pytest`` runs in the warm
interpreter (``inner_runs.warm_python_on_path``: a ``python`` first on ``PATH``), its folder and environment the
step's, without a fresh import of torch each.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from inner_runs import warm_python_on_path

from conftest import made_once_value, standalone_environment

yaml = pytest.importorskip("yaml")

CI_DOC = Path(__file__).parent.parent / "docs" / "ci.md"
SHAS = {"BASE_SHA": "github.event.pull_request.base.sha", "HEAD_SHA": "github.event.pull_request.head.sha"}

# The project: a compiler pass on top of Inductor (registered as the backend ``project``), and a model whose
# time is a fixed 50 ms of work in eager and compiled alike, on a planted clock (``--benchmark-timer``): each call
# advances it, so the speedups are exact on any machine however loaded (real 50 ms sleeps read a planted slowdown
# of -18% as inside its interval on a loaded 2-core machine), while a slowdown planted in the compiled program
# shows in full.
PLANTED_CLOCK = """
NOW = [0.0]


def now():
    NOW[0] += 1e-9
    return NOW[0]


def advance(seconds):
    NOW[0] += seconds
"""
COMPILER = """
import planted_clock
import torch

SLOWDOWN = 0.0  # seconds added to every compiled call
MISCOMPILE = 0.0  # added to every output element


def project(gm, example_inputs):
    compiled = torch._inductor.compile(gm, example_inputs)
    if not SLOWDOWN and not MISCOMPILE:
        return compiled

    def run(*args):
        if SLOWDOWN:
            planted_clock.advance(SLOWDOWN)
        return [out + MISCOMPILE for out in compiled(*args)]

    return run
"""
CONFTEST = (
    'import torch\n\nfrom project_compiler import project\n\ntorch._dynamo.register_backend(name="project")(project)\n'
)
TESTS = """
import planted_clock
import torch


@torch.compiler.disable
def fixed_work():
    planted_clock.advance(0.05)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x):
        fixed_work()
        return self.fc(x).relu()


def test_block_checked(inductor_check):
    torch.manual_seed(0)
    inductor_check(Block().eval(), torch.randn(4, 16))


def test_block_speed(inductor_benchmark):
    torch.manual_seed(0)
    with torch.no_grad():
        inductor_benchmark(Block().eval(), torch.randn(4, 16))
"""
PYTEST_INI = """[pytest]
inductor_backend = project
inductor_template = default
inductor_devices = cpu
addopts = -p no:cacheprovider -W ignore::DeprecationWarning --benchmark-max-time=0.1 --benchmark-min-rounds=7
    --benchmark-timer=planted_clock.now
"""
BASE_FILES = {
    "planted_clock.py": PLANTED_CLOCK,
    "project_compiler.py": COMPILER,
    "conftest.py": CONFTEST,
    "test_block.py": TESTS,
    "pytest.ini": PYTEST_INI,
    "README.md": "A project.\n",
}
CHANGES = {  # the head commit of each pull request, all against the base
    # a third more time in every compiled call: the speedup falls by a quarter, 1.0x -> 0.75x
    "slowdown": ("project_compiler.py", COMPILER.replace("SLOWDOWN = 0.0", "SLOWDOWN = 0.017")),
    "miscompile": ("project_compiler.py", COMPILER.replace("MISCOMPILE = 0.0", "MISCOMPILE = 0.5")),
    "unchanged": ("README.md", "A project, documented.\n"),
    "broken_config": ("pytest.ini", PYTEST_INI.replace("= default", "= defualt")),  # no run at all
}


def workflow_job() -> dict[str, Any]:
    """The one job of the workflow in docs/ci.md."""
    text = CI_DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- ci-workflow -->\n```yaml\n(.*?)```\n<!-- /ci-workflow -->", text, re.S)
    assert block is not None, "docs/ci.md has no ci-workflow block"
    (job,) = yaml.safe_load(block.group(1))["jobs"].values()
    return job


@dataclass
class JobRun:
    result: str  # success or failure, as GitHub reports the job
    steps: dict[str, str]  # step name -> success, failure or skipped
    log: str
    summary: str


def run_steps(job: dict[str, Any], names: list[str], cwd: Path, env: dict[str, str]) -> JobRun:
    """Run the named steps of ``job`` in order, with GitHub's step semantics."""
    failed, outcomes, log = False, {}, []
    steps = {step.get("name"): step for step in job["steps"]}
    for name in names:
        step = steps[name]
        condition = step.get("if")
        assert condition in (None, "always()"), f"{name}: this test knows no if: {condition}"
        if failed and condition is None:
            outcomes[name] = "skipped"
            continue
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        outcomes[name] = "success" if done.returncode == 0 else "failure"
        failed = failed or done.returncode != 0
        log.append(f"--- {name}: exit {done.returncode}\n{done.stdout}{done.stderr}")
    summary = Path(env["GITHUB_STEP_SUMMARY"]).read_text() if Path(env["GITHUB_STEP_SUMMARY"]).exists() else ""
    return JobRun("failure" if failed else "success", outcomes, "\n".join(log), summary)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def pull_requests(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> dict[str, JobRun]:
    """Each pull request's job: the base run shared (every pull request has the same base), then the rest; run
    once a session."""
    return made_once_value(tmp_path_factory, worker_id, "ci-pull-requests", _pull_requests)


def _pull_requests(root: Path) -> dict[str, JobRun]:
    job = workflow_job()
    run_names = [step["name"] for step in job["steps"] if "run" in step]
    install = [name for name in run_names if name.startswith("Install")]
    assert len(install) == 1, run_names  # the only run step not taken here
    base_step, *head_steps = [name for name in run_names if name not in install]
    assert base_step == "Time the base commit", run_names
    project, runner_temp = root / "project", root / "runner-temp"
    project.mkdir()
    runner_temp.mkdir()
    for name, text in BASE_FILES.items():
        (project / name).write_text(text)
    git(project, "init", "--quiet", "--initial-branch=main")
    git(project, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", "add", ".")
    git(project, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", "commit", "--quiet", "-m", "base")
    base = git(project, "rev-parse", "HEAD")
    heads = {}
    for change, (name, text) in CHANGES.items():
        git(project, "checkout", "--quiet", base)
        (project / name).write_text(text)
        git(project, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", "commit", "--quiet", "-am", change)
        heads[change] = git(project, "rev-parse", "HEAD")
    for name, expression in SHAS.items():
        assert job["env"][name] == f"${{{{ {expression} }}}}", (name, job["env"][name])
    assert not any("${{" in str(v) for k, v in job["env"].items() if k not in SHAS), job["env"]
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    with warm_python_on_path(root / "warm-python", path) as warm:  # python -m pytest in the warm interpreter
        env = {
            **standalone_environment(),
            **{k: str(v) for k, v in job["env"].items()},
            **warm,
            "RUNNER_TEMP": str(runner_temp),
            "BASE_SHA": base,
        }
        return _run_jobs(job, base_step, head_steps, heads, root, project, runner_temp, env)


def _run_jobs(
    job: dict[str, Any], base_step: str, head_steps: list[str], heads: dict[str, str], root: Path, project: Path,
    runner_temp: Path, env: dict[str, str],
) -> dict[str, JobRun]:  # fmt: skip
    jobs = {}
    base_job = run_steps(job, [base_step], project, {**env, "GITHUB_STEP_SUMMARY": str(root / "base-summary.md")})
    assert base_job.result == "success", base_job.log
    for change, head in heads.items():  # each on a fresh runner, given what the shared base step left
        temp, summary = root / f"{change}-temp", root / f"{change}-summary.md"
        temp.mkdir()
        shutil.copy(runner_temp / "base.json", temp / "base.json")
        summary.write_text((root / "base-summary.md").read_text())
        step_env = {**env, "HEAD_SHA": head, "RUNNER_TEMP": str(temp), "GITHUB_STEP_SUMMARY": str(summary)}
        jobs[change] = run_steps(job, head_steps, project, step_env)
    return jobs


def test_a_planted_slowdown_fails_the_gate(pull_requests) -> None:
    job = pull_requests["slowdown"]
    assert job.result == "failure" and job.steps["Gate"] == "failure", job.log
    assert job.steps["Time the new commit"] == "success", job.log
    assert "- default: speedup on test_block.py::test_block_speed [cpu] fell" in job.log
    assert "newly failing" not in job.log


def test_a_planted_miscompile_fails_the_gate_though_pytest_failed_first(pull_requests) -> None:
    """The new commit's pytest exits 1: the summary and the gate still run, and the gate names both tests (an
    inductor_check test and an inductor_benchmark test) as newly failing."""
    job = pull_requests["miscompile"]
    assert job.steps == {"Time the new commit": "success", "Write the job summary": "success", "Gate": "failure"}
    assert "- new commit " in job.summary and ": pytest exited 1" in job.summary
    for test in ("test_block_checked", "test_block_speed"):
        assert f"- test_block.py::{test}/default/cpu: newly failing (pass -> accuracy_fail)" in job.log


def test_an_unchanged_commit_passes_the_gate(pull_requests) -> None:
    job = pull_requests["unchanged"]
    assert job.result == "success", job.log
    assert set(job.steps.values()) == {"success"}


def test_a_run_that_never_happened_fails_and_says_why_in_the_summary(pull_requests) -> None:
    job = pull_requests["broken_config"]
    assert job.steps == {"Time the new commit": "failure", "Write the job summary": "success", "Gate": "failure"}
    assert ": pytest exited 4" in job.summary
    assert "pytest-inductor-templates compare: error: " in job.summary and "new.json: cannot read" in job.summary


def test_the_summary_is_written_every_time(pull_requests) -> None:
    for change, job in pull_requests.items():
        assert job.summary.startswith("- base commit "), change
        assert "- new commit " in job.summary, change
        if change != "broken_config":
            assert "## pytest-inductor-templates compare" in job.summary, change
            assert ("**FAILED**" in job.summary) == (job.steps["Gate"] == "failure"), change


def test_the_pages_for_the_artifact_are_written(pull_requests) -> None:
    """The new commit's run writes its page (--inductor-html) and the summary step the comparison's, whatever the
    gate says; only the run that never happened has neither."""
    for change, job in pull_requests.items():
        run_page = re.search(r"inductor-templates: HTML page: file://(\S+/run\.html)", job.log)
        compare_page = re.search(r"wrote (\S+/compare\.html)", job.log)
        assert (run_page is not None, compare_page is not None) == ((change != "broken_config",) * 2), job.log
        for found in (run_page, compare_page) if run_page and compare_page else ():
            assert Path(found.group(1)).read_text().startswith("<!DOCTYPE html>"), change
