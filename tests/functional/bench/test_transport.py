"""The load client's transport on real loopback HTTP: reads stamped on arrival, keep-alive, answers cut short.

No timed assertion: the fake engine holds its answer after the first token until a file exists
(`--hold-file`), so "stamped when it arrived" is shown by order: the first token's stamp is before
the moment the test let the rest go, the last one after.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from gco.bench.clients import rxstamp, transport
from gco.bench.clients.http1 import sse_events
from gco.bench.clients.prompts import Prompt
from gco.bench.clients.serve import ServeSettings, encoded, send_timed
from gco.bench.clients.transport import Client, HttpError
from tests.functional.bench.conftest import engine_server

BOUND = 500  # polls of 10 ms at most (a bounded wait for the first token, never an assertion on time)
PROMPT = Prompt(index=0, text="x", words=1, bucket="0-128")


def test_the_first_token_is_stamped_when_it_arrives_not_when_the_answer_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hold = tmp_path / "go"
    first_read = asyncio.Event()
    original = transport.Connection.feed

    def spy(self: transport.Connection, data: bytes, now: int) -> None:
        original(self, data, now)
        if self.parser is not None and self.parser.body:
            first_read.set()

    monkeypatch.setattr(transport.Connection, "feed", spy)

    async def scenario() -> None:
        async with engine_server(hold_file=str(hold), ttft_s=0.001, itl_s=0.001) as (url, _):
            client = Client(url)
            settings = ServeSettings(base_url=url, max_tokens=4)
            request = encoded(client, settings, "x")
            pending = asyncio.create_task(send_timed(client, settings, PROMPT, request, 0.0, 0))
            async with asyncio.timeout(BOUND * 0.01):
                await first_read.wait()
            released = time.perf_counter_ns()
            hold.write_text("go")
            measured = await pending
            client.close()
        response = measured.response
        assert response is not None
        events, _ = sse_events(response.body, response.marks)
        tokens = [stamp for stamp, data in events if data != b"[DONE]" and json.loads(data)["choices"]]
        assert len(tokens) == 4
        assert response.sent_ns <= tokens[0] < released <= tokens[1] <= tokens[-1] <= response.ended_ns
        record = measured.record()
        assert record.ok
        assert record.ttft_s == (tokens[0] - response.sent_ns) / 1e9
        assert record.output_tokens == 4
        if rxstamp.loopback_stamps():  # the reads were timed by the kernel's receive stamps
            assert response.kernel_stamps > 0
            assert record.kernel_stamps == response.kernel_stamps

    asyncio.run(scenario())


def test_a_connection_is_kept_alive_and_reused_between_requests() -> None:
    async def scenario() -> None:
        async with engine_server() as (url, _):
            client = Client(url)
            assert (await client.get("/health"))[0] == 200
            [kept] = client.pool.idle
            status, body = await client.post("/v1/completions", b'{"prompt": "x", "max_tokens": 2}')
            assert status == 200
            assert json.loads(body)["usage"]["completion_tokens"] == 2
            assert client.pool.idle == [kept]
            too_large = await client.post("/v1/completions", b"x" * 2_000_001)
            assert too_large[0] == 413
            assert client.pool.idle == []  # the engine said `connection: close`
            client.close()

    asyncio.run(scenario())


async def _cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An engine that dies mid-answer: a head, one event, then the connection closes."""
    await reader.readuntil(b"\r\n\r\n")
    event = b'data: {"choices":[{"text":" a"}]}\n\n'
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    writer.write(head + b"%x\r\n%s\r\n" % (len(event), event))
    await writer.drain()
    writer.close()


def test_an_answer_cut_short_is_an_http_error_and_a_failed_record() -> None:
    async def scenario() -> None:
        server = await asyncio.start_server(_cut_short, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            client = Client(url)
            with pytest.raises(HttpError, match="before the response ended"):
                [p async for p in client.stream("/v1/completions", {"prompt": "x"})]
            settings = ServeSettings(base_url=url)
            measured = await send_timed(client, settings, PROMPT, encoded(client, settings, "x"), 0.0, 0)
            record = measured.record()
            assert not record.ok
            assert "before the response ended" in (record.error or "")
            assert client.pool.idle == []
            client.close()
        finally:
            server.close()

    asyncio.run(scenario())


def test_nothing_listening_is_an_http_error() -> None:
    async def scenario() -> None:
        server = await asyncio.start_server(_cut_short, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(HttpError, match="connect"):
            await Client(f"http://127.0.0.1:{port}").get("/health")

    asyncio.run(scenario())


def test_connections_opened_ahead_are_counted_once_and_a_request_is_written_on_one_at_once() -> None:
    async def scenario() -> None:
        async with engine_server() as (url, _):
            client = Client(url)
            assert client.start(b"GET /health HTTP/1.1\r\n\r\n") is None  # nothing idle: not written
            assert (await client.get("/health"))[0] == 200  # one idle connection already
            assert await client.pool.open_ahead(3) == 3  # the idle one counts; two more are opened
            assert await client.pool.open_ahead(2) == 3  # enough idle: nothing opened
            started = client.start(client.target.request("GET", "/health", b""))
            assert started is not None
            assert len(client.pool.idle) == 2
            response = await client.finish(started)
            assert (response.status, response.sent_ns) == (200, started.sent_ns)
            assert len(client.pool.idle) == 3  # back in the pool after its whole answer
            client.close()

    asyncio.run(scenario())


def test_opening_ahead_against_nothing_listening_stops_and_the_request_says_why() -> None:
    async def scenario() -> None:
        server = await asyncio.start_server(_cut_short, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        client = Client(f"http://127.0.0.1:{port}")
        assert await client.pool.open_ahead(5) == 0
        with pytest.raises(HttpError, match="connect"):
            await client.get("/health")

    asyncio.run(scenario())
