"""Endpoints isolated from each other over the local stack run from the synthesized app: `col` with a
canary and `col-canary` each answered only by their own engines, before and after rollback and across
the deployed sweep's reconciles; every escaping path refused by the proxy (400) and by
`gco inference invoke --path` (exit 2, nothing written)."""

from __future__ import annotations

import http.client
import json
import ssl
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import pytest

from gco.endpoints import EndpointStore, canary
from gco.inference.invoke import INVOKE_CA_BUNDLE_ENV, INVOKE_URLS_ENV
from gco.local.moto.motoserver import MotoServer
from gco.local.region.cluster import LocalClusters
from gco.local.region.services import UPSTREAM_HEADER
from gco.reconcile.objects import DEPLOYMENT, ENDPOINT_LABEL, SERVICE
from gco.reconcile.proxy.routes import VERSION_HEADER
from tests.functional.cli.test_inference_cli import Cli
from tests.functional.local.conftest import client, eventually, sweep_region, unstamped_items
from tests.functional.local.test_canary import CANARY_IMAGE
from tests.functional.local.test_engines import SPEC, running
from tests.unit.endpoints.test_paths import ESCAPES
from tests.unit.reconcile.records import EAST

REQUESTS = 40


@pytest.fixture
def cli(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto, capsys, store.table_name)


def answers(clusters: LocalClusters, name: str, requests: int = REQUESTS) -> Counter[tuple[str, str]]:
    """(Service that answered, version the proxy named) over `requests` requests to `name`."""
    seen: Counter[tuple[str, str]] = Counter()
    body: dict[str, Any] = {"prompt": "hi", "max_tokens": 1}
    with client(clusters) as http:
        for _ in range(requests):
            answer = http.post(f"{clusters.invoke_urls()[EAST]}/{name}/v1/completions", json=body)
            seen[
                (
                    answer.headers.get(UPSTREAM_HEADER, str(answer.status_code)),
                    answer.headers.get(VERSION_HEADER, "-"),
                )
            ] += 1
    return seen


def raw_status(clusters: LocalClusters, path: str) -> int:
    """The proxy's status for `path` sent as written (httpx would resolve dot segments first)."""
    base = urlsplit(clusters.invoke_urls()[EAST])
    assert base.hostname is not None
    if base.scheme == "https":
        context = ssl.create_default_context(cafile=str(clusters.ca_bundle))
        connection: http.client.HTTPConnection = http.client.HTTPSConnection(
            base.hostname, base.port, context=context, timeout=10
        )
    else:
        connection = http.client.HTTPConnection(base.hostname, base.port, timeout=10)
    try:
        connection.putrequest("GET", base.path + path, skip_accept_encoding=True)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def owned_by(clusters: LocalClusters, kind_name: str, name: str) -> str | None:
    kind = DEPLOYMENT if kind_name == "Deployment" else SERVICE
    found = clusters.reconcilers.regions[EAST].api.get(kind, "gco-inference", name)
    return None if found is None else str(found["metadata"]["labels"][ENDPOINT_LABEL])


def test_an_endpoint_named_like_a_canary_and_the_canary_stay_apart(
    store: EndpointStore, clusters: LocalClusters
) -> None:
    store.create("col", SPEC, [EAST])
    store.create("col-canary", SPEC, [EAST])
    eventually(
        lambda: running(store, "col", EAST, 1) and running(store, "col-canary", EAST, 1), "both running"
    )
    canary.set_canary(store, "col", CANARY_IMAGE, 50)
    eventually(lambda: running(store, "col", EAST, 2), "col and its canary ready")
    eventually(lambda: ("col--canary", "canary") in answers(clusters, "col", 10), "the canary routed")

    seen = answers(clusters, "col")
    assert set(seen) <= {("col", "primary"), ("col--canary", "canary")}, seen  # the header tells the truth
    assert answers(clusters, "col-canary") == Counter({("col-canary", "primary"): REQUESTS})
    for _ in range(3):  # the deployed sweep reconciles both endpoints: neither takes the other's objects
        sweep_region(clusters, EAST)
    assert owned_by(clusters, "Deployment", "col-canary") == "col-canary"
    assert owned_by(clusters, "Deployment", "col--canary") == "col"

    canary.rollback(store, "col")
    eventually(lambda: owned_by(clusters, "Deployment", "col--canary") is None, "the canary removed")
    eventually(lambda: set(answers(clusters, "col", 10)) == {("col", "primary")}, "col alone answers col")
    assert owned_by(clusters, "Deployment", "col-canary") == "col-canary"
    assert owned_by(clusters, "Service", "col-canary") == "col-canary"
    assert answers(clusters, "col-canary") == Counter({("col-canary", "primary"): REQUESTS})
    assert running(store, "col-canary", EAST, 1)


def test_the_proxy_refuses_every_escaping_path(store: EndpointStore, clusters: LocalClusters) -> None:
    store.create("col", SPEC, [EAST])
    store.create("ev12", SPEC, [EAST])
    eventually(lambda: running(store, "col", EAST, 1), "col running")
    eventually(lambda: raw_status(clusters, "/col/v1/models") == 200, "the route served")
    sendable = [p for p in ESCAPES if p.isascii() and p.isprintable() and " " not in p and len(p) < 8000]
    assert {path: raw_status(clusters, "/col" + path) for path in sendable} == dict.fromkeys(sendable, 400)
    assert raw_status(clusters, "/col/v1/models") == 200


def test_invoke_refuses_an_escaping_path_and_reports_the_url_sent(
    store: EndpointStore, clusters: LocalClusters, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps(clusters.invoke_urls()))
    if clusters.ca_bundle is not None:
        monkeypatch.setenv(INVOKE_CA_BUNDLE_ENV, str(clusters.ca_bundle))
    store.create("col", SPEC, [EAST])
    eventually(lambda: running(store, "col", EAST, 1), "col running")
    before = unstamped_items(store)
    for path in ESCAPES:
        _, err = cli("inference", "invoke", "col", "--path", path, "--body", "{}", code=2)
        assert err.count("\n") == 1 and err.startswith("error: --path: ") and "Traceback" not in err, err
    assert unstamped_items(store) == before
    answer = cli.json("inference", "invoke", "col", "--path", "/v1/models", "--body", "{}")
    assert answer["url"] == f"{clusters.invoke_urls()[EAST]}/col/v1/models"
    assert answer["version"] == "primary" and answer["status"] == 200


def test_the_in_process_router_refuses_the_same_paths(manual: LocalClusters) -> None:
    """Where nginx is not installed the local stack routes in-process: the same rule, the same 400."""
    sendable = [p for p in ESCAPES if p.isascii() and p.isprintable() and " " not in p and len(p) < 8000]
    assert {path: raw_status(manual, "/col" + path) for path in sendable} == dict.fromkeys(sendable, 400)
    assert raw_status(manual, "/col/v1/models") == 404  # no route: refused only by what it holds
