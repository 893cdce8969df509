"""Streaming through a Region's way in on the local stack, over real HTTP: the first server-sent event
reaches the caller while the engine is still generating (vLLM's SSE and TGI's `/generate_stream`),
and `gco inference invoke --stream` prints the tokens.

The engines are the fake engine with `--hold-file`: after its first token a streamed answer waits
until that file exists. The caller receives the first event before the test creates the file, which
no hop that buffered the answer (the proxy, the Service network) could deliver: the engine has not
produced the rest. The proxy is nginx where it is installed (its rendered configuration, over TLS),
else the in-process router."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gco.endpoints import EndpointStore
from gco.endpoints.spec import EndpointSpec
from gco.inference.invoke import (
    INVOKE_CA_BUNDLE_ENV,
    INVOKE_URLS_ENV,
    InvokeResult,
    default_request,
    send_stream,
    stream_request,
)
from gco.local.moto.motoserver import MotoServer
from gco.local.region.cluster import LocalClusters
from gco.local.region.engines import EngineTable
from tests.functional.cli.test_inference_cli import Cli
from tests.functional.conftest import Deployed
from tests.functional.local.conftest import DEADLINE_S, deployed_clusters, eventually
from tests.functional.local.test_engines import SPEC, invoke, running
from tests.unit.reconcile.records import EAST

TOKENS = 4
TGI_SPEC: dict[str, Any] = {**SPEC, "framework": "tgi", "port": 8080}


@pytest.fixture
def hold(tmp_path: Path) -> Path:
    return tmp_path / "release"


@pytest.fixture
def held(
    deployed: Deployed, tmp_path: Path, hold: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LocalClusters]:
    """One Region run from the synthesized app whose engines hold every streamed answer after its
    first token until `hold` exists."""
    table = EngineTable.fake("--hold-file", str(hold))
    with deployed_clusters(deployed, [EAST], tmp_path / "engines", table=table, wait=0.5, poll=0.02) as stack:
        stack.start(sync_interval=0.05, poll_interval=0.05, sweep_interval=0.5)
        monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps(stack.invoke_urls()))
        if stack.ca_bundle is not None:
            monkeypatch.setenv(INVOKE_CA_BUNDLE_ENV, str(stack.ca_bundle))
        yield stack


def serving(store: EndpointStore, clusters: LocalClusters, name: str, spec: dict[str, Any]) -> None:
    """Deployed, running, and its route served (a proxy reload can follow the running status)."""
    store.create(name, spec, [EAST])
    eventually(lambda: running(store, name, EAST, 1), f"{name} running")
    path, body = default_request(EndpointSpec.model_validate(spec), "hi")
    eventually(lambda: invoke(clusters, EAST, name, path, body).status_code != 404, f"{name} routed")


class Caller(threading.Thread):
    """A streamed request on its own thread; each piece of text lands in `pieces` as it arrives."""

    def __init__(self, clusters: LocalClusters, name: str, spec: dict[str, Any]) -> None:
        super().__init__(daemon=True)
        path, body = stream_request(EndpointSpec.model_validate(spec), "hello")
        body = {**body, "max_tokens": TOKENS} if "max_tokens" in body else body
        if "parameters" in body:
            body = {**body, "parameters": {**body["parameters"], "max_new_tokens": TOKENS}}
        self.url = f"{clusters.invoke_urls()[EAST]}/{name}{path}"
        self.body = body
        self.framework = EndpointSpec.model_validate(spec).framework
        self.pieces: queue.Queue[str] = queue.Queue()
        self.result: InvokeResult | None = None

    def run(self) -> None:
        self.result = send_stream(
            EAST,
            self.url,
            self.body,
            signed=False,
            on_text=self.pieces.put,
            framework=self.framework,
            timeout=60,
        )


def test_the_first_event_reaches_the_caller_while_the_engine_is_still_generating(
    store: EndpointStore, held: LocalClusters, hold: Path
) -> None:
    serving(store, held, "smol", SPEC)
    serving(store, held, "tgi", TGI_SPEC)
    callers = [Caller(held, "smol", SPEC), Caller(held, "tgi", TGI_SPEC)]
    for caller in callers:
        caller.start()
    for caller in callers:
        # The engine holds after this token: it reached us through every hop before the rest exists.
        assert caller.pieces.get(timeout=DEADLINE_S) == " tok"
        assert caller.is_alive() and caller.pieces.empty()
    hold.touch()
    for caller in callers:
        caller.join(timeout=DEADLINE_S)
        assert not caller.is_alive() and caller.result is not None
        assert caller.result.status == 200
        assert caller.result.body == {"text": " tok" * TOKENS, "events": TOKENS}
        assert caller.result.first_event_ms is not None
        assert caller.result.first_event_ms <= caller.result.latency_ms


def test_invoke_stream_prints_the_tokens(
    store: EndpointStore,
    held: LocalClusters,
    hold: Path,
    moto: MotoServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hold.touch()  # nothing held: the command's own output is what is checked here
    serving(store, held, "smol", SPEC)
    cli = Cli(moto, capsys, store.table_name)
    out, err = cli(
        "inference",
        "invoke",
        "smol",
        "--stream",
        "--body",
        '{"prompt": "x", "max_tokens": 3, "stream": true}',
    )
    assert out == " tok tok tok\n"
    assert err.startswith(f"{EAST} 200 first event ") and err.endswith(" ms in all\n")
    answer = cli.json("inference", "invoke", "smol", "--stream", "--prompt", "x")
    assert answer["body"]["text"].startswith(" tok") and answer["first_event_ms"] is not None
