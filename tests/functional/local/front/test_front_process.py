"""The global address's process body (`serve`), run on a thread against the moto server: it reports
its URL, checks keys before anything else, and stops when asked."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from gco.endpoints import EndpointStore
from gco.global_access.key_store import DynamoKeyStore, create_keys_table
from gco.local.front.process import parse, report_path, serve
from gco.local.moto.motoserver import MotoServer
from tests.conftest import TABLE
from tests.functional.local.conftest import eventually


def test_serve_reports_checks_keys_and_stops(
    store: EndpointStore, moto: MotoServer, dynamodb: Any, tmp_path: Path
) -> None:
    create_keys_table(dynamodb, "proc-keys")
    key, _ = DynamoKeyStore(dynamodb, "proc-keys").create("p", ["*"], now=datetime.now(UTC))
    down = "http://127.0.0.1:9"  # nothing listens there: the Region's proxy is down
    argv = ["--endpoint-url", moto.url, "--home-region", "us-east-1", "--table", TABLE]
    argv += [
        "--keys-table",
        "proc-keys",
        "--proxies",
        json.dumps({"us-east-1": down}),
        "--state-dir",
        str(tmp_path),
    ]
    options = parse(argv)
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(options, stop), daemon=True)
    thread.start()
    try:
        url = eventually(
            lambda: report_path(tmp_path).exists() and json.loads(report_path(tmp_path).read_text())["url"],
            "the report",
        )
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert httpx.post(f"{url}/inference/smol/v1/completions", json={}).status_code == 401
        auth = {"authorization": f"Bearer {key}"}
        assert httpx.post(f"{url}/inference/smol/v1/completions", json={}, headers=auth).status_code == 404
        store.create("smol", {"image": "vllm/vllm-openai:v0.6.3"}, ["us-east-1"])
        reply = httpx.post(f"{url}/inference/smol/v1/completions", json={}, headers=auth)
        assert reply.status_code == 503 and "us-east-1: no status yet" in reply.json()["error"]["message"]
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()
