"""A moto server that executes state machines (its Step Functions interpreter), and runner helpers.

The interpreter makes its AWS SDK calls to `localhost:$MOTO_PORT`, so this server gets its own port
with MOTO_PORT set; the shared `moto` fixture serves the tests that need no execution.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gco import aws
from gco.local.moto.motoserver import MotoServer
from gco.local.processes.listen import free_port

REGION = "us-east-1"
BUCKET = "gco-evidence-test"
# An instance role's aws:userid: `<role id>:<instance id>`.
RUNNER = "AROAEXAMPLEROLEID:i-0123456789abcdef0"


@pytest.fixture(scope="module")
def sfn_server() -> Iterator[MotoServer]:
    port = free_port()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MOTO_PORT", str(port))
        server = MotoServer(port=port).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sfn_moto(sfn_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    sfn_server.reset()
    httpx.post(
        f"{sfn_server.url}/moto-api/config",
        json={"stepfunctions": {"execute_state_machine": True}},
        timeout=10,
    ).raise_for_status()
    monkeypatch.setenv("AWS_ENDPOINT_URL", sfn_server.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return sfn_server


def clients(server: MotoServer) -> dict[str, Any]:
    return {
        name: aws.client(name, region=REGION, endpoint_url=server.url)
        for name in ("s3", "stepfunctions", "ec2")
    }


def make_bucket(s3: Any) -> None:
    s3.create_bucket(Bucket=BUCKET)


def rounds_job(**overrides: Any) -> dict[str, Any]:
    job = {
        "kind": "bench-rounds",
        "manifest": {"engines": [], "workload": {}},
        "prompts": ["Say hello.", "Count to three."],
        "rounds": 2,
        "engines": ["a", "b"],
        "serve_args": ["--max-tokens=8"],
    }
    return {**job, **overrides}


class FakeRounds:
    """Stands in for `gco bench rounds`: writes a run directory and prints its JSON answer.

    Limits: no engine is launched; `behaviour` picks success, failure or a hang until cancelled
    (or, once `release` is set, success).
    """

    def __init__(self, behaviour: str = "ok", evidence_id: str = "sha256-abc") -> None:
        self.behaviour, self.evidence_id = behaviour, evidence_id
        self.argv: list[str] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, argv: list[str], cancel: threading.Event) -> tuple[int, str, str]:
        self.argv = argv
        self.started.set()
        run_dir = Path(argv[argv.index("--run-dir") + 1])
        (run_dir / "cells").mkdir(parents=True)
        (run_dir / "cells" / "round1-a.json").write_text("{}")
        (run_dir / "evidence.json").write_text(json.dumps({"id": self.evidence_id}))
        if self.behaviour == "hang":
            deadline = time.monotonic() + 30
            while not (cancel.is_set() or self.release.is_set()) and time.monotonic() < deadline:
                cancel.wait(0.01)
            if not self.release.is_set():
                return -15, "", "stopped"
        if self.behaviour == "fail":
            return 1, "", "Traceback...\nbench: engine a never became ready"
        answer = {"evidence_id": self.evidence_id, "summary": {"line": "a vs b x 2 rounds"}}
        return 0, json.dumps(answer), ""
