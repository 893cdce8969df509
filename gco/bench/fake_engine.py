"""A fake OpenAI-compatible engine for tests and the local stack: SSE completions, clips, /health, /metrics.

It stands in for vLLM, TGI or SGLang (vLLM's `/v1/completions` and `/v1/models`, streamed as
server-sent events with `stream: true`; TGI's `/generate`, `/generate_stream` (its SSE events, one
per token, the last carrying `generated_text`) and `/info`, naming the model id and revision it was
started with). `--hold-file` holds a streamed answer after its first token until that file exists,
so a test can prove a caller gets the first event while the engine is still generating.
`GET /debug/env-digest/<NAME>` answers the SHA-256 of its environment variable NAME (null when
unset), never the value, so a test can prove a secret reached the engine without exposing it. In clip
mode it stands in for a video
engine answering whole clips on POST /v1/videos, where no GPU is available. Configurable speed,
noise, drift and failures; it logs the start-up lines of real vLLM 0.11, TGI 2.2 or SGLang output with
its own model and flags (`fake_log`: `--enforce-eager`, `--cpu-offload-gb`, ... as the real engines
take them). It does not model batching, memory or a tokenizer (a token is a fixed chunk and a clip is
a fixed-size body after a known time per size), and the flags change only the log, not its speed.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gco import engines
from gco.bench.fake_log import startup_lines, styles
from gco.bench.prefix_blocks import PrefixBlocks
from gco.engines import vllm
from gco.engines.base import EngineFlags
from gco.front_door import MAX_REQUEST_BYTES
from gco.processes.interpreter import PYTHON

MAX_TRACE = 1_000_000
CLIP_PATH = "/v1/videos"
ENV_DIGEST_PATH = "/debug/env-digest/"
CLIP_BYTES = 4096
FAKE_MODEL = "fake/model"
TOO_LARGE = json.dumps({"error": f"request body larger than {MAX_REQUEST_BYTES} bytes"}).encode()


def _sse(payload: object) -> bytes:
    data = b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def _token_chunk(chat: bool) -> bytes:
    """One OpenAI streaming chunk carrying one token, in the completions or chat shape."""
    if chat:
        choice: dict[str, object] = {"index": 0, "delta": {"content": " tok"}, "finish_reason": None}
        kind = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": None}
        kind = "text_completion"
    return _sse({"id": "cmpl-fake", "object": kind, "created": 0, "model": FAKE_MODEL, "choices": [choice]})


TOKEN_CHUNK = {True: _token_chunk(True), False: _token_chunk(False)}
SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
HOLD_POLL_S = 0.01
HOLD_MAX_S = 60.0  # a held stream goes on after this even without its file (no test hangs forever)


def _tgi_event(index: int, tokens: int) -> bytes:
    """TGI's event for token `index` of `tokens` (the last one carries the whole text)."""
    token = {"id": index, "text": " tok", "logprob": 0.0, "special": False}
    done = index == tokens - 1
    return _sse(
        {
            "index": index + 1,
            "token": token,
            "generated_text": " tok" * tokens if done else None,
            "details": None,
        }
    )


async def _hold(path: Path) -> float:
    """Wait (bounded) until `path` exists; the seconds waited."""
    started = time.perf_counter()
    while not path.exists() and time.perf_counter() - started < HOLD_MAX_S:
        await asyncio.sleep(HOLD_POLL_S)
    return time.perf_counter() - started


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
    model: str = FAKE_MODEL
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
                    await self.respond(writer, 413, TOO_LARGE, close=True)
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
        elif path.startswith(ENV_DIGEST_PATH):
            digest = env_digest(path.removeprefix(ENV_DIGEST_PATH))
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
        elif method == "POST" and path == CLIP_PATH and self.behaviour.clip_s:
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
                crash(b.crash_signal)

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
        writer.write(SSE_HEAD)
        await self.paced(writer, tokens, factor, lambda i: _tgi_event(i, tokens))
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
                start += await _hold(Path(b.hold_file))
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
        data += b" " * max(0, CLIP_BYTES - len(data))
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
        token = TOKEN_CHUNK[chat]
        writer.write(SSE_HEAD)
        first, last = await self.paced(writer, tokens, factor, lambda _: token)
        if usage:
            self.chunk(
                writer,
                {"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": tokens}},
            )
        data = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        await writer.drain()
        if self.trace is not None and len(self.trace) < MAX_TRACE:
            itl = (last - first) / (tokens - 1) if tokens > 1 else 0.0
            self.trace.append((arrived, first - arrived, itl))

    @staticmethod
    def chunk(writer: asyncio.StreamWriter, payload: object) -> None:
        writer.write(_sse(payload))

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


def env_digest(name: str) -> dict[str, str | None]:
    """The SHA-256 (hex) of environment variable `name`, None where unset; never the value."""
    value = os.environ.get(name)
    return {"name": name, "sha256": None if value is None else hashlib.sha256(value.encode()).hexdigest()}


