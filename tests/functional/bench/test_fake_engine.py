"""The fake engine in-process: routes, non-streaming and chat answers, metrics, crash and start-up modes."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from gco.bench.analysis.metrics import parse_metrics
from gco.bench.clients.transport import Client
from gco.bench.fake_engine import cli, server
from gco.bench.prefix_blocks import CAPACITY
from gco.front_door import MAX_REQUEST_BYTES
from tests.functional.bench.conftest import behaviour, engine_server


def test_routes_metrics_and_plain_answers() -> None:
    async def scenario() -> None:
        async with engine_server(never_ready=True) as (url, engine):
            client = Client(url)
            assert (await client.get("/health"))[0] == 503
            assert (await client.get("/nope"))[0] == 404
            chat = [
                p
                async for p in client.stream(
                    "/v1/chat/completions", {"messages": [{"content": "hello there"}], "max_tokens": 3}
                )
            ]
            assert json.loads(chat[0])["choices"][0]["message"]["content"] == " tok" * 3
            streamed = [
                p
                async for p in client.stream(
                    "/v1/chat/completions", {"messages": [{"content": "x"}], "stream": True}
                )
            ]
            assert len(streamed) == 8
            _, body = await client.get("/metrics")
            values = parse_metrics(body.decode())
            assert values["vllm:generation_tokens_total"] == 11
            assert values["vllm:request_success_total"] == 2
            assert engine.counters.running == 0
            client.close()
            reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
            writer.write(b"POST /v1/completions HTTP/1.1\r\ncontent-length: 5\r\n\r\n{bad}")
            assert b" 400 " in await reader.readline()
            writer.close()

    asyncio.run(scenario())


def test_trace_records_arrivals_and_own_timings() -> None:
    async def scenario() -> None:
        async with engine_server(trace=True, ttft_s=0.003, itl_s=0.001) as (url, _):
            client = Client(url)
            [
                p
                async for p in client.stream(
                    "/v1/completions", {"prompt": "x", "max_tokens": 4, "stream": True}
                )
            ]
            _, body = await client.get("/debug/trace")
            rows = json.loads(body)
            assert len(rows) == 1
            assert rows[0]["ttft_s"] >= 0.003
            assert rows[0]["itl_s"] > 0
            assert json.loads((await client.get("/debug/trace"))[1]) == []
            client.close()

    asyncio.run(scenario())


def test_prefix_cache_counts_hits_only_for_shared_prefixes() -> None:
    engine = server.FakeEngine(behaviour())
    engine.prefix_cache("a" * 64)
    engine.prefix_cache("a" * 64)
    engine.prefix_cache("[warmup x] " + "a" * 64)
    assert (engine.counters.cache_queries, engine.counters.cache_hits) == (12, 4)


def test_crash_once_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_exit(code: int) -> None:
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    marker = tmp_path / "crashed"
    engine = server.FakeEngine(behaviour(crash_after=1, crash_once_file=str(marker)))
    engine.requests = 2
    with pytest.raises(SystemExit):
        engine.maybe_crash()
    assert marker.exists()
    engine.maybe_crash()


def test_main_prints_start_up_lines_and_serves_until_stopped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    async def fake_serve(engine: server.FakeEngine, stop: asyncio.Event | None = None) -> None:
        seen["engine"] = engine

    monkeypatch.setattr(cli, "serve", fake_serve)
    assert (
        cli.main(
            [
                "--port",
                "1",
                "--style",
                "sglang",
                "--setting",
                "disable_cuda_graph=True",
                "--log-line",
                "WARNING hello",
                "--speed",
                "2",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "server_args=ServerArgs(" in out
    assert "disable_cuda_graph=True" in out
    assert "WARNING hello" in out
    assert seen["engine"].behaviour.speed == 2.0

    async def real() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(server.serve(server.FakeEngine(behaviour()), stop))
        await asyncio.sleep(0.05)
        stop.set()
        await task

    asyncio.run(real())


def test_a_large_prompt_keeps_the_prefix_cache_within_its_bound() -> None:
    engine = server.FakeEngine(behaviour())
    prompt = "".join(f"{index:015d}|" for index in range(MAX_REQUEST_BYTES // 16))  # all blocks distinct
    engine.prefix_cache(prompt)
    assert len(engine.counters.blocks) == CAPACITY
    assert engine.counters.cache_queries == MAX_REQUEST_BYTES // 16
    engine.prefix_cache(prompt)  # its first blocks were evicted: nothing leads with a hit
    assert engine.counters.cache_hits == 0 and len(engine.counters.blocks) == CAPACITY
    short = "abcdefghijklmnop" * 8
    engine.prefix_cache(short)
    engine.prefix_cache(short)
    assert engine.counters.cache_hits == 8 and len(engine.counters.blocks) == CAPACITY


def test_a_body_over_the_limit_is_refused_413_unread() -> None:
    async def scenario() -> None:
        async with engine_server() as (url, engine):
            reader, writer = await asyncio.open_connection("127.0.0.1", int(url.rsplit(":", 1)[1]))
            head = f"POST /v1/completions HTTP/1.1\r\ncontent-length: {MAX_REQUEST_BYTES + 1}\r\n\r\n"
            writer.write(head.encode())  # the body is never sent: the engine must not wait for it
            assert b" 413 " in await asyncio.wait_for(reader.readline(), 10)
            writer.close()
            assert engine.requests == 0 and len(engine.counters.blocks) == 0

    asyncio.run(scenario())
