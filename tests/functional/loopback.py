"""A test's HTTP server on loopback, served from a thread for the length of a `with` block."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def serving(server: socketserver.TCPServer) -> Iterator[str]:
    """Serve `server` (bound to 127.0.0.1) from a thread; yields its base URL, then stops and closes it."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
