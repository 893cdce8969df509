"""The README's main job: `gco local demo` walks the CLI through a local stack it owns, then a
benchmark whose report page it names; afterwards nothing of it runs and its ports are free."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from gco.cli import main
from gco.evidence import validate
from gco.local.demo.demo import port_free, walkthrough
from gco.local.errors import DemoStepError
from gco.local.llama.engine_ready import mark
from gco.processes.proc import group_members
from tests.functional.evidence.chromium import chromium_path
from tests.functional.evidence.test_report_page import check_page


@pytest.mark.slow
def test_walkthrough_runs_every_step_and_stops_its_server(tmp_path: Path) -> None:
    lines: list[str] = []
    ready = tmp_path / "engine-ready"

    def echo(line: str) -> None:
        lines.append(line)
        if line.startswith("  ... waiting for the CPU engine's set-up"):
            mark(ready, None)  # as the set-up does once the engine is installed

    try:
        walkthrough(echo, run_dir=tmp_path / "demo", engine_ready_file=ready)
    except DemoStepError:
        print("\n".join(lines[-120:]))  # the transcript's end, in pytest's report of the failure
        raise
    transcript = "\n".join(lines)
    url = lines[0].split(" on ")[1].split(";")[0]
    for command in (
        "init-table",
        "deploy demo-chat",
        "deploy demo-ops",
        "list",
        "scale demo-ops",
        "stop demo-ops",
        "start demo-ops",
        "update demo-ops",
        "regions demo-ops",
        "status demo-ops --output json",
        "delete demo-ops --expected-lifecycle-id",
        "delete demo-chat --wait",
    ):
        assert f"$ gco inference {command}" in transcript
    assert "error: name: 'Bad_Name' is not a DNS-1123 label" in transcript
    assert "demo-chat ready: 2/2" in transcript
    assert "outside the reconciler's grant: 0" in transcript
    (shared,) = [line for line in transcript.splitlines() if line.startswith("  us-east-1 shared: ")]
    assert {
        "ConfigMap/inference-proxy-conf",
        "ConfigMap/inference-proxy-routes-* (64 route shards)",
        "Deployment/inference-proxy",
        "HorizontalPodAutoscaler/inference-proxy-hpa",
        "Namespace/gco-inference",
        "Namespace/gco-system",
        "NetworkPolicy/gco-default-deny",  # the endpoint namespace's default deny (render_network.py)
        "Service/inference-proxy",
    } <= set(shared.removeprefix("  us-east-1 shared: ").split(", "))
    assert "  us-east-1: Deployment/demo-chat, Ingress/route-demo-chat" in transcript
    assert "  eu-west-1: Deployment/demo-ops" in transcript  # after the move
    assert "demo-ops: purged" in transcript and "demo-chat: purged" in transcript
    assert transcript.count("(no objects)") >= 6  # every Region cleaned after each purge
    assert "error: endpoint 'demo-ops' not found" in transcript
    assert transcript.count("(exit 2)") == 1
    assert "refused: its lifecycle is" in transcript
    # both Regions answer through their proxies
    for region in ("us-east-1", "us-west-2"):
        assert re.search(rf"^  {region} 200 \d+ ms, answered by primary \(", transcript, re.MULTILINE), region
    # the global address: the nearest Region, the next one while it is down, a revoked key refused
    assert "$ gco keys create demo --all-endpoints --output json" in transcript
    through = re.findall(r"^  (\S+) \(through the global address\) 200 ", transcript, re.MULTILINE)
    assert through == ["us-east-1", "us-west-2", "us-west-2", "us-west-2", "us-east-1"], through
    # the revoked key refused by the deployed authorizer, with the global API's own 401 (API Gateway
    # tells the caller nothing of why: the authorizer's log does)
    revoked = transcript.index("# the revoked key is refused at once (401)")
    assert "answered 401" in transcript[revoked:] and "a valid gco key is required" in transcript[revoked:]
    # the canary took a share near its weight (60 requests; 4.5 sigma of a binomial at 30%)
    share = re.search(r"canary share observed (\d+)%, set 30%", transcript)
    assert share and 10 <= int(share.group(1)) <= 50, share
    assert "$ gco inference promote demo-chat" in transcript
    # two rollouts decided by a paired comparison: one promoted in both Regions, one rolled back in the
    # first, each with its evidence's report page
    assert "demo-rollout: promoted" in transcript and "demo-rollout: rolled_back" in transcript
    assert "us-west-2: pending, 0 blocks" in transcript  # the second Region never had the slower build
    pages = re.findall(r"# the rollout's report page: (\S+)", transcript)
    assert len(pages) == 2 and all(Path(found).is_file() for found in pages)
    assert (
        validate(json.loads(Path(pages[1]).with_suffix(".json").read_text(encoding="utf-8"))).kind
        == "rollout"
    )
    # the rollouts, the global address and the lifecycle (fake engines only) first; then the wait for
    # the engine the set-up installs beside them, before the first step on it
    waited = transcript.index("  ... the CPU engine is installed: waited ")
    assert (
        transcript.index("demo-rollout: rolled_back")
        < revoked
        < transcript.index("error: endpoint 'demo-ops' not found")
        < waited
        < transcript.index("$ gco inference deploy demo-chat")
    )
    # every wait said so, and how it ended
    assert transcript.count("  ... waiting for ") >= 3
    assert transcript.count(": done in ") >= 2
    # the benchmark: two engines in Williams order, the evidence valid, in the bucket, its page there
    assert transcript.count("round 2/2 ") == 2  # AB, BA
    page = Path(transcript.split("# the report page: ")[1].splitlines()[0])
    evidence = validate(json.loads(page.with_suffix(".json").read_text(encoding="utf-8")))
    assert evidence.kind == "bench.rounds" and len(evidence.identity["engines"]) == 2
    assert f"# in s3://gco-local-evidence: evidence/{evidence.id}.json" in transcript
    assert page.is_file() and 'data-plot="distributions"' in page.read_text(encoding="utf-8")
    # nothing left running: the groups it saw are gone and its ports are free
    left = re.search(r"groups seen \[([\d, ]*)\], (\d+) left; ports ([\d, ]+): free", transcript)
    assert left and left.group(2) == "0", transcript[-600:]
    groups = [int(g) for g in left.group(1).split(",") if g.strip()]
    assert groups and not any(group_members(g) for g in groups)
    assert all(port_free(int(port)) for port in left.group(3).split(","))
    if chromium_path() is not None:
        check_page(page, tmp_path / "profile", "demo-report-page.png")
    try:
        httpx.get(url, timeout=1.0)
    except httpx.TransportError:
        pass
    else:
        raise AssertionError("the demo's moto server is still running")


def test_a_failed_engine_set_up_stops_the_walk_with_its_reason_and_nothing_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gco.local.demo import demo

    monkeypatch.setattr(demo, "_on_fake_engines", lambda *_: None)  # the fake engines' part: not the point
    ready = tmp_path / "engine-ready"
    mark(ready, "llama.cpp: building llama-cpp-python[server]==0.3.36 failed (exit 1); see build.log")
    lines: list[str] = []
    with pytest.raises(DemoStepError, match=r"^the CPU engine's set-up failed: llama\.cpp: building"):
        walkthrough(lines.append, run_dir=tmp_path / "demo", engine="llama", engine_ready_file=ready)
    transcript = "\n".join(lines)
    assert "demo-chat" not in transcript.split("# the CPU engine: ")[1]  # no step on the engine ran
    url = lines[0].split(" on ")[1].split(";")[0]
    with pytest.raises(httpx.TransportError):
        httpx.get(url, timeout=1.0)  # the moto server is stopped


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
    from gco.local.demo import demo

    def broken(*_: object, **__: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args=[], returncode=3, stdout="", stderr="boom\n")

    monkeypatch.setattr(demo, "_run_gco", broken)
    assert main(["local", "demo"]) == 1
    assert "exited 3, expected 0" in capsys.readouterr().err
