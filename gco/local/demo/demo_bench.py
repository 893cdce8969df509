"""The walk-through's benchmark: `gco bench rounds` of two local engines, evidence to the local bucket.

Pure inputs for the demo: a run manifest of two engines of the kind the demo runs (two fake
engines whose decode speeds differ, or SmolLM2 on llama.cpp with one thread against two), a small
prompt set, and the argv of the `gco bench rounds` and `gco bench report` steps. The rounds run in
Williams order, two of them (AB, BA: each engine first once, the fewest that balance the order for
two engines; the command's default is four); the evidence goes to the run directory and to the local
S3 bucket, and its report page is written beside it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gco.local.llama.llama_engine import MODEL_ID
from gco.local.processes.listen import free_port
from gco.local.region.engines import FAKE_ENGINE, LLAMA_ENGINE

# Text to continue, not questions: the rounds send raw completions (no chat template), and
# SmolLM2-135M-Instruct answers a bare question such as "What is the capital of France?" with an
# immediate end of text under greedy decoding (0 tokens: a failed request in the rounds).
DEMO_PROMPTS = (
    "Three primary colours are",
    "The capital of France is",
    "Here is one sentence about the sea:",
    "Counting from one to five: one,",
)
# Eight tokens a request: seven inter-token gaps each, enough for a decode rate per request, and half
# the decode time of sixteen in each of the eight cells (the engines' start and stop are the rest).
MAX_TOKENS = 8
READY_TIMEOUT_S = 120.0
# Two rounds, AB then BA: the smallest Williams design for two engines (each first once, so a drift
# over the run weighs on both alike). Each round starts and stops both llama engines, most of a cell's
# time; four rounds (the command's default) took about 39 s of a fresh `make demo`, two about half.
# The evidence says n = 2 beside every interval, which is as wide as two rounds make it.
ROUNDS = 2


def _engine(label: str, argv: list[str], port: int, model: str) -> dict[str, Any]:
    return {
        "label": label,
        "argv": argv,
        "port": port,
        "model": {"id": model},
        "ready_check": {"path": "/health", "timeout_s": READY_TIMEOUT_S, "interval_s": 0.1},
    }


def engines(kind: str) -> list[dict[str, Any]]:
    """Two engines of `kind` that differ in one setting, each on a free loopback port."""
    out = []
    if kind == "llama":
        for threads in (1, 2):
            port = free_port()
            argv = [*LLAMA_ENGINE, "--port", str(port), "--threads", str(threads), "--model-name", MODEL_ID]
            out.append(_engine(f"llama-{threads}t", argv, port, MODEL_ID))
        return out
    for itl_ms in (1, 2):
        port = free_port()
        argv = [*FAKE_ENGINE, "--port", str(port), "--itl-ms", str(itl_ms), "--model", "fake/model"]
        out.append(_engine(f"fake-itl{itl_ms}ms", argv, port, "fake/model"))
    return out


def write_inputs(directory: Path, kind: str) -> tuple[Path, Path]:
    """The manifest and prompt set of the demo's rounds, written into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    manifest = directory / "manifest.json"
    document = {
        "engines": engines(kind),
        "stop_timeout_s": 5,
        "workload": {"max_tokens": MAX_TOKENS, "warmup_requests": 1},
    }
    manifest.write_text(json.dumps(document, indent=2), encoding="utf-8")
    prompts = directory / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in DEMO_PROMPTS), encoding="utf-8")
    return manifest, prompts


def rounds_arguments(manifest: Path, prompts: Path, run_dir: Path, bucket: str) -> list[str]:
    """The argv (after `gco`) of the demo's `gco bench rounds`: ROUNDS rounds, the evidence to `run_dir`
    and `bucket`."""
    return [
        "bench",
        "rounds",
        "--manifest",
        str(manifest),
        "--prompts",
        str(prompts),
        "--run-dir",
        str(run_dir),
        "--evidence-bucket",
        bucket,
        "--rounds",
        str(ROUNDS),
    ]
