"""An open-loop level on real loopback HTTP (`openloop.OpenLoop`): every request sent once, none before
its time, those on connections opened ahead in order, each answer called back once; an answer that
never comes is given up on; a request that finds no idle connection opens one. The clock is the real
one: nothing here asserts on a duration."""

from __future__ import annotations

import asyncio
import time

from gco.bench.clients.openloop import OpenLoop
from gco.bench.clients.serve import ServeSettings, encoded
from gco.bench.clients.transport import Client, Response
from tests.functional.bench.conftest import engine_server

Done = list[tuple[int, int, Response | None, str | None]]


OFFSETS = [0.0, 0.0, 0.002, 0.004, 0.004, 0.006]


def test_every_request_is_sent_in_order_and_each_answer_called_back_once() -> None:
    async def scenario() -> tuple[Done, int]:
        done: Done = []
        async with engine_server(ttft_s=0.001, itl_s=0.001) as (url, engine):
            client = Client(url)
            settings = ServeSettings(base_url=url, max_tokens=3)
            assert await client.pool.open_ahead(4) == 4
            offsets = OFFSETS
            asked: list[int] = []

            def request(i: int) -> bytes:
                asked.append(i)
                return encoded(client, settings, f"prompt {i}")

            def finished(i: int, sent: int, response: Response | None, error: str | None) -> None:
                done.append((i, sent, response, error))

            origin = time.perf_counter_ns()
            await OpenLoop(client, offsets, request, finished, timeout_s=30).run(origin)
            assert asked == [0, 1, 2, 3, 4, 5]  # each encoded once, ahead of its send
            assert engine.counters.success == 6
            assert len(client.pool.idle) >= 4  # every connection back in the pool, two opened as needed
            client.close()
            for _, sent, response, error in done:
                assert error is None
                assert response is not None
                assert response.status == 200
                assert origin <= sent == response.sent_ns <= response.ended_ns
        return done, origin

    done, origin = asyncio.run(scenario())
    assert sorted(index for index, *_ in done) == list(range(6))
    by_index = sorted(done, key=lambda item: item[0])
    sends = [sent for _, sent, *_ in by_index]
    # The first four go out on the connections opened ahead, in the planned order. A later one that
    # finds none idle opens one in a task of its own (the module's docstring) and is written once it
    # connects, so on a busy machine the next may find a connection back in the pool and go first.
    assert sends[:4] == sorted(sends[:4])
    assert all(sent >= origin + offset * 1e9 for sent, offset in zip(sends, OFFSETS, strict=True))


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An engine that reads the request and never answers (until the client gives up and closes)."""
    await reader.readuntil(b"\r\n\r\n")
    await reader.read()
    writer.close()


def test_an_answer_that_never_comes_is_given_up_on_after_the_timeout() -> None:
    async def scenario() -> Done:
        done: Done = []
        server = await asyncio.start_server(_silent, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            client = Client(url)
            await client.pool.open_ahead(1)
            request = client.target.request("POST", "/v1/completions", b"{}")
            loop = OpenLoop(client, [0.0], lambda _: request, lambda *item: done.append(item), timeout_s=0.05)
            await loop.run(time.perf_counter_ns())
            assert client.pool.idle == []  # the connection given up on is closed, not reused
            client.close()
        finally:
            server.close()
        return done

    [(index, _, response, error)] = asyncio.run(scenario())
    assert (index, response) == (0, None)
    assert error is not None and "no whole answer within 0.05 s" in error


def test_a_request_that_finds_no_idle_connection_opens_one() -> None:
    async def scenario() -> Done:
        done: Done = []
        async with engine_server(ttft_s=0.001, itl_s=0.001) as (url, _):
            client = Client(url)
            settings = ServeSettings(base_url=url, max_tokens=2)
            request = encoded(client, settings, "x")
            loop = OpenLoop(client, [0.0, 0.0], lambda _: request, lambda *item: done.append(item), 30)
            await loop.run(time.perf_counter_ns())  # nothing opened ahead: each opens its own
            client.close()
        return done

    done = asyncio.run(scenario())
    assert sorted(index for index, *_ in done) == [0, 1]
    assert all(
        error is None and response is not None and response.status == 200 for _, _, response, error in done
    )
