"""The exclusive GPU lock file held for a whole benchmark run (flock, non-blocking).

Path from GCO_GPU_LOCK, else ~/.cache/gco/gpu.lock; the holder's pid is written into it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import IO

from gco.bench.errors import GpuLockedError

# Where the GPU lock lives, when not in the default place.
GPU_LOCK_ENV = "GCO_GPU_LOCK"


def lock_path() -> Path:
    """Where the GPU lock lives."""
    explicit = os.environ.get(GPU_LOCK_ENV)
    return Path(explicit) if explicit else Path.home() / ".cache" / "gco" / "gpu.lock"


class GpuLock:
    """Context manager holding the lock; raises GpuLockedError when another process holds it."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or lock_path()
        self.handle: IO[str] | None = None

    def __enter__(self) -> GpuLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise GpuLockedError(f"GPU lock {self.path} is held by pid {holder}") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self.handle = handle
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None
