"""How long a diagnosis's lowering bisection takes when every check costs the same, with torch's real
``CompilerBisector`` over a planted fault that compiles nothing (the asking process and its helper processes each
with a bisector state of its own, as in a diagnosis): the wall time from the first question to the stage, and which
process answered each question torch asked. On a GPU a lowering step compiled from the kept graph costs about 5 s
(opus-mt on an H100); here each check sleeps ``--check-seconds`` instead, so the figure is the search's own shape.

    python benchmarks/bisection_rounds.py [--applications 1015] [--bad 62] [--helpers 3] [--check-seconds 1]
        [--slow LOW-HIGH:SECONDS] [--holders]

``--slow`` makes one bisection step's check in a helper take longer (opus-mt's range 0-63 took 103-116 s of code
generation on an H100); ``--holders``: as on a GPU, the helpers hold a kept graph and the asking process none, so
every lowering step goes to a helper.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAULT = """
import time
from torch._inductor.compiler_bisector import CompilerBisector
from pytest_inductor_templates.diagnose.cancel import cancellable

APPLICATIONS, BAD, SECONDS, SLOW = {applications}, {bad}, {seconds}, {slow!r}


def fails(question=None, helper=False):
    \"\"\"Fails from the inductor stage on while the lowering application BAD is enabled; each check sleeps.\"\"\"
    if CompilerBisector.get_backend() != "inductor":
        return False
    wrong = False
    for number in range(APPLICATIONS):
        off = CompilerBisector.disable_subsystem("inductor", "lowerings", lambda n=number: f"op{{n}}")
        wrong = wrong or (number == BAD and not off)
    slow = SLOW and helper and question is not None and (question.low, question.high) == tuple(SLOW[:2])
    with cancellable():  # as a real check's compile and calls (a helper may be stopped there)
        time.sleep(SLOW[2] if slow else SECONDS)
    return wrong
"""

HELPER = """
import sys
sys.path.insert(0, {here!r})
from fault import fails
from pytest_inductor_templates.diagnose.helpers import private_stdout, serve
from pytest_inductor_templates.diagnose.drawn import Counts

replies = private_stdout()
serve(lambda question: fails(question, helper=True), Counts(), sys.argv[1], replies, lambda: {holders})
"""

ASKER = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {here!r})
from fault import fails
from pytest_inductor_templates.diagnose.bisect import Answers
from pytest_inductor_templates.diagnose.helpers import Helpers
from pytest_inductor_templates.diagnose.drawn import Counts
from pytest_inductor_templates.diagnose.stage import find_stage
from pytest_inductor_templates.diagnose.steplog import StepLog, read_log

work = Path({work!r})
log, counts = StepLog(work / "steps.jsonl"), Counts()
helpers = Helpers(work, {helpers}, log, counts, boot=Path({boot!r}).read_text(), fork=True) if {helpers} else None
if helpers is not None:
    helpers.wait_ready()
start = time.monotonic()
answers = Answers(fails, log, {{}}, "the item failed", helpers, counts, holds_graph=lambda: not {holders})
found = find_stage(answers, log, str(work))
seconds = time.monotonic() - start
if helpers is not None:
    helpers.close()
checks = [r for r in read_log(work / "steps.jsonl") if r["step"] == "bisect_check"]
steps = [r for r in checks if r["run_state"] == "bisect"]
bounds = next(r["at"] for r in checks if r["run_state"] == "find_max_bounds")
by_helpers = sum(1 for r in steps if r.get("pid"))
implied = sum(1 for r in steps if r.get("implied_by"))
print("RESULT " + json.dumps({{"stage": found.describe(), "seconds": round(seconds, 1),
    "bisection": round(steps[-1]["at"] - bounds, 1), "steps": len(steps), "by_helpers": by_helpers,
    "implied": implied, "here": len(steps) - by_helpers - implied}}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--applications", type=int, default=1015)
    parser.add_argument("--bad", type=int, default=62)
    parser.add_argument("--helpers", type=int, default=3)
    parser.add_argument("--check-seconds", type=float, default=1.0)
    parser.add_argument("--slow", default=None, help="LOW-HIGH:SECONDS: one bisection step slow in a helper")
    parser.add_argument(
        "--holders", action="store_true", help="as on a GPU: the helpers hold a kept graph, the asker none"
    )
    args = parser.parse_args()
    if not 0 <= args.bad < args.applications:
        parser.error(f"--bad {args.bad}: an application from 0 to {args.applications - 1}")
    slow = None
    if args.slow:
        span, _, seconds = args.slow.partition(":")
        low, _, high = span.partition("-")
        slow = (int(low), int(high), float(seconds))
    with tempfile.TemporaryDirectory(prefix="bisection-rounds-") as folder:
        here = Path(folder)
        (here / "fault.py").write_text(
            FAULT.format(applications=args.applications, bad=args.bad, seconds=args.check_seconds, slow=slow)
        )
        (here / "helper.py").write_text(HELPER.format(here=folder, holders=args.holders))
        work = here / "work"
        work.mkdir()
        code = ASKER.format(
            here=folder, work=str(work), helpers=args.helpers, boot=str(here / "helper.py"), holders=args.holders
        )
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        if done.returncode != 0:
            print(done.stdout[-2000:] + done.stderr[-3000:])
            return 1
        result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    print(
        f"bisection_rounds: {args.applications} applications, the fault at {args.bad}, {args.helpers} helpers, "
        f"{args.check_seconds:g} s a check{f', {args.slow} slow' if args.slow else ''}"
        f"{', the helpers holding kept graphs' if args.holders else ''}: {result['stage']} in "
        f"{result['seconds']} s, the bisection after the count {result['bisection']} s (of {result['steps']} steps "
        f"{result['by_helpers']} answered by helpers, {result['implied']} implied, {result['here']} here; "
        f"the process {time.monotonic() - started:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
