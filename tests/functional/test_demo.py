"""The README's main job: `gco local demo` walks the CLI through a local moto server it owns."""

from __future__ import annotations

import subprocess
import sys

import httpx

from gco.cli import main
from gco.local.demo import walkthrough


def test_walkthrough_runs_every_step_and_stops_its_server() -> None:
    lines: list[str] = []
    walkthrough(lines.append)
    transcript = "\n".join(lines)
    url = lines[0].split(" on ")[1].split(";")[0]
    for command in (
        "init-table",
        "deploy demo-chat",
        "list",
        "scale",
        "stop",
        "start",
        "update",
        "regions",
        "status demo-chat --output json",
        "delete demo-chat --expected-lifecycle-id",
    ):
        assert f"$ gco inference {command}" in transcript
    assert "error: name: 'Bad_Name' is not a DNS-1123 label" in transcript
    assert "demo-chat ready: 2/2" in transcript
    assert "outside the reconciler's grant: 0" in transcript
    assert (
        "  us-east-1 shared: ConfigMap/inference-proxy-routes, Deployment/inference-proxy, "
        "HorizontalPodAutoscaler/inference-proxy-hpa, Namespace/gco-inference, Namespace/gco-system, "
        "Service/inference-proxy"
    ) in transcript
    assert "  us-east-1: Deployment/demo-chat, Ingress/route-demo-chat" in transcript
    assert "  eu-west-1: Deployment/demo-chat" in transcript  # after the move
    assert "demo-chat: purged" in transcript
    assert transcript.count("(no objects)") >= 3  # every Region cleaned after the purge
    assert "error: endpoint 'demo-chat' not found" in transcript
    assert transcript.count("(exit 2)") == 1
    assert "refused: its lifecycle is" in transcript
    try:
        httpx.get(url, timeout=1.0)
    except httpx.TransportError:
        pass
    else:
        raise AssertionError("the demo's moto server is still running")


def test_demo_command_exit_status(monkeypatch: object) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gco.cli", "local", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and "demo" in result.stdout


def test_demo_failure_is_a_runtime_error(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from gco.local import demo

    def broken(*_: object, **__: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args=[], returncode=3, stdout="", stderr="boom\n")

    monkeypatch.setattr(demo, "_run_gco", broken)
    assert main(["local", "demo"]) == 1
    assert "exited 3, expected 0" in capsys.readouterr().err
