"""Container engines: the real `docker run`/`docker stop` command lines, and an engine run through the
wrapper on a stand-in Docker (standin_docker.py), launched, stopped and checked like a process engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gco.local.processes.listen import free_port
from gco.processes.launch import EngineProcess, clean_env
from gpu_runner import docker
from gpu_runner.engine_container import main as wrapper_main

VLLM = "vllm/vllm-openai:v0.9.2@sha256:" + "a" * 64
TGI = "ghcr.io/huggingface/text-generation-inference@sha256:" + "b" * 64
STANDIN = Path(__file__).with_name("standin_docker.py")


@pytest.fixture
def standin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A `docker` executable (the stand-in) whose images run the fake engine in vLLM or TGI style."""
    cli = tmp_path / "bin" / "docker"
    cli.parent.mkdir()
    cli.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STANDIN}" "$@"\n')
    cli.chmod(0o755)
    engine = [sys.executable, "-m", "gco.bench.fake_engine"]
    monkeypatch.setenv("STANDIN_DOCKER_STATE", str(tmp_path / "containers"))
    monkeypatch.setenv(
        "STANDIN_DOCKER_IMAGES",
        json.dumps({VLLM: [*engine, "--style", "vllm"], TGI: [*engine, "--style", "tgi"]}),
    )
    yield str(cli)
    for name in docker.running(docker=str(cli)):  # never leave a container behind
        subprocess.run([str(cli), "kill", name], capture_output=True, check=False)


def wrapper_argv(cli: str, image: str, port: int, *engine_args: str, stop_timeout: int = 5) -> list[str]:
    return [
        *(sys.executable, "-m", "gpu_runner.engine_container", "--docker", cli, "--image", image),
        *("--stop-timeout", str(stop_timeout), "--env", "MODEL_ID", "--"),
        *("--port", str(port), *engine_args),
    ]


def launch_env() -> dict[str, str]:
    return clean_env(
        {"MODEL_ID": "org/model", "STANDIN_DOCKER_STATE": None, "STANDIN_DOCKER_IMAGES": None}, os.environ
    ).env


def test_real_command_lines() -> None:
    assert docker.run_argv(VLLM, "gco-engine-1", ["--model", "m"], env_names=["HF_TOKEN"]) == [
        *("docker", "run", "--rm", "--name", "gco-engine-1", "--label", "gco.engine=true"),
        *("--gpus", "all", "--network", "host", "--ipc", "host", "-e", "HF_TOKEN", VLLM, "--model", "m"),
    ]
    assert docker.stop_argv("gco-engine-1", 20) == ["docker", "stop", "--time", "20", "gco-engine-1"]
    assert docker.kill_argv(["a", "b"]) == ["docker", "kill", "a", "b"]
    assert docker.ps_argv() == ["docker", "ps", "--filter", "label=gco.engine=true", "--format", "{{.Names}}"]


@pytest.mark.parametrize(
    "image", ["vllm/vllm-openai:v0.9.2", "vllm/vllm-openai@sha256:" + "A" * 64, "vllm@sha256:abc", ""]
)
def test_unpinned_images_are_refused(image: str) -> None:
    with pytest.raises(docker.ContainerError, match=r"--image: .* is not pinned by digest"):
        docker.pinned(image)


def test_wrapper_refuses_bad_options_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert wrapper_main(["--image", "vllm/vllm-openai:latest", "--", "--port", "1"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    os.environ.pop("NOT_SET_FOR_GCO_TEST", None)
    assert wrapper_main(["--image", VLLM, "--env", "NOT_SET_FOR_GCO_TEST"]) == 2
    assert "--env: NOT_SET_FOR_GCO_TEST not set" in capsys.readouterr().err


def test_standin_refuses_what_docker_refuses(standin: str) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([standin, *args], capture_output=True, text=True, timeout=30, check=False)

    assert cli("run", "--privileged", VLLM).returncode == 125
    assert cli("run", "--rm", "unknown/image@sha256:" + "c" * 64).returncode == 125
    refused = cli("stop", "--time", "1", "no-such")
    assert (refused.returncode, "No such container: no-such" in refused.stderr) == (1, True)


@pytest.mark.parametrize(
    ("image", "marker"), [(VLLM, "Initializing a V1 LLM engine"), (TGI, "text_generation_launcher: Args")]
)
def test_container_engine_stops_like_a_process_engine(
    standin: str, tmp_path: Path, image: str, marker: str
) -> None:
    port = free_port()
    engine = EngineProcess(wrapper_argv(standin, image, port), launch_env(), tmp_path / "engine.log")
    assert engine.wait_ready(f"http://127.0.0.1:{port}/health", 30, 0.05) == "ready"
    assert len(docker.running(docker=standin)) == 1
    report = engine.stop(15)
    assert (report.signal, report.group_gone, report.survivors) == ("SIGTERM", True, [])
    assert docker.running(docker=standin) == []
    log = (tmp_path / "engine.log").read_text()
    assert marker in log


def test_an_engine_ignoring_sigterm_is_killed_by_docker_stop_before_the_bench_escalates(
    standin: str, tmp_path: Path
) -> None:
    port = free_port()
    argv = wrapper_argv(standin, VLLM, port, "--ignore-sigterm", stop_timeout=1)
    engine = EngineProcess(argv, launch_env(), tmp_path / "engine.log")
    assert engine.wait_ready(f"http://127.0.0.1:{port}/health", 30, 0.05) == "ready"
    report = engine.stop(15)
    assert report.signal == "SIGTERM" and report.group_gone
    assert report.exit_code == 128 + signal.SIGKILL  # docker stop's SIGKILL, as docker reports it
    assert docker.running(docker=standin) == []


def test_a_container_outliving_its_wrapper_is_swept(standin: str, tmp_path: Path) -> None:
    port = free_port()
    engine = EngineProcess(wrapper_argv(standin, VLLM, port), launch_env(), tmp_path / "engine.log")
    assert engine.wait_ready(f"http://127.0.0.1:{port}/health", 30, 0.05) == "ready"
    os.killpg(engine.pgid, signal.SIGKILL)  # the wrapper and the CLI die; the daemon's container does not
    engine.popen.wait(timeout=10)
    (survivor,) = docker.running(docker=standin)
    assert docker.sweep(docker=standin) == [survivor]
    deadline = time.monotonic() + 10
    while docker.running(docker=standin) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert docker.running(docker=standin) == []
    assert docker.sweep(docker=standin) == []
    assert docker.sweep(docker=str(tmp_path / "no-docker-here")) == []


def test_the_documented_manifest_engine_is_valid() -> None:
    """docs/deploy.md's example engine parses as a manifest engine whose argv the wrapper accepts."""
    from gco.bench.rounds.manifest import Engine
    from gpu_runner.engine_container import parse_args

    text = (Path(__file__).parents[3] / "docs" / "deploy.md").read_text()
    block = text.split("```json\n  {", 1)[1].split("```", 1)[0]
    example = json.loads("{" + block.replace("<64 hex>", "c" * 64))
    engine = Engine.model_validate(example)
    options = parse_args(engine.argv[3:])
    assert docker.pinned(options.image) == options.image
    assert options.env == list(engine.env) == ["HF_TOKEN"]
    assert options.args[-2:] == ["--port", str(engine.port)]
