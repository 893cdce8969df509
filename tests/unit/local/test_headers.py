"""The local servers' header parsing gives `http.client.parse_headers`' own message for every block,
and their `Date` is `formatdate`'s."""

from __future__ import annotations

import email.parser
import http.client
import io
from email.utils import formatdate
from typing import Any

import pytest

from gco.local.processes import headers
from gco.local.processes.headers import MAX_HEADERS, MAX_LINE, http_date, parse_headers


def email_parsed(block: bytes) -> Any:
    """What `http.client.parse_headers` answers (the email package's parser), whatever is installed."""
    lines = http.client._read_headers(io.BytesIO(block))  # type: ignore[attr-defined]
    return email.parser.Parser(_class=http.client.HTTPMessage).parsestr(b"".join(lines).decode("iso-8859-1"))


def described(message: Any) -> dict[str, Any]:
    """A message's state, its defects by kind (a defect compares by identity)."""
    return {**vars(message), "defects": [type(defect) for defect in message.defects]}


BLOCKS = {
    "ordinary": b"Host: 127.0.0.1:5000\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
    "no space, blanks kept at the end": b"X-A:value\r\nX-B: \t spaced  \r\n\r\n",
    "empty value": b"X-Empty:\r\nX-Also: \r\n\r\n",
    "repeated": b"Accept: a\r\nAccept: b\r\naccept: c\r\n\r\n",
    "bare newlines": b"Host: h\nX: y\n\n",
    "latin-1 value": "X-Name: caf\u00e9 \u00ff\r\n\r\n".encode("iso-8859-1"),
    "colon in the value": b"Authorization: AWS4-HMAC-SHA256 Credential=a/b, Signature=c:d\r\n\r\n",
    "folded": b"X-Long: first\r\n second\r\n\tthird\r\nHost: h\r\n\r\n",
    "bare CR inside": b"X-A: one\rtwo\r\nHost: h\r\n\r\n",
    "not a header": b"Host: h\r\nnot a header line\r\nX: y\r\n\r\n",
    "name with a space": b"Bad Name: v\r\nHost: h\r\n\r\n",
    "mbox From line": b"From someone\r\nHost: h\r\n\r\n",
    "empty name": b": v\r\nHost: h\r\n\r\n",
    "cut off at the end": b"Host: h\r\nX: y",
    "ended by the stream": b"Host: h\r\nX: y\r\n",
    "no headers": b"\r\n",
    "nothing": b"",
}


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_a_header_block_parses_to_the_email_packages_message(name: str) -> None:
    block = BLOCKS[name]
    ours, reference = parse_headers(io.BytesIO(block)), email_parsed(block)
    assert type(ours) is type(reference)
    assert ours.items() == reference.items()
    assert described(ours) == described(reference)  # defects, payload, policy: the same message
    stream = io.BytesIO(block)
    parse_headers(stream)
    rest = io.BytesIO(block)
    http.client._read_headers(rest)  # type: ignore[attr-defined]
    assert stream.read() == rest.read()  # the body is left where http.client leaves it


def test_the_limits_of_http_client_are_kept() -> None:
    with pytest.raises(http.client.LineTooLong):
        parse_headers(io.BytesIO(b"X: " + b"a" * MAX_LINE + b"\r\n\r\n"))
    many = b"".join(b"X-%d: v\r\n" % index for index in range(MAX_HEADERS + 1)) + b"\r\n"
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        parse_headers(io.BytesIO(many))
    just = b"".join(b"X-%d: v\r\n" % index for index in range(MAX_HEADERS - 1)) + b"\r\n"
    assert len(parse_headers(io.BytesIO(just))) == MAX_HEADERS - 1


def test_install_puts_it_where_http_server_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http.client, "parse_headers", http.client.parse_headers)  # restored after
    headers.install()
    assert http.client.parse_headers is parse_headers


@pytest.mark.parametrize("moment", [0.0, 1_764_900_000.0, 1_764_900_000.999, 1_764_900_001.2])
def test_the_date_is_formatdates_for_its_second(moment: float) -> None:
    assert http_date(moment) == formatdate(moment, usegmt=True)


def test_the_date_is_made_once_a_second(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[float] = []

    def counted(timeval: float, usegmt: bool) -> str:
        made.append(timeval)
        return formatdate(timeval, usegmt=usegmt)

    monkeypatch.setattr(headers, "formatdate", counted)
    kept = headers._KeptDate()
    assert kept(100.1) == kept(100.9) == formatdate(100, usegmt=True)
    assert kept(101.0) == formatdate(101, usegmt=True)
    assert made == [100, 101]
