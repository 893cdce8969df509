"""A measured request decoded into its record, with injected times (ns): TTFT, ITL, e2e, tokens, failures."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gco.bench.clients.timing import Deferred, Timing, content, p99
from gco.bench.clients.transport import Response

MS = 1_000_000


def sse_body(events: list[dict[str, object]]) -> tuple[bytes, list[tuple[int, int]]]:
    """An event stream whose i-th event is completed by a read at (10 + i) ms."""
    body = b""
    marks = []
    for i, event in enumerate(events):
        body += b"data: " + json.dumps(event).encode() + b"\n\n"
        marks.append((len(body), (10 + i) * MS))
    body += b"data: [DONE]\n\n"
    marks.append((len(body), 99 * MS))
    return body, marks


def timing(response: Response | None, error: str | None = None) -> Timing:
    return Timing(3, "0-128", 2, 0.5, origin_ns=0, started_ns=400 * MS, response=response, error=error)


def streamed(events: list[dict[str, object]], status: int = 200) -> Response:
    body, marks = sse_body(events)
    headers = {"content-type": "text/event-stream"}
    return Response(status, headers, body, marks, sent_ns=501 * MS, ended_ns=600 * MS)


def text(value: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "text": value}]}


def test_times_come_from_the_reads_not_from_decoding() -> None:
    events: list[dict[str, object]] = [
        {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
        text(" a"),
        text(" b"),
        text(" c"),
    ]
    events.append({"choices": [], "usage": {"completion_tokens": 3}})
    response = streamed(events)
    # the i-th event came at (10 + i) ms after a send at 501 ms: shift the marks after the send
    response = Response(
        200,
        response.headers,
        response.body,
        [(offset, stamp + 500 * MS) for offset, stamp in response.marks],
        response.sent_ns,
        response.ended_ns,
    )
    record = timing(response).record()
    assert record.ok
    assert record.sent_s == pytest.approx(0.501)
    assert record.schedule_lag_s == pytest.approx(0.001)
    assert record.sent_clock_s == pytest.approx(0.501)
    assert record.ttft_s == pytest.approx(0.010)  # 511 ms - 501 ms: the first event with text
    assert record.itl_mean_s == pytest.approx(0.001)
    assert record.itl_p99_s == pytest.approx(0.001)
    assert record.e2e_s == pytest.approx(0.099)
    assert record.output_tokens == 3
    assert record.tokens_from == "usage"
    assert record.decode_tps == pytest.approx(2 / 0.089)


def test_tokens_counted_from_chunks_without_usage_and_chat_reasoning_counts() -> None:
    events: list[dict[str, object]] = [{"choices": [{"delta": {"reasoning_content": "hm"}}]}, text(" a")]
    response = streamed(events)
    record = timing(
        Response(200, response.headers, response.body, response.marks, 0, response.ended_ns)
    ).record()
    assert record.ok
    assert record.tokens_from == "chunks"
    assert record.output_tokens == 2
    assert record.ttft_s == pytest.approx(0.010)


def test_failures_become_records() -> None:
    assert timing(None, "HttpError: connect: refused").record().error == "HttpError: connect: refused"
    assert timing(None).record().sent_s == pytest.approx(0.4)
    refused = Response(503, {}, b'{"error":"busy"}', [(16, 1)], 0, 1)
    assert timing(refused).record().error == 'HttpError: HTTP 503: {"error":"busy"}'
    empty = streamed([{"choices": [], "usage": {"completion_tokens": 0}}])
    assert timing(empty).record().error == "no output tokens"
    garbled = Response(200, {"content-type": "text/event-stream"}, b"data: {nope\n\n", [(13, 1)], 0, 2)
    assert (timing(garbled).record().error or "").startswith("ValueError")


def test_a_whole_json_answer_is_one_event_at_its_end() -> None:
    body = json.dumps(text(" whole")).encode()
    response = Response(200, {"content-type": "application/json"}, body, [(len(body), 7 * MS)], 0, 8 * MS)
    record = timing(response).record()
    assert record.ok
    assert record.ttft_s == pytest.approx(0.008)
    assert record.itl_mean_s is None


def test_a_record_is_decoded_once_and_the_body_let_go() -> None:
    measured = timing(streamed([text(" a")]))
    first = measured.record()
    assert measured.response is None
    assert measured.record() is first


def test_deferred_holds_bodies_up_to_its_limit_then_decodes_at_once() -> None:
    deferred = Deferred(limit=2 * len(streamed([text(" a")]).body))
    held = [deferred.keep(timing(streamed([text(" a")]))) for _ in range(3)]
    assert [t.response is not None for t in held] == [True, True, False]
    assert deferred.held == 2 * len(streamed([text(" a")]).body)


def test_p99_is_numpys_linear_percentile() -> None:
    for values in ([1.0], [3.0, 1.0], [float(v) for v in range(101)], [0.5, 9.0, 2.0, 2.0, 7.5]):
        assert p99(values) == pytest.approx(float(np.percentile(values, 99)))


def test_content_of_completion_and_chat_chunks() -> None:
    assert content(text(" x")) == " x"
    assert content({"choices": []}) == ""
    assert content({"choices": [{"delta": {"content": "a", "reasoning_content": "b"}}]}) == "ab"
    assert content({"choices": [{"message": {"content": "m"}}]}) == "m"
