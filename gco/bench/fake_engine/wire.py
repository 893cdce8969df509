"""What the fake engine writes and how it ends: server-sent events framed in HTTP/1.1 chunks (OpenAI
completion and chat chunks, TGI's token events), its fixed paths and names, the environment digest,
and the crash on purpose.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import time
from pathlib import Path

from gco.front_door import MAX_REQUEST_BYTES

MAX_TRACE = 1_000_000
CLIP_PATH = "/v1/videos"
ENV_DIGEST_PATH = "/debug/env-digest/"
CLIP_BYTES = 4096
FAKE_MODEL = "fake/model"
TOO_LARGE = json.dumps({"error": f"request body larger than {MAX_REQUEST_BYTES} bytes"}).encode()


def sse(payload: object) -> bytes:
    """`payload` as one server-sent event (`data: <JSON>`), framed as one HTTP/1.1 chunk."""
    data = b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def token_chunk(chat: bool) -> bytes:
    """One OpenAI streaming chunk carrying one token, in the completions or chat shape."""
    if chat:
        choice: dict[str, object] = {"index": 0, "delta": {"content": " tok"}, "finish_reason": None}
        kind = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": " tok", "logprobs": None, "finish_reason": None}
        kind = "text_completion"
    return sse({"id": "cmpl-fake", "object": kind, "created": 0, "model": FAKE_MODEL, "choices": [choice]})


TOKEN_CHUNK = {True: token_chunk(True), False: token_chunk(False)}
SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
HOLD_POLL_S = 0.01
HOLD_MAX_S = 60.0  # a held stream goes on after this even without its file (no test hangs forever)


def tgi_event(index: int, tokens: int) -> bytes:
    """TGI's event for token `index` of `tokens` (the last one carries the whole text)."""
    token = {"id": index, "text": " tok", "logprob": 0.0, "special": False}
    done = index == tokens - 1
    return sse(
        {
            "index": index + 1,
            "token": token,
            "generated_text": " tok" * tokens if done else None,
            "details": None,
        }
    )


async def hold(path: Path) -> float:
    """Wait (bounded) until `path` exists; the seconds waited."""
    started = time.perf_counter()
    while not path.exists() and time.perf_counter() - started < HOLD_MAX_S:
        await asyncio.sleep(HOLD_POLL_S)
    return time.perf_counter() - started


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
