"""An incremental HTTP/1.1 response parser that remembers when each byte of the body arrived.

The load client feeds it every read with the time the read was taken (`time.perf_counter_ns`, stamped
before any parsing); it decodes the framing (RFC 9112 section 6: chunked, content-length or
until-close) as bytes arrive and keeps the body and a list of marks `(body length after the read,
time of the read)`. Server-sent events are cut out of the body afterwards (`sse_events`), each
stamped with the read that completed it, so the timed path does no JSON and no event splitting. Pure:
no sockets, no clock of its own.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field

from gco.bench.errors import HttpError

MAX_HEADER_BYTES = 65536
MAX_BODY_BYTES = 1 << 30
# RFC 9112 section 7.1: chunk-size is hex digits; a chunk extension follows a ";" and is ignored.
_HEX = frozenset(b"0123456789abcdefABCDEF")
# The WHATWG HTML standard's event stream format (section 9.2.6, "Parsing an event stream"): lines end
# with CRLF, LF or CR, and a blank line ends an event.
_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_LINE_END = re.compile(rb"\r\n|\n|\r")
_DIGITS = re.compile(r"[0-9]+")
_SIZE_LINE = re.compile(rb"([0-9a-fA-F]{1,15})[ \t]*(?:;[^\r\n]*)?")
# Chunk-size lines already checked by `_SIZE_LINE`, with their sizes: a stream's chunks mostly repeat
# a few sizes, and a dict lookup is a fraction of the match (bounded: a line never seen is matched).
_SIZES: dict[bytes, int] = {}
_SIZES_MAX = 4096

_HEAD, _SIZE, _DATA, _DATA_END, _TRAILER, _LENGTH, _UNTIL_CLOSE, _DONE = range(8)

Mark = tuple[int, int]


@dataclass
class ResponseParser:
    """One response, fed read by read; `done` once its body is whole.

    Parameters:
        head_only: the request was HEAD, so the response has no body whatever its headers say.
    """

    head_only: bool = False
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)
    marks: list[Mark] = field(default_factory=list)
    done: bool = False
    ended_ns: int = 0
    keep_alive: bool = True
    _state: int = _HEAD
    _pending: bytes = b""
    _need: int = 0

    def feed(self, data: bytes, now_ns: int) -> None:
        """Take one read's bytes, read at `now_ns`.

        Raises:
            HttpError: a malformed status line, header block or chunk size, a header block or body
                over its limit, or bytes after the end of the response.
        """
        body = self.body
        before = len(body)
        if self._state == _SIZE and not self._pending:  # the usual read of a stream: whole chunks
            pos = self._whole_chunks(data)
            if pos != len(data):
                self._consume(data, pos)
        else:
            if self._state == _DONE:
                self.keep_alive = False
                raise HttpError(f"{len(data)} bytes after the end of the response")
            if self._pending:
                data, self._pending = self._pending + data, b""
            self._consume(data, self._whole_chunks(data) if self._state == _SIZE else 0)
        if self.done:
            self.ended_ns = now_ns
        if len(body) != before:
            self.marks.append((len(body), now_ns))
            if len(body) > MAX_BODY_BYTES:
                raise HttpError(f"body larger than {MAX_BODY_BYTES} bytes")

    def close(self, now_ns: int) -> None:
        """The connection ended at `now_ns`: the end of an until-close body.

        Raises:
            HttpError: the response was cut short (no status, or a body that had not ended).
        """
        self.keep_alive = False
        if self._state == _UNTIL_CLOSE:
            self._state, self.done, self.ended_ns = _DONE, True, now_ns
        elif self._state != _DONE:
            raise HttpError("connection closed before the response ended" if self.status else "no response")

    def _consume(self, data: bytes, pos: int) -> None:
        """The general path: `data` from `pos` on, whatever the state."""
        end = len(data)
        while pos < end:
            state = self._state
            if state == _DATA:
                take = min(self._need, end - pos)
                self.body += data[pos : pos + take]
                pos += take
                self._need -= take
                if self._need:
                    return
                self._state = _DATA_END
            elif state in (_SIZE, _DATA_END, _TRAILER):
                line_end = data.find(b"\r\n", pos)
                if line_end < 0:
                    self._keep(data[pos:])
                    return
                self._line(data[pos:line_end])
                pos = line_end + 2
            elif state == _LENGTH:
                take = min(self._need, end - pos)
                self.body += data[pos : pos + take]
                pos += take
                self._need -= take
                if not self._need:
                    self._state, self.done = _DONE, True
            elif state == _UNTIL_CLOSE:
                self.body += data[pos:] if pos else data
                return
            elif state == _HEAD:
                head_end = data.find(b"\r\n\r\n", pos)
                if head_end < 0:
                    self._keep(data[pos:])
                    return
                self._head(data[pos:head_end])
                pos = head_end + 4
            else:  # _DONE, with bytes left over
                self.keep_alive = False
                raise HttpError(f"{end - pos} bytes after the end of the response")

    def _whole_chunks(self, data: bytes) -> int:
        """The usual read of a stream, cheaply: whole non-empty chunks from the start of `data`, each
        appended to the body; where the general path (`_consume`) goes on."""
        pos, end, body = 0, len(data), self.body
        while True:
            line_end = data.find(b"\r\n", pos)
            if line_end < 0:
                return pos
            line = data[pos:line_end]
            length = _SIZES.get(line)
            if length is None:
                size = _SIZE_LINE.fullmatch(line)
                if size is None:
                    return pos  # the general path says what is wrong with it
                length = int(size[1], 16)
                if len(_SIZES) < _SIZES_MAX:
                    _SIZES[line] = length
            after = line_end + 2 + length
            if after == line_end + 2 or after + 2 > end or data[after : after + 2] != b"\r\n":
                return pos  # the last chunk, one cut by the read, or a bad one: the general path
            body += data[line_end + 2 : after]
            pos = after + 2
            if pos == end:
                return pos

    def _keep(self, rest: bytes) -> None:
        """Hold an unfinished line or header block for the next read, within its limit."""
        if len(rest) > MAX_HEADER_BYTES:
            raise HttpError(f"header or chunk-size line longer than {MAX_HEADER_BYTES} bytes")
        self._pending = rest

    def _line(self, line: bytes) -> None:
        """A CRLF-ended line of the chunked framing: a chunk size, a chunk's end, or a trailer."""
        if self._state == _DATA_END:
            if line:
                raise HttpError("chunk data longer than its size")
            self._state = _SIZE
        elif self._state == _TRAILER:
            if not line:  # the empty line that ends the trailer section
                self._state, self.done = _DONE, True
        else:
            digits = line.split(b";", 1)[0].strip()
            if not digits or not _HEX.issuperset(digits):
                raise HttpError(f"bad chunk size {line[:40]!r}")
            self._need = int(digits, 16)
            self._state = _DATA if self._need else _TRAILER

    def _head(self, raw: bytes) -> None:
        """Status line and header fields (RFC 9112 sections 4 and 5), then how the body is framed."""
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not _DIGITS.fullmatch(parts[1]):
            raise HttpError(f"bad status line {lines[0][:80]!r}")
        status = int(parts[1])
        if 100 <= status < 200:  # an interim response (100 Continue): the final one follows
            return
        self.status = status
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if colon:
                self.headers[name.strip().lower()] = value.strip()
        connection = self.headers.get("connection", "").lower()
        self.keep_alive = parts[0] != "HTTP/1.0" and "close" not in connection
        # RFC 9112 section 6.3: no body for HEAD, 1xx, 204 and 304; chunked wins over content-length.
        if self.head_only or status in (204, 304):
            self._state, self.done = _DONE, True
        elif "chunked" in self.headers.get("transfer-encoding", "").lower():
            self._state = _SIZE
        elif "content-length" in self.headers:
            length = self.headers["content-length"]
            if not _DIGITS.fullmatch(length):
                raise HttpError(f"bad content-length {length[:40]!r}")
            self._need = int(length)
            self._state = _LENGTH if self._need else _DONE
            self.done = not self._need
        else:
            self._state, self.keep_alive = _UNTIL_CLOSE, False


