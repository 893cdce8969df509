"""The local HPA over real engines: replicas follow the load the engines report, within min..max,
and the HPA's status is written as the controller writes it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gco.endpoints import EndpointStore, operations
from gco.local.region.autoscaler import desired_replicas
from gco.local.region.cluster import LocalClusters
from gco.local.region.engines import EngineTable
from gco.reconcile.objects import DEPLOYMENT, HPA
from tests.functional.conftest import Deployed
from tests.functional.local.conftest import client, deployed_clusters, eventually
from tests.functional.local.test_engines import SPEC, running
from tests.unit.reconcile.records import EAST

AUTOSCALED: dict[str, Any] = {
    **SPEC,
    "autoscaling": {
        "enabled": True,
        "min_replicas": 1,
        "max_replicas": 3,
        "metrics": [{"type": "cpu", "target": 50}],
    },
}


@pytest.fixture
def slow(deployed: Deployed, tmp_path: Path) -> Iterator[LocalClusters]:
    """One Region run from the synthesized app, its engines taking 20 ms a token, so requests stay in
    flight long enough to be load."""
    with deployed_clusters(
        deployed,
        [EAST],
        tmp_path / "engines",
        wait=0.2,
        proxy="python",
        table=EngineTable.fake("--itl-ms", "20"),
    ) as stack:
        stack.start(sync_interval=0.1, poll_interval=0.05, sweep_interval=0.3)
        yield stack


def hpa_status(clusters: LocalClusters) -> tuple[int, int]:
    hpa = clusters.reconcilers.regions[EAST].api.get(HPA, "gco-inference", "smol")
    status = (hpa or {}).get("status") or {}
    return status.get("currentReplicas", -1), status.get("desiredReplicas", -1)


def replicas(clusters: LocalClusters) -> int:
    deployment = clusters.reconcilers.regions[EAST].api.get(DEPLOYMENT, "gco-inference", "smol")
    return int(((deployment or {}).get("spec") or {}).get("replicas", 1))


def test_the_algorithm_clamps_and_tolerates() -> None:
    assert desired_replicas(1, 400, 50, 1, 3) == 3
    assert desired_replicas(2, 0, 50, 1, 3) == 1
    assert desired_replicas(2, 54, 50, 1, 3) == 2  # within the 10% tolerance
    assert desired_replicas(2, 75, 50, 1, 5) == 3


def test_replicas_follow_engine_load_within_bounds(store: EndpointStore, slow: LocalClusters) -> None:
    store.create("smol", AUTOSCALED, [EAST])
    eventually(lambda: running(store, "smol", EAST, 1), "running at the minimum")
    eventually(lambda: hpa_status(slow) == (1, 1), "HPA status at rest")

    done = threading.Event()

    def load() -> None:
        with client(slow) as http:
            while not done.is_set():
                http.post(
                    f"{slow.invoke_urls()[EAST]}/smol/v1/completions", json={"prompt": "x", "max_tokens": 50}
                )

    workers = [threading.Thread(target=load, daemon=True) for _ in range(4)]
    for worker in workers:
        worker.start()
    try:
        eventually(lambda: replicas(slow) == 3 and hpa_status(slow)[1] == 3, "scaled to the maximum")
        eventually(
            lambda: running(store, "smol", EAST, 3) and len(slow.kubelets[EAST].pids()) == 3, "3 engines"
        )
    finally:
        done.set()
        for worker in workers:
            worker.join(timeout=30)
    eventually(lambda: replicas(slow) == 1 and hpa_status(slow) == (1, 1), "back to the minimum")
    eventually(lambda: len(slow.kubelets[EAST].pids()) == 1, "one engine")

    operations.stop(store, "smol")  # the reconciler's replicas 0 takes the field from the autoscaler
    eventually(lambda: replicas(slow) == 0 and not slow.kubelets[EAST].pids(), "stopped")
