"""The local endpoint's serialising middleware runs one request at a time, bodies included."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from gco.local.moto.moto_app import SerializedApp


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


def run_concurrently(app: SerializedApp, targets: list[str | None]) -> None:
    threads = [
        threading.Thread(
            target=lambda target=target: app(
                {} if target is None else {"HTTP_X_AMZ_TARGET": target}, lambda *a: None
            )
        )
        for target in targets
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)


def test_reads_run_together_and_a_write_runs_alone() -> None:
    active = {"reads": 0, "writes": 0, "max_reads": 0, "overlap": 0}
    lock = threading.Lock()

    def app(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        kind = (
            "reads" if environ.get("HTTP_X_AMZ_TARGET", "").endswith(("GetItem", "GetRecords")) else "writes"
        )
        with lock:
            active[kind] += 1
            active["max_reads"] = max(active["max_reads"], active["reads"])
            if active["writes"] and (active["reads"] or active["writes"] > 1):
                active["overlap"] += 1
        time.sleep(0.02)
        with lock:
            active[kind] -= 1
        yield b"ok"

    serialized = SerializedApp(app)
    reads = ["DynamoDB_20120810.GetItem", "DynamoDBStreams_20120810.GetRecords"] * 4
    writes = ["DynamoDB_20120810.UpdateItem", "DynamoDB_20120810.PutItem", None]
    run_concurrently(serialized, [*reads[:4], *writes, *reads[4:]])
    assert active["max_reads"] > 1
    assert active["overlap"] == 0


def test_the_local_servers_listen_with_a_backlog_bursts_of_connections_fit_in() -> None:
    """A dropped connection costs its client a second before its SYN is sent again (`processes.listen`)."""
    from gco.local.processes.listen import LISTEN_BACKLOG
    from gco.local.standin.server import QuietServer

    server = QuietServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    server.server_close()
    assert server.request_queue_size == LISTEN_BACKLOG >= 1024
