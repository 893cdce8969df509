"""The background pass every local controller runs: `sync()` on a thread until stopped.

The engine runner, the HPA stand-in and the Region's nginx each converge on what the stand-in API
server holds by calling their own `sync` over and over; a failed pass is logged and the next one
retries, as a real controller's work queue would.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class SyncLoop:
    """Calls `sync` every `interval` seconds on a daemon thread named `name`, until `stop()`."""

    def __init__(self, sync: Callable[[], object], *, name: str) -> None:
        self._sync = sync
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, interval: float) -> None:
        """Start (or start again after `stop`) calling `sync` every `interval` seconds."""
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self._sync()
                except Exception:  # keep converging; the next pass retries
                    log.exception("%s sync failed", self._name)
                self._stop.wait(interval)

        self._thread = threading.Thread(target=loop, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the loop to end and wait (bounded) for its current pass."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
