"""Helpers for bench functional tests: a fake engine in-process, free ports, fake engine argv, rounds runs."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gco.bench.fake_engine.server import Behaviour, FakeEngine
from gco.cli import main
from gco.evidence import validate
from gco.local.processes.listen import free_port


def behaviour(**update: Any) -> Behaviour:
    values: dict[str, Any] = {
        "port": 0,
        "style": "vllm",
        "ttft_s": 0.002,
        "itl_s": 0.001,
        "speed": 1.0,
        "noise": 0.0,
        "drift": 0.0,
        "fail_rate": 0.0,
        "crash_after": 0,
        "crash_once_file": "",
        "never_ready": False,
        "seed": 0,
        "tokens": 8,
    }
    values.update(update)
    return Behaviour(**values)


@asynccontextmanager
async def engine_server(**update: Any) -> AsyncIterator[tuple[str, FakeEngine]]:
    """A FakeEngine listening on a free loopback port inside the running loop."""
    engine = FakeEngine(behaviour(**update))
    server = await asyncio.start_server(engine.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", engine
    finally:
        server.close()


def fake_argv(port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "gco.bench.fake_engine", "--port", str(port), *flags]


def rounds_engine(label: str, *flags: str, timeout: float = 20, **extra: Any) -> dict[str, Any]:
    port = free_port()
    return {
        "label": label,
        "argv": fake_argv(port, *flags),
        "port": port,
        "model": {"id": "fake/model"},
        "ready_check": {"timeout_s": timeout, "interval_s": 0.05},
        **extra,
    }


def write_inputs(tmp_path: Path, engines: list[dict[str, Any]], **workload: Any) -> tuple[Path, Path]:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "engines": engines,
                "stop_timeout_s": 1,
                "workload": {"max_tokens": 12, "warmup_requests": 1, **workload},
            }
        )
    )
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(json.dumps({"prompt": f"question {i}: " + "word " * (4 + i)}) + "\n" for i in range(4))
    )
    return manifest, prompts


def run_rounds_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, manifest: Path, prompts: Path, *args: str
) -> dict[str, Any]:
    monkeypatch.setenv("GCO_GPU_LOCK", str(tmp_path / "gpu.lock"))
    run = tmp_path / "run"
    assert (
        main(
            [
                "bench",
                "rounds",
                "--manifest",
                str(manifest),
                "--prompts",
                str(prompts),
                "--run-dir",
                str(run),
                "--output",
                "json",
                *args,
            ]
        )
        == 0
    )
    summary = json.loads((run / "rounds" / "summary.json").read_text())
    plan = json.loads((run / "rounds" / "plan.json").read_text())
    files = list((run / "evidence").glob("*.json"))
    assert len(files) == 1
    evidence = validate(json.loads(files[0].read_text()))
    assert files[0].name == f"{evidence.id}.json"
    assert (run / "rounds" / "summary.md").is_file()
    return {
        "summary": summary,
        "plan": plan,
        "evidence": evidence,
        "run": run,
        "codes": {item["code"] for item in summary["limitations"]},
    }
