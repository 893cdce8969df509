"""The local endpoint's serialising middleware runs one request at a time, bodies included."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from gco.local.moto_app import SerializedApp


def test_requests_never_overlap() -> None:
    active = {"now": 0, "max": 0}

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        active["now"] += 1
        active["max"] = max(active["max"], active["now"])
        time.sleep(0.01)
        yield b"body"
        active["now"] -= 1

    serialized = SerializedApp(app)
    results: list[list[bytes]] = []
    threads = [
        threading.Thread(target=lambda: results.append(serialized({}, lambda *a: None))) for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [[b"body"]] * 8
    assert active["max"] == 1
