"""Stopping a child process of the local stack: SIGTERM, then SIGKILL if it outlives the grace."""

from __future__ import annotations

import subprocess
from typing import Any

GRACE_S = 10.0


def stop_child(process: subprocess.Popen[Any], grace: float = GRACE_S) -> None:
    """Terminate `process` and reap it; kill it when it has not exited within `grace` seconds."""
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=grace)
