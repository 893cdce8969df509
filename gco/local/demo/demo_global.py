"""The walk-through's global address: one URL for every Region, a Region failed, the answers going on.

Runs the local global address (`gco.local.front`) in front of the walk-through's Regional proxies,
with a key made by `gco keys create`; then `gco inference invoke` without `--region` (the answer names
its Region), the first Region's proxy stopped (as `gco local fail-region` does on `gco local up`)
while the same request keeps being answered by the next Region, the proxy back, and the key revoked
and refused at once.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import Callable
from typing import Any

import httpx

from gco import aws
from gco.endpoints import EndpointStore
from gco.env import ENDPOINT_URL_ENV
from gco.global_access.key_store import KEYS_TABLE_ENV, DynamoKeyStore
from gco.global_access.routing import REGION_HEADER
from gco.inference.invoke import API_KEY_ENV, GLOBAL_URL_ENV
from gco.local.assembly.global_api import global_api, keys_table
from gco.local.errors import DemoStepError
from gco.local.front.front import GlobalFront
from gco.local.front.health import HealthChecker
from gco.local.front.process import http_probe
from gco.local.region.cluster import LocalClusters
from gco.reconcile.proxy.routes import HEALTH_PATH

KEYS_TABLE = "gco-demo-api-keys"
FAILED_REQUESTS = 3
BACK_WITHIN_S = 30.0


def global_address(
    step: Callable[..., str],
    echo: Callable[[str], None],
    env: dict[str, str],
    clusters: LocalClusters,
    store: EndpointStore,
    name: str,
) -> None:
    """The global address's part of the walk-through, for endpoint `name` running in the first two
    Regions; the front and its health checker are stopped, and `env` left as it was, at the end.

    Raises:
        DemoStepError: a step did not end as it should, or the failed Region never answered again.
        AssemblyError: the clusters run an app whose global API cannot be run.
    """
    regions = list(clusters.proxies)
    app = clusters.reconcilers.app
    # From the app: the global API's authorizer decides, reading the keys table its environment names.
    gate, authorizer = global_api(app, clusters.reconcilers.home) if app is not None else (None, None)
    table = keys_table(authorizer) if authorizer is not None else KEYS_TABLE
    env[KEYS_TABLE_ENV] = table
    step("the keys table for the global address (the global stack owns it in AWS)", "keys", "init-table")
    created = json.loads(
        step(
            "a key for every endpoint: printed once, only its hash stored",
            "keys",
            "create",
            "demo",
            "--all-endpoints",
            "--output",
            "json",
        )
    )
    verify: ssl.SSLContext | bool = (
        ssl.create_default_context(cafile=str(clusters.ca_bundle)) if clusters.ca_bundle else True
    )
    proxies = {region: proxy.url for region, proxy in clusters.proxies.items()}
    health = HealthChecker(
        {r: url + HEALTH_PATH for r, url in proxies.items()}, http_probe(verify), interval=0.2
    )
    keys_client = aws.client("dynamodb", endpoint_url=env.get(ENDPOINT_URL_ENV))
    front = GlobalFront(
        store, DynamoKeyStore(keys_client, table), proxies, health=health.start(), verify=verify, gate=gate
    )
    env[GLOBAL_URL_ENV], env[API_KEY_ENV] = front.url, created["key"]
    echo(
        f"# the global address {front.url}: keys checked, the nearest Region that runs {name} chosen, "
        "the next one tried when a Region does not answer; each answer names its Region"
    )
    try:
        invoke = ("inference", "invoke", name, "--prompt", "The capital of France is")
        step("invoke without --region: through the global address", *invoke)
        clusters.fail_proxy(regions[0])
        echo(f"\n# {regions[0]}'s proxy is stopped (`gco local fail-region {regions[0]}` on `gco local up`)")
        for number in range(1, FAILED_REQUESTS + 1):
            step(f"request {number} while {regions[0]} is down: answered by the next Region", *invoke)
        clusters.restore_proxy(regions[0])
        echo(f"\n# {regions[0]}'s proxy is back; the health checker passes it after three good checks")
        _answered_by(front, created["key"], name, regions[0])
        step(f"{regions[0]} answers again", *invoke)
        step("revoke the key", "keys", "revoke", created["key_id"])
        step("the revoked key is refused at once (401)", *invoke, expect=1)
    finally:
        front.stop()
        health.stop()
        if authorizer is not None:
            authorizer.close()
        for variable in (GLOBAL_URL_ENV, API_KEY_ENV, KEYS_TABLE_ENV):
            env.pop(variable, None)


def _answered_by(front: GlobalFront, key: str, name: str, region: str) -> None:
    """Wait (bounded) until the global address sends `name`'s requests to `region` again."""
    body: dict[str, Any] = {"prompt": "hi", "max_tokens": 1}
    deadline = time.monotonic() + BACK_WITHIN_S
    while time.monotonic() < deadline:
        try:
            reply = httpx.post(
                f"{front.url}/inference/{name}/v1/completions",
                json=body,
                headers={"authorization": f"Bearer {key}"},
                timeout=10,
            )
            if reply.headers.get(REGION_HEADER) == region:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise DemoStepError(f"{region} did not answer through the global address within {BACK_WITHIN_S:g} s")
