"""Two Regions of local clusters (reconcilers, engine processes, routes) over the moto server."""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from gco.endpoints import EndpointStore
from gco.local.region.cluster import LocalClusters
from gco.local.region.kubelet import RestartPolicy
from tests.functional.conftest import EVIDENCE_BUCKET, Deployed
from tests.unit.reconcile.records import EAST, WEST

T = TypeVar("T")
# How long `eventually` waits before it fails: a guard against a hang, never a measurement. Run beside a
# CPU burner on a shared 2-core machine (load average about 35), the first engines of two Regions
# took more than 30 s to report running; nothing that works takes 120 s.
DEADLINE_S = 120.0
# The kubelet's restart back-off scaled down (10 s -> 0.5 s): tests see restarts within their deadline.
FAST_RESTART = RestartPolicy(initial=0.5, cap=2.0, reset_after=60.0)


def deployed_clusters(deployed: Deployed, regions: list[str], log_dir: Path, **options: Any) -> LocalClusters:
    """`LocalClusters` over `deployed`'s server and store, reconciled by the synthesized app: per Region
    its stream function and sweep from their assets under their roles (IAM enforced), the home Region's
    rollout wing beside them (evidence to `EVIDENCE_BUCKET`); `options` as `LocalClusters` takes them."""
    return LocalClusters(
        deployed.store,
        regions,
        endpoint_url=deployed.server.url,
        log_dir=log_dir,
        app=deployed.app,
        evidence_bucket=EVIDENCE_BUCKET,
        **options,
    )


@pytest.fixture
def clusters(deployed: Deployed, tmp_path: Path) -> Iterator[LocalClusters]:
    """Two Regions (EAST, WEST) of the local stack run from the synthesized app (`deployed_clusters`):
    engines, Service networks, proxies (nginx where installed), autoscalers, all started; `store` and
    `moto` are then `deployed`'s."""
    with deployed_clusters(
        deployed,
        [EAST, WEST],
        tmp_path / "engines",
        wait=0.5,
        poll=0.02,
        restart=FAST_RESTART,
    ) as stack:
        stack.start(sync_interval=0.05, poll_interval=0.05, sweep_interval=0.5)
        yield stack


def sweep_region(clusters: LocalClusters, region: str) -> None:
    """One scheduled invocation of `region`'s deployed sweep, waited for: the synthesized app's sweep
    function reconciles every endpoint of the Region (as EventBridge's schedule makes it do)."""
    functions = clusters.reconcilers.regions[region].functions
    assert functions is not None, "the clusters run the synthesized app"
    functions.sweep_once()


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
def manual(deployed: Deployed, tmp_path: Path) -> Iterator[LocalClusters]:
    """One Region (EAST) run from the synthesized app (`deployed_clusters`) whose engines the test
    syncs itself, behind the in-process router; `store` and `moto` are then `deployed`'s."""
    with deployed_clusters(
        deployed,
        [EAST],
        tmp_path / "engines",
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
