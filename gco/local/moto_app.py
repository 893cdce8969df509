"""The local AWS endpoint process: moto's WSGI app, its requests applied one at a time.

Real DynamoDB applies each conditional write atomically; moto's threaded server takes no lock, so
two concurrent conditional writes could both pass. Serialising requests restores that atomicity.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

StartResponse = Callable[..., Any]


class SerializedApp:
    """A WSGI middleware that runs one request (body included) at a time; connections stay threaded."""

    def __init__(self, app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]]) -> None:
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        with self.lock:
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
    from werkzeug.serving import run_simple

    from gco.local import moto_json

    moto_json.install()

    app = SerializedApp(DomainDispatcherApplication(create_backend_app))
    run_simple(options.host, options.port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":  # pragma: no cover
    main()
