"""The local stand-in servers' garbage collector settings."""

from __future__ import annotations

import gc

from gco.local.processes.collector import COLLECTOR_THRESHOLDS, collect_rarely


def test_the_moto_server_collects_rarely_from_the_moment_it_serves() -> None:
    """What the server loaded before serving is frozen, and full collections run a hundred times
    less often than Python's default."""
    thresholds = gc.get_threshold()
    try:
        collect_rarely()
        assert gc.get_threshold() == COLLECTOR_THRESHOLDS
        assert COLLECTOR_THRESHOLDS[2] >= 100 * 10  # Python's default full-pass threshold is 10
        assert gc.get_freeze_count() > 0 and gc.isenabled()
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)
