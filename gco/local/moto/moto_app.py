"""The local AWS endpoint process: moto's WSGI app, its writes applied one at a time.

Real DynamoDB applies each conditional write atomically; moto's threaded server takes no lock, so
two concurrent conditional writes could both pass, and a read iterating a table (a Scan, a
GetRecords over the stream) while a write changes it could fail. So a write runs alone, while
reads of DynamoDB and its streams (which change no item) run together, as DynamoDB serves them;
anything else (S3, Step Functions, table management) runs alone too. moto is one Python process:
this is about order and atomicity, not throughput.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

StartResponse = Callable[..., Any]
# The X-Amz-Target of the calls that read and change no item or table.
READS = frozenset(
    {
        *(f"DynamoDB_20120810.{op}" for op in ("GetItem", "BatchGetItem", "Query", "Scan", "DescribeTable")),
        *(f"DynamoDBStreams_20120810.{op}" for op in ("DescribeStream", "GetShardIterator", "GetRecords")),
    }
)


class ReadWriteLock:
    """Many readers or one writer; a waiting writer holds back new readers (no writer starves)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._changed:
            while self._writing or self._writers_waiting:
                self._changed.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._changed:
                self._readers -= 1
                if not self._readers:
                    self._changed.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._changed:
            self._writers_waiting += 1
            while self._writing or self._readers:
                self._changed.wait()
            self._writers_waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._changed:
                self._writing = False
                self._changed.notify_all()


class SerializedApp:
    """A WSGI middleware: a write (any request not in `READS`) runs alone, body included; reads
    run together; connections stay threaded."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self.lock = ReadWriteLock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        guard = self.lock.reading() if environ.get("HTTP_X_AMZ_TARGET") in READS else self.lock.writing()
        with guard:
            return list(self.app(environ, start_response))


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - runs as the server process
    parser = argparse.ArgumentParser(description="moto server with serialised requests")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    options = parser.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(options.port))
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import BaseWSGIServer, run_simple

    from gco.local.moto import moto_direct, moto_items, moto_json, moto_lexer
    from gco.local.moto.keep_alive import keep_alive_handler
    from gco.local.moto.moto_direct import DirectDispatch
    from gco.local.processes import headers
    from gco.local.processes.collector import collect_rarely
    from gco.local.processes.listen import LISTEN_BACKLOG

    BaseWSGIServer.request_queue_size = LISTEN_BACKLOG  # werkzeug's 128: see gco.local.processes.listen

    headers.install()
    moto_json.install()
    moto_lexer.install()
    moto_items.install()
    moto_direct.install()
    collect_rarely()

    app = SerializedApp(DirectDispatch(DomainDispatcherApplication(create_backend_app)))
    # moto's handler (its environ) answering over kept connections, without a log line per request
    # (the server's output is discarded: `MotoServer`), which cost about a twentieth of its CPU.
    handler = keep_alive_handler(MotoRequestHandler)
    run_simple(options.host, options.port, app, threaded=True, request_handler=handler)


if __name__ == "__main__":  # pragma: no cover
    main()
