"""Two Regions of local clusters (reconcilers, engine processes, routes) over the moto server."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from gco.endpoints import EndpointStore, init_table
from gco.env import DEFAULT_TABLE
from gco.global_access.key_store import create_keys_table
from gco.local.assembly import CloudAssembly
from gco.local.assembly.deployed import DeployedApp, client_as, function_python, make_identities
from gco.local.assembly.invoke import FunctionRuntime
from gco.local.assembly.runtime_sdk import runtime_sdk
from gco.local.assembly.synth import local_assembly
from gco.local.moto.motoserver import MotoServer
from gco.local.region.cluster import LocalClusters
from gco.local.region.kubelet import RestartPolicy
from tests.unit.reconcile.records import EAST, WEST

T = TypeVar("T")
# How long `eventually` waits before it fails: a guard against a hang, never a measurement. Run beside a
# CPU burner on a shared 2-core machine (load average about 35), the first engines of two Regions
# took more than 30 s to report running; nothing that works takes 120 s.
DEADLINE_S = 120.0
# The kubelet's restart back-off scaled down (10 s -> 0.5 s): tests see restarts within their deadline.
FAST_RESTART = RestartPolicy(initial=0.5, cap=2.0, reset_after=60.0)


EVIDENCE_BUCKET = "gco-local-evidence"


@dataclass(frozen=True)
class Deployed:
    """A moto server as `gco local up` prepares it for the synthesized app (the operator and the Lambda
    service's stand-in made, the endpoint table, the keys table and the evidence bucket, then IAM
    enforced), the app itself (as `up` synthesizes it: gco.local.assembly.synth) and the store,
    signing as the operator."""

    server: MotoServer
    credentials: dict[str, str]
    app: DeployedApp
    store: EndpointStore


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Deployed]:
    """`Deployed`, the operator's key in this process's environment (its clients sign with it)."""
    with MotoServer() as server:
        iam = client_as("iam", EAST, server.url, {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})
        credentials, service = make_identities(iam)
        for name, value in credentials.items():
            monkeypatch.setenv(name, value)
        init_table(client_as("dynamodb", EAST, server.url, credentials), DEFAULT_TABLE)
        create_keys_table(client_as("dynamodb", EAST, server.url, credentials))
        client_as("s3", EAST, server.url, credentials).create_bucket(Bucket=EVIDENCE_BUCKET)
        server.enforce_iam()
        # on the runtime's Python where this machine has it, else on this one with bundles built for it
        assembly = CloudAssembly.open(local_assembly([EAST, WEST], EAST))
        python = function_python(assembly)
        assert python is not None
        app = DeployedApp(
            assembly,
            FunctionRuntime(python, runtime_sdk(tmp_path / "sdk")),
            server.url,
            tmp_path / "functions",
            credentials=credentials,
            lambda_service=service,
        )
        store = EndpointStore(client_as("dynamodb", EAST, server.url, credentials), DEFAULT_TABLE)
        yield Deployed(server, credentials, app, store)


@pytest.fixture
def clusters(store: EndpointStore, moto: MotoServer, tmp_path: Path) -> Iterator[LocalClusters]:
    with LocalClusters(
        store,
        [EAST, WEST],
        endpoint_url=moto.url,
        log_dir=tmp_path / "engines",
        wait=0.5,
        poll=0.02,
        restart=FAST_RESTART,
    ) as stack:
        stack.start(sync_interval=0.05, poll_interval=0.05, sweep_interval=0.5)
        yield stack


def eventually(check: Callable[[], T | None], what: str, deadline_s: float = DEADLINE_S) -> T:
    """Poll `check` until it returns a truthy value (bounded); fail naming `what`."""
    end = time.monotonic() + deadline_s
    last: T | None = None
    while time.monotonic() < end:
        last = check()
        if last:
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture
def manual(store: EndpointStore, moto: MotoServer, tmp_path: Path) -> Iterator[LocalClusters]:
    """One Region whose engines the test syncs itself, behind the in-process router."""
    with LocalClusters(
        store,
        [EAST],
        endpoint_url=moto.url,
        log_dir=tmp_path / "engines",
        wait=0.2,
        proxy="python",
        restart=FAST_RESTART,
    ) as stack:
        stack.start(poll_interval=0.05, sweep_interval=0.2, engines=False)
        yield stack


class StaleConnectionRetry(httpx.BaseTransport):
    """Resend a request once when the server closed its keep-alive connection before answering.

    nginx reloads (SIGHUP) whenever a route changes; each old worker finishes its in-flight request
    and then closes its idle keep-alive connections. A request written onto such a connection at
    that moment gets no response at all (`RemoteProtocolError`), which is the client's race, not an
    answer from the proxy: browsers and Go's net/http resend on a fresh connection in that case,
    and so does this client. Any other error, and a second disconnect, still fail the test.
    """

    def __init__(self, inner: httpx.HTTPTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return self._inner.handle_request(request)
        except httpx.RemoteProtocolError:
            return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def client(clusters: LocalClusters) -> httpx.Client:
    """An HTTP client for the Regions' proxies (nginx's self-signed certificate verified)."""
    verify: ssl.SSLContext | bool = True
    if clusters.ca_bundle is not None:
        verify = ssl.create_default_context(cafile=str(clusters.ca_bundle))
    transport = StaleConnectionRetry(httpx.HTTPTransport(verify=verify))
    return httpx.Client(timeout=10, transport=transport)


def unstamped_items(store: EndpointStore) -> list[dict[str, Any]]:
    """The table's items without the times a Regional reconciler may still stamp while the CLI runs:
    a second pass (the stream's beside a sweep's, each planned from its own read) can write the same
    running status again just after the first, which moves only `updated_at` and the Region's
    `last_sync` (seen on CI). Every other attribute must hold."""
    items: list[dict[str, Any]] = store.client.scan(TableName=store.table_name, ConsistentRead=True)["Items"]
    for item in items:
        item.pop("updated_at", None)
        for region in item.get("region_status", {}).get("M", {}).values():
            region["M"].pop("last_sync", None)
    return items
