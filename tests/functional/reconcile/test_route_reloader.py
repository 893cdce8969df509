"""The proxy pod's `route-reloader` script as rendered, run by a real /bin/sh against a real process.

The script's fixed paths (the routes volume, nginx's pid file) and its poll period are substituted
with a temporary directory's and a short one; everything else runs as rendered. The signalled
process stands in for nginx's master: it records each SIGHUP and forks a child (as the master forks
its workers, `render_proxy.RELOADER_SCRIPT`'s comment) only when the test says so. It does not model
what nginx does with the signal (a reload; docs/proxy.md); the point is when the script sends it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gco.reconcile.proxy.render_proxy import RELOAD_POLL_S, RELOADER_SCRIPT
from gco.reconcile.proxy.routes import ROUTES_DIR

POLL_S = 0.05
# Records each SIGHUP in `hups`; forks a child that sleeps once `fork` exists.
MASTER = """
import os, signal, subprocess, sys, time
here = sys.argv[1]
signal.signal(signal.SIGHUP, lambda *_: open(os.path.join(here, "hups"), "a").write("hup\\n"))
child = None
for _ in range(1200):
    if child is None and os.path.exists(os.path.join(here, "fork")):
        child = subprocess.Popen(["sleep", "60"])
    time.sleep(0.05)
"""

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="the script reads /proc")


@pytest.fixture
def master(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", MASTER, str(tmp_path)], start_new_session=True)
    (tmp_path / "nginx.pid").write_text(f"{process.pid}\n")
    yield process
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


@pytest.fixture
def reloader(tmp_path: Path, master: subprocess.Popen[bytes]) -> Iterator[Path]:
    routes = tmp_path / "routes"
    routes.mkdir()
    (routes / "..2026_a").mkdir()
    (routes / "..data").symlink_to("..2026_a")
    script = (
        RELOADER_SCRIPT.replace(ROUTES_DIR, str(routes))
        .replace("/tmp/nginx.pid", str(tmp_path / "nginx.pid"))
        .replace(f"sleep {RELOAD_POLL_S};", f"sleep {POLL_S};")
    )
    assert script.count(str(routes)) == 1 and script.count(str(tmp_path / "nginx.pid")) == 2
    process = subprocess.Popen(["/bin/sh", "-c", script], start_new_session=True)
    yield routes
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def hups(tmp_path: Path) -> int:
    path = tmp_path / "hups"
    return len(path.read_text().splitlines()) if path.exists() else 0


def wait_for(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(POLL_S)


def swap(routes: Path, to: str) -> None:
    """What the kubelet's atomic writer does: a new directory, then the `..data` link swapped."""
    (routes / to).mkdir()
    (routes / "..data_tmp").symlink_to(to)
    os.replace(routes / "..data_tmp", routes / "..data")


def test_a_master_without_a_worker_is_not_signalled_until_it_has_one(tmp_path: Path, reloader: Path) -> None:
    time.sleep(20 * POLL_S)  # twenty passes of the loop over a new link and an existing pid file
    assert hups(tmp_path) == 0  # a master still starting could lose the SIGHUP
    (tmp_path / "fork").touch()
    wait_for(lambda: hups(tmp_path) == 1)  # held back, not forgotten
    time.sleep(10 * POLL_S)
    assert hups(tmp_path) == 1  # once per link


def test_each_link_change_is_one_signal(tmp_path: Path, reloader: Path) -> None:
    (tmp_path / "fork").touch()
    wait_for(lambda: hups(tmp_path) == 1)
    swap(reloader, "..2026_b")
    wait_for(lambda: hups(tmp_path) == 2)
    swap(reloader, "..2026_c")
    wait_for(lambda: hups(tmp_path) == 3)
    time.sleep(10 * POLL_S)
    assert hups(tmp_path) == 3


def test_the_script_runs_in_a_posix_shell() -> None:
    """The nginx image's /bin/sh may be dash or busybox: the script must parse in a POSIX shell."""
    shell = shutil.which("dash") or "/bin/sh"
    assert subprocess.run([shell, "-n", "-c", RELOADER_SCRIPT], check=False).returncode == 0
