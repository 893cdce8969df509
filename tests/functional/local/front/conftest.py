"""Two local Regions run from the synthesized app behind the global address, in this process: keys
on the moto server."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from gco.endpoints import EndpointStore
from gco.global_access import keys
from gco.global_access.key_store import DynamoKeyStore, create_keys_table
from gco.local.front.front import GlobalFront
from gco.local.front.health import HealthChecker
from gco.local.region.cluster import LocalClusters
from gco.local.region.engines import EngineTable
from gco.reconcile.proxy.routes import HEALTH_PATH
from tests.functional.conftest import Deployed
from tests.functional.local.conftest import FAST_RESTART, deployed_clusters, eventually
from tests.functional.local.test_engines import SPEC, running
from tests.unit.reconcile.records import EAST, WEST

KEYS_TABLE = "test-api-keys"
PROMPT: dict[str, Any] = {"model": SPEC["model_id"], "prompt": "hi", "max_tokens": 3}


@dataclass
class Global:
    """The stack under test: the clusters, the front, its health checker, a key for every endpoint."""

    clusters: LocalClusters
    front: GlobalFront
    health: HealthChecker
    key_store: DynamoKeyStore
    store: EndpointStore
    key: str

    def post(self, name: str, key: str | None = None, path: str = "/v1/completions") -> httpx.Response:
        headers = {"authorization": f"Bearer {key or self.key}"}
        return httpx.post(
            f"{self.front.url}/inference/{name}{path}", json=PROMPT, headers=headers, timeout=30
        )

    def deploy(self, name: str, regions: list[str], spec: dict[str, Any] | None = None) -> None:
        """Deployed and running in `regions`, and answering through the front."""
        self.store.create(name, spec or SPEC, regions)
        for region in regions:
            eventually(lambda r=region: running(self.store, name, r, 1), f"{name} running in {region}")  # type: ignore[misc]
        eventually(lambda: self.post(name).status_code == 200, f"{name} answering at the global address")


def verify_context(clusters: LocalClusters) -> ssl.SSLContext | bool:
    return ssl.create_default_context(cafile=str(clusters.ca_bundle)) if clusters.ca_bundle else True


def probe(verify: ssl.SSLContext | bool) -> Any:
    def check(url: str) -> bool:
        try:
            return httpx.get(url, timeout=1.0, verify=verify).status_code < 400
        except httpx.HTTPError:
            return False

    return check


@contextlib.contextmanager
def running_world(
    deployed: Deployed, dynamodb: Any, tmp_path: Path, table: EngineTable | None = None
) -> Iterator[Global]:
    """Two Regions run from the synthesized app (their engines from `table`, the fake engine by
    default) behind a global address, keys in a table of `deployed`'s server (`dynamodb`)."""
    store = deployed.store
    create_keys_table(dynamodb, KEYS_TABLE)
    key_store = DynamoKeyStore(dynamodb, KEYS_TABLE)
    plaintext, record = keys.new_key("tests", ["*"], now=datetime.now(UTC))
    key_store.put(record)
    with deployed_clusters(
        deployed,
        [EAST, WEST],
        tmp_path / "engines",
        wait=0.5,
        poll=0.02,
        restart=FAST_RESTART,
        table=table,
    ) as clusters:
        clusters.start(sync_interval=0.05, poll_interval=0.05, sweep_interval=0.5)
        verify = verify_context(clusters)
        proxies = {region: proxy.url for region, proxy in clusters.proxies.items()}
        health = HealthChecker(
            {region: url + HEALTH_PATH for region, url in proxies.items()}, probe(verify), interval=0.1
        ).start()
        front = GlobalFront(store, key_store, proxies, order=[EAST, WEST], health=health, verify=verify)
        try:
            yield Global(clusters, front, health, key_store, store, plaintext)
        finally:
            front.stop()
            health.stop()


@pytest.fixture
def world(deployed: Deployed, dynamodb: Any, tmp_path: Path) -> Iterator[Global]:
    """`running_world`: `store` and `moto` are then `deployed`'s (tests/functional/local/conftest.py)."""
    with running_world(deployed, dynamodb, tmp_path) as running:
        yield running
