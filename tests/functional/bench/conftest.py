"""Helpers for bench functional tests: a fake engine in-process, free ports, fake engine argv."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from gco.bench.fake_engine import Behaviour, FakeEngine


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def behaviour(**update: Any) -> Behaviour:
    values: dict[str, Any] = {
        "port": 0,
        "style": "vllm",
        "ttft_s": 0.002,
        "itl_s": 0.001,
        "speed": 1.0,
        "noise": 0.0,
        "drift": 0.0,
        "fail_rate": 0.0,
        "crash_after": 0,
        "crash_once_file": "",
        "never_ready": False,
        "seed": 0,
        "tokens": 8,
    }
    values.update(update)
    return Behaviour(**values)


@asynccontextmanager
async def engine_server(**update: Any) -> AsyncIterator[tuple[str, FakeEngine]]:
    """A FakeEngine listening on a free loopback port inside the running loop."""
    engine = FakeEngine(behaviour(**update))
    server = await asyncio.start_server(engine.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", engine
    finally:
        server.close()


def fake_argv(port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "gco.bench.fake_engine", "--port", str(port), *flags]
