"""Request headers and the `Date` header of the local stack's HTTP servers, made without the email
package.

The local servers (moto's, on werkzeug's handler, and the stand-in API servers, on `http.server`)
parse each request's headers with `http.client.parse_headers`, which hands the header block to the
email package's feed parser, and write each answer's `Date` with `email.utils.formatdate`. Profiled
at 1,000 endpoints written at once (py-spy), the two were about a sixth of a stand-in API server's
samples: a cost of the stand-ins (a real API server and DynamoDB parse headers in Go and Java), not
of the reconciler. So:

- `parse_headers` builds the same `HTTPMessage` (the same headers, in order, stored as the email
  package's `compat32` policy stores them: the name as sent, the value after the colon without its
  leading blanks and line end) for a block of ordinary lines, each `name: value` with a name of the
  characters the feed parser accepts (`email.feedparser.headerRE`) and no line break inside; any
  other block (folded lines, a bare CR, a line that is not a header, an mbox `From ` line) goes to
  the email package as before, so its defects and quirks are the email package's own. The limits
  of `http.client._read_headers` are kept: a line over 65,536 bytes raises `LineTooLong`, more than
  100 lines `HTTPException`, which `http.server` answers with a 431.
- `http_date` is `formatdate(usegmt=True)` kept for the current second (the header's resolution).

`install` puts `parse_headers` in `http.client` for the server process that calls it (`http.server`
looks it up there on each request); the servers' handlers call `http_date` themselves.
"""

from __future__ import annotations

import email.parser
import http.client
import re
import threading
import time
from email.utils import formatdate
from typing import Any, BinaryIO

MAX_LINE = 65536  # http.client._MAXLINE
MAX_HEADERS = 100  # http.client._MAXHEADERS
# One ordinary header line: a name of the feed parser's header characters (printable ASCII but the
# colon), the colon, a value with no CR or LF in it, and the line's end.
ORDINARY = re.compile(r"([\x21-\x39\x3b-\x7e]+):[ \t]*([^\r\n]*)\r?\n")
ENDS = (b"\r\n", b"\n", b"")


def read_header_lines(fp: BinaryIO) -> list[bytes]:
    """The header lines up to and including the blank line (or the end of the stream), as
    `http.client._read_headers` reads them.

    Raises:
        http.client.LineTooLong: a line longer than `MAX_LINE`.
        http.client.HTTPException: more than `MAX_HEADERS` lines.
    """
    lines: list[bytes] = []
    while True:
        line = fp.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise http.client.LineTooLong("header line")
        lines.append(line)
        if len(lines) > MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")
        if line in ENDS:
            return lines


def parse_headers(fp: BinaryIO, _class: type[Any] = http.client.HTTPMessage) -> Any:
    """`http.client.parse_headers`: the request's headers read from `fp` as an `HTTPMessage`.

    Raises:
        http.client.LineTooLong: a line longer than `MAX_LINE` (`read_header_lines`).
        http.client.HTTPException: more than `MAX_HEADERS` lines.
    """
    lines = read_header_lines(fp)
    text = [line.decode("iso-8859-1") for line in lines[:-1]]
    matched = [ORDINARY.fullmatch(line) for line in text]
    if any(match is None for match in matched):  # not a block of ordinary lines: the email package's
        return email.parser.Parser(_class=_class).parsestr("".join(text) + lines[-1].decode("iso-8859-1"))
    message = _class()
    for match in matched:
        assert match is not None  # every line matched (checked above)
        message.set_raw(match.group(1), match.group(2))
    message.set_payload("")  # as the parser leaves a message whose body is empty
    return message


class _KeptDate:
    """The `Date` of the current second, made once a second (`formatdate` is per second)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._second = -1
        self._text = ""

    def __call__(self, timestamp: float | None = None) -> str:
        second = int(time.time() if timestamp is None else timestamp)
        with self._lock:
            if second != self._second:
                self._second, self._text = second, formatdate(second, usegmt=True)
            return self._text


http_date = _KeptDate()


def install() -> None:
    """Parse request headers with `parse_headers` in this process's HTTP servers."""
    http.client.parse_headers = parse_headers  # type: ignore[assignment]  # the same signature
