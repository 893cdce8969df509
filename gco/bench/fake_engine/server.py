"""The fake engine's HTTP server: one coroutine per connection, keep-alive, HTTP/1.1 chunked SSE.

It answers as vLLM's OpenAI server (`/v1/completions`, `/v1/chat/completions`, `/v1/models`) and
TGI's (`/generate`, `/generate_stream`, `/info`), with vLLM-named counters on `/metrics`, at the speed,
noise, drift and failures its `Behaviour` gives (the package's docstring says what it does not model).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from gco.bench.fake_engine import wire
from gco.bench.prefix_blocks import PrefixBlocks
from gco.engines import vllm
from gco.front_door import MAX_REQUEST_BYTES


@dataclass
class Counters:
    """vLLM-style counters exposed on /metrics."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    success: int = 0
    failed: int = 0
    cache_queries: int = 0
    cache_hits: int = 0
    running: int = 0
    blocks: PrefixBlocks = field(default_factory=PrefixBlocks)


@dataclass
class Behaviour:
    """How the fake engine behaves; built from its command line."""

    port: int
    style: str
    ttft_s: float
    itl_s: float
    speed: float
    noise: float
    drift: float
    fail_rate: float
    crash_after: int
    crash_once_file: str
    never_ready: bool
    seed: int
    tokens: int
    trace: bool = False
    model: str = wire.FAKE_MODEL
    revision: str = ""
    empty_output: bool = False
    crash_signal: int = 0
    clip_s: dict[str, float] = field(default_factory=dict)
    hold_file: str = ""


