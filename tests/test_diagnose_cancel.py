"""A helper's check is stopped only inside a ``cancellable`` stretch, and a signal left from the question before does
not stop the next (``diagnose.cancel``), in a process of its own (the signal's handler and mask are process state)."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import json, os, signal, time
from pytest_inductor_templates.diagnose import cancel

cancel.arm()
os.kill(os.getpid(), cancel.SIGNAL)  # outside a stretch (as a check takes the host's lock): nothing raised
time.sleep(0.05)
cancel.begin()  # the next question: that signal is dropped
with cancel.cancellable():
    time.sleep(0.2)
kept = not cancel.was_cancelled()
cancel.begin()
start = time.monotonic()
try:
    with cancel.cancellable():
        os.kill(os.getpid(), cancel.SIGNAL)
        time.sleep(30)
    stopped = False
except cancel.Cancelled:
    stopped = True
blocked = cancel.SIGNAL in signal.pthread_sigmask(signal.SIG_BLOCK, set())  # blocked again after the stretch
print(json.dumps([kept, stopped, cancel.was_cancelled(), time.monotonic() - start < 10, blocked]))
"""


def test_only_a_cancellable_stretch_is_stopped_and_a_late_signal_is_dropped() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [True, True, True, True, True], done.stdout
