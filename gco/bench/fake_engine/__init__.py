"""A fake OpenAI-compatible engine for tests and the local stack: SSE completions, clips, /health, /metrics.

It stands in for vLLM, TGI or SGLang (vLLM's `/v1/completions` and `/v1/models`, streamed as
server-sent events with `stream: true`; TGI's `/generate`, `/generate_stream` (its SSE events, one
per token, the last carrying `generated_text`) and `/info`, naming the model id and revision it was
started with). `--hold-file` holds a streamed answer after its first token until that file exists,
so a test can prove a caller gets the first event while the engine is still generating.
`GET /debug/env-digest/<NAME>` answers the SHA-256 of its environment variable NAME (null when
unset), never the value, so a test can prove a secret reached the engine without exposing it. In clip
mode it stands in for a video engine answering whole clips on POST /v1/videos, where no GPU is
available. Configurable speed, noise, drift and failures; it logs the start-up lines of real vLLM
0.11, TGI 2.2 or SGLang output with its own model and flags (`startup`: `--enforce-eager`,
`--cpu-offload-gb`, ... as the real engines take them). It does not model batching, memory or a
tokenizer (a token is a fixed chunk and a clip is a fixed-size body after a known time per size),
and the flags change only the log, not its speed.

Run as `python -m gco.bench.fake_engine` (`cli`); `server` is the HTTP server, `wire` what it writes
(server-sent events, TGI's token events) and how it crashes on purpose, `startup` the start-up lines.
Standard library only (tests/unit/cli/test_lazy.py holds it): it starts once per bench cell and local
replica, and pydantic's import would be most of that start.
"""
