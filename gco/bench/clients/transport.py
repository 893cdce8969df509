"""A small HTTP/1.1 client on asyncio streams: keep-alive pool, chunked bodies, SSE events.

Written for timing fidelity: no per-chunk allocation beyond the bytes read, loopback or plain HTTP only.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from gco.bench.errors import BenchInputError
from gco.bench.errors import HttpError as HttpError  # noqa: PLC0414 (re-exported: callers catch it here)

MAX_HEADER_BYTES = 65536
MAX_EVENTS = 1_000_000


@dataclass(frozen=True)
class Target:
    """Where requests go: host, port and the base path of a base URL."""

    host: str
    port: int
    base_path: str

    @classmethod
    def parse(cls, base_url: str) -> Target:
        """The host, port and path of an `http://` base URL.

        Raises:
            BenchInputError: `--base-url` is not an http:// URL with a host.
        """
        parts = urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname:
            raise BenchInputError("--base-url", f"must be an http:// URL, got {base_url!r}")
        return cls(parts.hostname, parts.port or 80, parts.path.rstrip("/"))


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Pool:
    """Idle keep-alive connections to one target; a connection is reused only after a whole response."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.idle: list[Connection] = []

    async def acquire(self) -> Connection:
        """An idle connection that is still open, else a new one.

        Raises:
            HttpError: the connection could not be opened.
        """
        while self.idle:
            reader, writer = self.idle.pop()
            if not writer.is_closing() and not reader.at_eof():
                return reader, writer
        try:
            return await asyncio.open_connection(self.target.host, self.target.port, limit=MAX_HEADER_BYTES)
        except OSError as error:
            raise HttpError(f"connect: {error}") from error

    def release(self, connection: Connection, reusable: bool) -> None:
        if reusable:
            self.idle.append(connection)
        else:
            connection[1].close()

    def close(self) -> None:
        for _, writer in self.idle:
            writer.close()
        self.idle.clear()


def _request_bytes(target: Target, method: str, path: str, body: bytes) -> bytes:
    head = (
        f"{method} {target.base_path}{path} HTTP/1.1\r\nhost: {target.host}:{target.port}\r\n"
        f"content-type: application/json\r\naccept: text/event-stream, application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError) as error:
        raise HttpError(f"no response: {error}") from error
    lines = raw.decode("latin-1").split("\r\n")
    try:
        status = int(lines[0].split(" ", 2)[1])
    except (IndexError, ValueError) as error:
        raise HttpError(f"bad status line {lines[0]!r}") from error
    headers = {
        k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
    }
    return status, headers


async def _body_pieces(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """Yield the body as it arrives (chunked or content-length); raise HttpError when cut short."""
    try:
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    return
                data = await reader.readexactly(size + 2)
                yield data[:-2]
        elif "content-length" in headers:
            yield await reader.readexactly(int(headers["content-length"]))
        else:
            yield await reader.read()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError) as error:
        raise HttpError(f"body cut short: {error}") from error


class Client:
    """POST JSON and read either a whole JSON response or a stream of SSE `data:` payloads.

    Raises:
        HttpError: from every request: no connection, no or a bad status line, or a body cut short.
    """

    def __init__(self, base_url: str) -> None:
        self.target = Target.parse(base_url)
        self.pool = Pool(self.target)

    async def get(self, path: str) -> tuple[int, bytes]:
        """GET a path; returns status and body."""
        connection = await self.pool.acquire()
        reusable = False
        try:
            connection[1].write(_request_bytes(self.target, "GET", path, b""))
            status, headers = await _read_head(connection[0])
            body = b"".join([piece async for piece in _body_pieces(connection[0], headers)])
            reusable = "content-length" in headers or "transfer-encoding" in headers
            return status, body
        finally:
            self.pool.release(connection, reusable)

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """POST JSON already encoded and read the whole response body, whatever its status.

        Raises:
            HttpError: connection failure or a body cut short.
        """
        connection = await self.pool.acquire()
        reusable = False
        try:
            connection[1].write(_request_bytes(self.target, "POST", path, body))
            status, headers = await _read_head(connection[0])
            data = b"".join([piece async for piece in _body_pieces(connection[0], headers)])
            reusable = "content-length" in headers or "transfer-encoding" in headers
            return status, data
        finally:
            self.pool.release(connection, reusable)

    async def stream(self, path: str, payload: dict[str, object] | bytes) -> AsyncIterator[bytes]:
        """POST `payload` (a dict, or JSON already encoded); yield each SSE data payload as it arrives.

        `[DONE]` is not yielded.

        A non-streaming JSON response is yielded once, whole.

        Raises:
            HttpError: connection failure, non-2xx status, or a body cut short.
        """
        connection = await self.pool.acquire()
        reader, writer = connection
        reusable = False
        try:
            body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            writer.write(_request_bytes(self.target, "POST", path, body))
            status, headers = await _read_head(reader)
            pieces = _body_pieces(reader, headers)
            if status >= 300:
                body = b"".join([piece async for piece in pieces])
                reusable = True
                raise HttpError(f"HTTP {status}: {body[:200].decode('utf-8', 'replace')}")
            if "text/event-stream" not in headers.get("content-type", ""):
                yield b"".join([piece async for piece in pieces])
                reusable = True
                return
            pending = b""
            events = 0
            async for piece in pieces:
                pending += piece
                while b"\n\n" in pending and events < MAX_EVENTS:
                    event, pending = pending.split(b"\n\n", 1)
                    events += 1
                    for line in event.split(b"\n"):
                        if line.startswith(b"data:"):
                            data = line[5:].strip()
                            if data != b"[DONE]":
                                yield data
            reusable = True
        finally:
            self.pool.release(connection, reusable)

    def close(self) -> None:
        self.pool.close()
