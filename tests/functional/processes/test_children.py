"""stop_child: a child that exits on SIGTERM is reaped; one that ignores it is killed after the grace."""

from __future__ import annotations

import signal
import subprocess
import sys

from gco.processes.signals import stop_child

IGNORES_TERM = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def test_a_child_that_exits_on_sigterm_is_reaped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stop_child(child, grace=10)
    assert child.returncode == -signal.SIGTERM


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    child = subprocess.Popen([sys.executable, "-c", IGNORES_TERM], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"  # handler installed
    stop_child(child, grace=0.2)
    assert child.returncode == -signal.SIGKILL
    child.stdout.close()
