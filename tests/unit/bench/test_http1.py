"""The load client's HTTP/1.1 response parser: framing, limits, and each event stamped with its read's time.

Times are injected (the read number), so every assertion is about which read brought which byte.
"""

from __future__ import annotations

import pytest

from gco.bench.clients.http1 import ResponseParser, event_data, sse_events, time_at
from gco.bench.errors import HttpError

SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
EVENTS = [b'{"choices":[{"text":" a"}]}', b'{"choices":[{"text":" b"}]}', b"[DONE]"]


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse(data: bytes) -> bytes:
    return chunk(b"data: " + data + b"\n\n")


STREAM = SSE_HEAD + b"".join(sse(e) for e in EVENTS) + b"0\r\n\r\n"


def fed(pieces: list[bytes], head_only: bool = False) -> ResponseParser:
    parser = ResponseParser(head_only=head_only)
    for number, piece in enumerate(pieces):
        parser.feed(piece, number)
    return parser


@pytest.mark.parametrize("cut", range(1, len(STREAM)))
def test_a_stream_cut_anywhere_gives_the_same_body_and_events(cut: int) -> None:
    parser = fed([STREAM[:cut], STREAM[cut:]])
    assert parser.done
    assert parser.status == 200
    assert parser.keep_alive
    assert bytes(parser.body) == b"".join(b"data: " + e + b"\n\n" for e in EVENTS)
    events, rest = sse_events(parser.body, parser.marks)
    assert [data for _, data in events] == EVENTS
    assert rest == len(parser.body)
    assert parser.ended_ns == 1  # the second read ended it


def test_byte_by_byte_each_event_carries_the_read_that_completed_it() -> None:
    pieces = [STREAM[i : i + 1] for i in range(len(STREAM))]
    parser = fed(pieces)
    events, _ = sse_events(parser.body, parser.marks)
    for stamp, data in events:
        # read n brought byte n of the stream: the event's time is the read of its blank line's LF
        assert STREAM[: stamp + 1].endswith(b"data: " + data + b"\n\n")
    assert [stamp for stamp, _ in events] == sorted(stamp for stamp, _ in events)
    assert parser.ended_ns == len(STREAM) - 1


def test_one_read_per_event_stamps_each_event_with_its_own_read() -> None:
    pieces = [SSE_HEAD, *(sse(e) for e in EVENTS), b"0\r\n\r\n"]
    parser = fed(pieces)
    events, _ = sse_events(parser.body, parser.marks)
    assert [stamp for stamp, _ in events] == [1, 2, 3]
    assert parser.ended_ns == 4


def test_several_chunks_in_one_read_share_its_time() -> None:
    parser = fed([SSE_HEAD + sse(EVENTS[0]) + sse(EVENTS[1]), sse(EVENTS[2]) + b"0\r\n\r\n"])
    events, _ = sse_events(parser.body, parser.marks)
    assert [stamp for stamp, _ in events] == [0, 0, 1]


def test_chunk_extensions_trailers_and_hex_case() -> None:
    data = b"x" * 26
    parser = fed([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1A;name=v\r\n" + data + b"\r\n"])
    parser.feed(b"0\r\nx-trailer: 1\r\n\r\n", 1)
    assert parser.done
    assert bytes(parser.body) == data


def test_content_length_until_close_and_bodiless_answers() -> None:
    plain = fed([b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel", b"lo"])
    assert plain.done
    assert bytes(plain.body) == b"hello"
    assert plain.marks == [(3, 0), (5, 1)]
    closing = fed([b"HTTP/1.0 200 OK\r\n\r\nabc"])
    assert not closing.done
    assert not closing.keep_alive
    closing.close(7)
    assert closing.done
    assert closing.ended_ns == 7
    assert bytes(closing.body) == b"abc"
    assert fed([b"HTTP/1.1 204 No Content\r\ncontent-length: 3\r\n\r\n"]).done
    assert fed([b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n"], head_only=True).done
    assert fed([b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"]).done
    told = fed([b"HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 0\r\n\r\n"])
    assert not told.keep_alive


def test_an_interim_100_continue_is_skipped() -> None:
    parser = fed([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok"])
    assert parser.status == 201
    assert bytes(parser.body) == b"ok"


@pytest.mark.parametrize(
    ("pieces", "message"),
    [
        ([b"HTTP/1.1 2x0 OK\r\n\r\n"], "bad status line"),
        ([b"SMTP 220 hi\r\n\r\n"], "bad status line"),
        ([b"HTTP/1.1 200 OK\r\ncontent-length: 1\xb2\r\n\r\n"], "bad content-length"),
        ([SSE_HEAD + b"zz\r\n"], "bad chunk size"),
        ([SSE_HEAD + b"0x1\r\n"], "bad chunk size"),
        ([SSE_HEAD + b"2\r\nabc\r\n"], "longer than its size"),
        ([b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nab"], "after the end"),
        ([b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na", b"b"], "after the end"),
        ([b"HTTP/1.1 200 OK\r\nx: " + b"a" * 70000], "longer than"),
    ],
)
def test_malformed_answers_are_http_errors(pieces: list[bytes], message: str) -> None:
    with pytest.raises(HttpError, match=message):
        fed(pieces)


def test_a_connection_closed_early_is_an_error() -> None:
    with pytest.raises(HttpError, match="no response"):
        ResponseParser().close(0)
    with pytest.raises(HttpError, match="before the response ended"):
        fed([SSE_HEAD + sse(EVENTS[0])]).close(1)


def test_event_fields_as_the_standard_reads_them() -> None:
    assert event_data(b"data:x") == b"x"
    assert event_data(b"data: x") == b"x"
    assert event_data(b"data:  x") == b" x"
    assert event_data(b"data: a\ndata: b") == b"a\nb"
    assert event_data(b"data") == b""
    assert event_data(b": comment\nevent: ping") is None
    assert event_data(b"id: 1\r\ndata: y") == b"y"


def test_events_with_crlf_and_cr_line_ends_and_a_partial_tail() -> None:
    body = b"data: a\r\n\r\n: keep-alive\n\ndata: b\r\rdata: c"
    marks = [(len(body) - 7, 5), (len(body), 6)]
    events, rest = sse_events(body, marks)
    assert events == [(5, b"a"), (5, b"b")]
    assert body[rest:] == b"data: c"
    more = body + b"\n\n"
    later, _ = sse_events(more, [*marks, (len(more), 9)], rest)
    assert later == [(9, b"c")]


def test_time_at_is_the_first_read_that_reached_an_offset() -> None:
    marks = [(10, 100), (20, 200)]
    assert time_at(marks, 1) == 100
    assert time_at(marks, 10) == 100
    assert time_at(marks, 11) == 200
    with pytest.raises(ValueError, match="beyond"):
        time_at(marks, 21)
