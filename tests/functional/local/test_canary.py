"""Canary over real HTTP through the local route, the synthesized app's Regional functions reconciling:
a 30% split within binomial bounds over 200 requests, then promote and rollback each leave one version
answering."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest

from gco.endpoints import EndpointStore, canary
from gco.local.region.cluster import LocalClusters
from gco.local.region.services import UPSTREAM_HEADER
from tests.functional.local.conftest import client, eventually
from tests.functional.local.test_engines import SPEC, running
from tests.unit.reconcile.records import EAST

REQUESTS = 200
WEIGHT = 30
CANARY_IMAGE = "registry.example.com/vllm@sha256:" + "c" * 64


def split(clusters: LocalClusters, name: str, requests: int) -> Counter[str]:
    """How many of `requests` each Service answered (the router names it on every answer)."""
    seen: Counter[str] = Counter()
    body: dict[str, Any] = {"prompt": "hi", "max_tokens": 1}
    with client(clusters) as http:
        for _ in range(requests):
            answer = http.post(f"{clusters.invoke_urls()[EAST]}/{name}/v1/completions", json=body)
            seen[answer.headers.get(UPSTREAM_HEADER, str(answer.status_code))] += 1
    return seen


def engine_images(clusters: LocalClusters) -> dict[str, str]:
    return {
        obj["metadata"]["name"]: obj["spec"]["template"]["spec"]["containers"][0]["image"]
        for obj in clusters.reconcilers.regions[EAST].api.endpoint_objects()
        if obj["kind"] == "Deployment"
    }


def one_version(clusters: LocalClusters) -> None:
    """The proxy converges (nginx reloads after the route changed) to one version, and stays there."""
    eventually(lambda: split(clusters, "smol", 20) == Counter({"smol": 20}), "one version answering")
    assert split(clusters, "smol", 20) == Counter({"smol": 20})


def canary_ready(store: EndpointStore, clusters: LocalClusters) -> bool:
    return running(store, "smol", EAST, 2) and len(clusters.kubelets[EAST].pids()) == 2


@pytest.mark.slow
def test_canary_split_promote_and_rollback(store: EndpointStore, clusters: LocalClusters) -> None:
    """Through the synthesized app's Regional functions, run from their assets under their roles with
    IAM enforced (docs/local.md, "From the synthesized app")."""
    split_promote_and_rollback(store, clusters)
    assert all(not local.api.forbidden for local in clusters.reconcilers.regions.values())


def split_promote_and_rollback(store: EndpointStore, clusters: LocalClusters) -> None:
    store.create("smol", SPEC, [EAST])
    eventually(lambda: running(store, "smol", EAST, 1), "smol running")
    canary.set_canary(store, "smol", CANARY_IMAGE, WEIGHT)
    eventually(lambda: canary_ready(store, clusters), "the canary serves")

    seen = split(clusters, "smol", REQUESTS)
    mean = REQUESTS * WEIGHT / 100
    bound = 4.5 * math.sqrt(REQUESTS * WEIGHT / 100 * (1 - WEIGHT / 100))  # false alarm < 1e-5
    assert set(seen) == {"smol", "smol--canary"}
    assert abs(seen["smol--canary"] - mean) <= bound, seen

    promoted = canary.promote(store, "smol")
    assert promoted.spec.image == CANARY_IMAGE and promoted.spec.canary is None
    eventually(
        lambda: running(store, "smol", EAST, 1) and engine_images(clusters) == {"smol": CANARY_IMAGE},
        "the promoted version alone",
    )
    eventually(lambda: len(clusters.kubelets[EAST].pids()) == 1, "one engine left")
    one_version(clusters)

    canary.set_canary(store, "smol", SPEC["image"], 50)
    eventually(lambda: canary_ready(store, clusters), "a second canary serves")
    canary.rollback(store, "smol")
    eventually(
        lambda: running(store, "smol", EAST, 1) and engine_images(clusters) == {"smol": CANARY_IMAGE},
        "the canary removed",
    )
    eventually(lambda: len(clusters.kubelets[EAST].pids()) == 1, "one engine left")
    one_version(clusters)