class FakeEngine:
    """The HTTP server: one coroutine per connection, keep-alive, HTTP/1.1 chunked SSE."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.counters = Counters()
        self.requests = 0
        self.rng = random.Random(behaviour.seed)
        self.trace: list[tuple[float, float, float]] | None = [] if behaviour.trace else None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = time.perf_counter()
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)
                }
                length = int(headers.get("content-length", "0"))
                if length > MAX_REQUEST_BYTES:  # refused unread, as TGI's --payload-limit refuses
                    await self.respond(writer, 413, wire.TOO_LARGE, close=True)
                    return
                body = await reader.readexactly(length) if length else b""
                # Routed by its path alone, as vLLM's and TGI's routers route: a query string is
                # not part of the route (`?x=1` on /v1/models is still /v1/models).
                await self.route(method, path.partition("?")[0], body, writer, arrived)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def route(
        self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter, arrived: float = 0.0
    ) -> None:
        if path == "/health":
            status = 503 if self.behaviour.never_ready else 200
            await self.respond(writer, status, b"{}" if status == 200 else b'{"status":"loading"}')
        elif path == "/metrics":
            await self.respond(writer, 200, self.metrics().encode(), "text/plain; version=0.0.4")
        elif path == "/debug/trace" and self.trace is not None:
            trace, self.trace = self.trace, []
            rows = [{"arrived": a, "ttft_s": t, "itl_s": i} for a, t, i in trace]
            await self.respond(writer, 200, json.dumps(rows).encode())
        elif path.startswith(wire.ENV_DIGEST_PATH):
            digest = wire.env_digest(path.removeprefix(wire.ENV_DIGEST_PATH))
            await self.respond(writer, 200, json.dumps(digest).encode())
        elif path == "/v1/models":
            entry = {"id": self.behaviour.model, "object": "model", "root": self.behaviour.model}
            models = {"object": "list", "data": [entry]}
            await self.respond(writer, 200, json.dumps(models).encode())
        elif path == "/info":
            info = {"model_id": self.behaviour.model, "model_sha": self.behaviour.revision or None}
            await self.respond(writer, 200, json.dumps(info).encode())
        elif method == "POST" and path == "/generate":
            await self.generate_tgi(body, writer)
        elif method == "POST" and path == "/generate_stream":
            await self.generate_tgi(body, writer, stream=True)
        elif method == "POST" and path == wire.CLIP_PATH and self.behaviour.clip_s:
            await self.clip(body, writer)
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            await self.generate(path, body, writer, arrived or time.perf_counter())
        else:
            await self.respond(writer, 404, b'{"error":"not found"}')

    async def respond(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        ctype: str = "application/json",
        *,
        close: bool = False,
    ) -> None:
        """One whole answer; `close` says the connection ends after it (its request body unread)."""
        ending = "connection: close\r\n" if close else ""
        head = f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n{ending}\r\n"
        writer.write(head.encode() + body)
        await writer.drain()

    def prefix_cache(self, prompt: str) -> None:
        queried, hits = self.counters.blocks.lookup_and_insert(prompt)
        self.counters.cache_queries += queried
        self.counters.cache_hits += hits

    def maybe_crash(self) -> None:
        b = self.behaviour
        if b.crash_after and self.requests > b.crash_after:
            marker = Path(b.crash_once_file) if b.crash_once_file else None
            if marker is None or not marker.exists():
                if marker is not None:
                    marker.write_text("crashed\n", encoding="utf-8")
                print("ERROR fake engine crashing on purpose", flush=True)
                wire.crash(b.crash_signal)

    async def generate(self, path: str, body: bytes, writer: asyncio.StreamWriter, arrived: float) -> None:
        b = self.behaviour
        self.requests += 1
        self.maybe_crash()
        try:
            request = json.loads(body)
        except ValueError:
            await self.respond(writer, 400, b'{"error":"bad json"}')
            return
        chat = path.endswith("chat/completions")
        prompt = (
            " ".join(str(m.get("content", "")) for m in request.get("messages", []))
            if chat
            else str(request.get("prompt", ""))
        )
        if self.rng.random() < b.fail_rate:
            self.counters.failed += 1
            await self.respond(writer, 500, b'{"error":"injected failure"}')
            return
        self.prefix_cache(prompt)
        prompt_tokens = max(1, len(prompt.split()))
        tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or b.tokens)
        factor = self.slowdown()
        self.counters.running += 1
        try:
            if request.get("stream"):
                await self.stream(
                    writer, chat, tokens, prompt_tokens, factor, bool(request.get("stream_options")), arrived
                )
            else:
                await asyncio.sleep(b.ttft_s * factor + b.itl_s * factor * (tokens - 1))
                text = "" if b.empty_output else " tok" * tokens
                choice = (
                    {"index": 0, "message": {"role": "assistant", "content": text}}
                    if chat
                    else {"index": 0, "text": text}
                )
                usage = {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}
                answer = {"model": b.model, "choices": [choice], "usage": usage}
                await self.respond(writer, 200, json.dumps(answer).encode())
        finally:
            self.counters.running -= 1
        self.counters.prompt_tokens += prompt_tokens
        self.counters.generation_tokens += tokens
        self.counters.success += 1

    async def generate_tgi(self, body: bytes, writer: asyncio.StreamWriter, *, stream: bool = False) -> None:
        """TGI's `/generate`: `{inputs, parameters {max_new_tokens}}` -> `{generated_text}`; with
        `stream`, `/generate_stream`: one SSE event per token (`stream_tgi`)."""
        b = self.behaviour
        self.requests += 1
        self.maybe_crash()
        try:
            request = json.loads(body)
            prompt = str(request["inputs"])
            tokens = int((request.get("parameters") or {}).get("max_new_tokens") or b.tokens)
        except (ValueError, KeyError, TypeError, AttributeError):
            self.counters.failed += 1
            await self.respond(writer, 422, b'{"error":"inputs required","error_type":"validation"}')
            return
        self.counters.running += 1
        try:
            factor = self.slowdown()
            if stream:
                await self.stream_tgi(writer, tokens, factor)
            else:
                await asyncio.sleep(b.ttft_s * factor + b.itl_s * factor * (tokens - 1))
        finally:
            self.counters.running -= 1
        self.counters.prompt_tokens += max(1, len(prompt.split()))
        self.counters.generation_tokens += tokens
        self.counters.success += 1
        if not stream:
            text = "" if b.empty_output else " tok" * tokens
            await self.respond(writer, 200, json.dumps({"generated_text": text}).encode())

    async def stream_tgi(self, writer: asyncio.StreamWriter, tokens: int, factor: float) -> None:
        """TGI's stream events (text-generation-inference `router/src/server.rs`, `generate_stream`:
        `StreamResponse {index, token {id, text, logprob, special}, generated_text, details}`,
        `generated_text` set on the last event only)."""
        writer.write(wire.SSE_HEAD)
        await self.paced(writer, tokens, factor, lambda i: wire.tgi_event(i, tokens))
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async def paced(
        self, writer: asyncio.StreamWriter, tokens: int, factor: float, event: Callable[[int], bytes]
    ) -> tuple[float, float]:
        """Write `event(i)` for each token at its due time (TTFT, then ITL apart), holding after the
        first one while `--hold-file` is absent; (first, last) write times."""
        b = self.behaviour
        first = last = 0.0
        start = time.perf_counter()
        for i in range(tokens):
            due = start + b.ttft_s * factor + b.itl_s * factor * i
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            writer.write(event(i))
            last = time.perf_counter()
            first = first or last
            await writer.drain()
            if i == 0 and b.hold_file:
                start += await wire.hold(Path(b.hold_file))
        return first, last

    def slowdown(self) -> float:
        """This request's time factor: drift over requests served, over speed, times the noise."""
        b = self.behaviour
        noise = self.rng.lognormvariate(0.0, b.noise) if b.noise else 1.0
        return (1.0 + b.drift * self.requests) / b.speed * noise

    async def clip(self, body: bytes, writer: asyncio.StreamWriter) -> None:
        """A whole clip: headers at once, the body after the known time of the requested size.

        The body comes only after the clip time, so a client that stops at the headers measures too little.
        """
        b = self.behaviour
        self.requests += 1
        self.maybe_crash()
        try:
            size = str(json.loads(body).get("size"))
        except (ValueError, AttributeError):
            await self.respond(writer, 400, b'{"error":"bad json"}')
            return
        if size not in b.clip_s:
            self.counters.failed += 1
            await self.respond(writer, 400, json.dumps({"error": f"unknown size {size}"}).encode())
            return
        if self.rng.random() < b.fail_rate:
            self.counters.failed += 1
            await self.respond(writer, 500, b'{"error":"injected failure"}')
            return
        due = time.perf_counter() + b.clip_s[size] * self.slowdown()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        self.counters.running += 1
        try:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        finally:
            self.counters.running -= 1
        data = json.dumps({"id": f"video-{self.requests}", "object": "video", "size": size}).encode()
        data += b" " * max(0, wire.CLIP_BYTES - len(data))
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        await writer.drain()
        self.counters.success += 1

    async def stream(
        self,
        writer: asyncio.StreamWriter,
        chat: bool,
        tokens: int,
        prompt_tokens: int,
        factor: float,
        usage: bool,
        arrived: float,
    ) -> None:
        token = wire.TOKEN_CHUNK[chat]
        writer.write(wire.SSE_HEAD)
        first, last = await self.paced(writer, tokens, factor, lambda _: token)
        if usage:
            self.chunk(
                writer,
                {"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}},
            )
        data = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        await writer.drain()
        if self.trace is not None and len(self.trace) < wire.MAX_TRACE:
            itl = (last - first) / (tokens - 1) if tokens > 1 else 0.0
            self.trace.append((arrived, first - arrived, itl))

    @staticmethod
    def chunk(writer: asyncio.StreamWriter, payload: object) -> None:
        writer.write(wire.sse(payload))

    def metrics(self) -> str:
        c = self.counters
        values = (c.prompt_tokens, c.generation_tokens, c.success, c.failed, c.cache_queries, c.cache_hits)
        out = []
        for name, value in zip(vllm.COUNTERS, values, strict=True):
            out += [
                f"# HELP {name} fake counter",
                f"# TYPE {name} counter",
                f'{name}_total{{model_name="fake/model"}} {value}',
            ]
        running = vllm.RUNNING_METRIC
        out += [
            f"# HELP {running} running",
            f"# TYPE {running} gauge",
            f'{running}{{model_name="fake/model"}} {c.running}',
        ]
        return "\n".join(out) + "\n"


async def serve(engine: FakeEngine, stop: asyncio.Event | None = None) -> None:
    """Listen on 127.0.0.1 until `stop` is set (by default: on SIGTERM, unless SIGTERM is ignored)."""
    server = await asyncio.start_server(engine.handle, "127.0.0.1", engine.behaviour.port)
    print(f"INFO Uvicorn running on http://127.0.0.1:{engine.behaviour.port}", flush=True)
    if stop is None:
        stop = asyncio.Event()
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()