def time_at(marks: Sequence[Mark], offset: int) -> int:
    """The time of the read that brought body byte `offset - 1`, i.e. the first read after which the
    body was at least `offset` long (`marks` as `ResponseParser.marks`).

    Raises:
        ValueError: no read brought that many bytes.
    """
    index = bisect_left(marks, (offset, -1))
    if index == len(marks):
        raise ValueError(f"offset {offset} beyond the body")
    return marks[index][1]


def event_data(event: bytes) -> bytes | None:
    """The data of one server-sent event (its `data` fields joined by LF), None when it has none.

    As the standard says: `data:value` and `data: value` are the same field, a bare `data` line is an
    empty one, and any other field or a comment (a line starting with a colon) adds nothing.
    """
    data = []
    for line in _LINE_END.split(event):
        if line.startswith(b"data:"):
            data.append(line[6:] if line[5:6] == b" " else line[5:])
        elif line == b"data":
            data.append(b"")
    return b"\n".join(data) if data else None


def sse_events(
    body: bytes | bytearray, marks: Sequence[Mark], start: int = 0
) -> tuple[list[tuple[int, bytes]], int]:
    """The complete events of an event stream from `start` on: each one's data with the time of the
    read that completed it, and the offset after the last complete event (where the next call starts).

    Events without data (comments, `event:` or `id:` alone) are skipped; `[DONE]` is kept.

    Raises:
        ValueError: `marks` do not cover the body (no read brought an event's last byte).
    """
    events: list[tuple[int, bytes]] = []
    pos = start
    for match in _EVENT_END.finditer(body, start):
        data = event_data(bytes(body[pos : match.start()]))
        if data is not None:
            events.append((time_at(marks, match.end()), data))
        pos = match.end()
    return events, pos