def crash(number: int) -> None:
    """End the process at once: killed by signal `number` (as a native crash is), or exit 3."""
    if number:
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    os._exit(3)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gco.bench.fake_engine", description=__doc__)
    add = parser.add_argument
    add("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    add("--style", choices=list(styles()), default=engines.DEFAULT)
    add("--ttft-ms", type=float, default=5.0)
    add("--itl-ms", type=float, default=1.0)
    add("--speed", type=float, default=1.0, help="Multiplies the token rate.")
    add("--noise", type=float, default=0.0, help="Log-normal sigma of a per-request slowdown.")
    add("--drift", type=float, default=0.0, help="Slowdown added per request served.")
    add("--tokens", type=int, default=16, help="Output tokens when a request names none.")
    add("--fail-rate", type=float, default=0.0)
    add("--crash-after", type=int, default=0, help="Exit abruptly after this many requests.")
    add("--crash-once-file", default="", help="Crash only if this file is absent, then create it.")
    add("--crash-signal", default="", help="Crash by this signal (e.g. SIGSEGV) instead of exit 3.")
    add("--crash-at-start", action="store_true", help="Crash before listening (a model that cannot load).")
    add("--never-ready", action="store_true")
    add("--startup-delay", type=float, default=0.0)
    add("--ignore-sigterm", action="store_true")
    add("--leave-child", action="store_true", help="Spawn a child in its own session that outlives us.")
    add("--setting", action="append", default=[], help="key=value overriding a logged config setting.")
    # the real engines' own flags, logged as each engine logs them (gco.bench.fake_log)
    add("--enforce-eager", action="store_true", help="vLLM: CUDA graphs off.")
    add("--cpu-offload-gb", type=float, default=0.0, help="vLLM, SGLang: weights offloaded to CPU memory.")
    add("--disable-cuda-graph", action="store_true", help="SGLang: CUDA graphs off.")
    add("--enable-hierarchical-cache", action="store_true", help="SGLang: KV cache kept in host memory.")
    add("--cuda-graphs", default=None, help="TGI: CUDA graph batch sizes; 0 turns them off.")
    add("--log-line", action="append", default=[], help="An extra start-up log line.")
    add("--seed", type=int, default=0)
    add("--trace", action="store_true", help="Record arrivals and own TTFT/ITL; GET /debug/trace reads them.")
    add("--model", default=FAKE_MODEL, help="The model id GET /v1/models and /info name.")
    add("--revision", default="", help="The model revision GET /info names (model_sha).")
    add(
        "--empty-output",
        action="store_true",
        help="Fault injection: answer non-streamed completions with empty text.",
    )
    add(
        "--clip-ms",
        action="append",
        default=[],
        help="SIZE=MS: clip mode, POST /v1/videos with body size SIZE takes MS (over --speed).",
    )
    add(
        "--hold-file",
        default="",
        help="Hold each streamed answer after its first token until this file exists.",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fake engine until SIGTERM (or forever, with --ignore-sigterm, until SIGKILL)."""
    args = parse_args(argv)
    flags = EngineFlags(
        model=args.model,
        port=args.port,
        enforce_eager=args.enforce_eager,
        cpu_offload_gb=args.cpu_offload_gb,
        disable_cuda_graph=args.disable_cuda_graph,
        enable_hierarchical_cache=args.enable_hierarchical_cache,
        cuda_graphs=args.cuda_graphs,
    )
    settings = dict(item.split("=", 1) for item in args.setting)
    try:
        lines = startup_lines(args.style, flags, settings, args.log_line)
    except ValueError as error:
        print(f"error: --setting: {error}", file=sys.stderr)
        return 2
    for line in lines:
        print(line, flush=True)
    if args.leave_child:
        subprocess.Popen([*PYTHON, "-c", "import time; time.sleep(120)"], start_new_session=True)
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(args.startup_delay)
    crash_signal = int(signal.Signals[args.crash_signal]) if args.crash_signal else 0
    if args.crash_at_start:
        print("ERROR fake engine crashing at start on purpose", flush=True)
        crash(crash_signal)
    behaviour = Behaviour(
        port=args.port,
        style=args.style,
        ttft_s=args.ttft_ms / 1000,
        itl_s=args.itl_ms / 1000,
        speed=args.speed,
        noise=args.noise,
        drift=args.drift,
        fail_rate=args.fail_rate,
        crash_after=args.crash_after,
        crash_once_file=args.crash_once_file,
        never_ready=args.never_ready,
        crash_signal=crash_signal,
        trace=args.trace,
        seed=args.seed,
        tokens=args.tokens,
        model=args.model,
        revision=args.revision,
        empty_output=args.empty_output,
        clip_s={size: float(ms) / 1000 for size, _, ms in (item.partition("=") for item in args.clip_ms)},
        hold_file=args.hold_file,
    )
    asyncio.run(serve(FakeEngine(behaviour)))
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
