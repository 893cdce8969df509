"""The matrix against the local stack run from the synthesized app: two Regions of stand-in clusters
reconciled by the app's Regional functions, with engine processes and proxies, the endpoint table on
the moto server (IAM enforced), every request over real HTTP.

Settings use the shortest intervals the rules allow (1 s), so a whole run takes seconds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gco.endpoints import EndpointStore
from gco.env import CLUSTER_URLS_ENV, TABLE_ENV
from gco.inference.invoke import INVOKE_CA_BUNDLE_ENV, INVOKE_URLS_ENV
from gco.local.region.cluster import LocalClusters, ProxyKind
from gco.local.region.engines import EngineTable
from gco.reconcile.objects import ENDPOINT_LABEL, LIFECYCLE_ANNOTATION
from gco.validation import OWNER_LABEL
from gco.validation.connect import ProxyHttp, UrlClusters
from gco.validation.report import MatrixResult
from gco.validation.service import start
from tests.functional.conftest import Deployed
from tests.functional.local.conftest import deployed_clusters
from tests.unit.reconcile.records import EAST, WEST
from tests.unit.validation.sample import settings

StackFactory = Callable[..., LocalClusters]


@pytest.fixture
def make_stack(deployed: Deployed, tmp_path: Path) -> Iterator[StackFactory]:
    """Start the local stack (us-east-1, eu-west-1) from the synthesized app, with the engine table and
    proxy the test asks for; `store` and `moto` are then `deployed`'s (tests/functional/local/conftest.py)."""
    started: list[LocalClusters] = []

    def make(table: EngineTable | None = None, proxy: ProxyKind = "python") -> LocalClusters:
        stack = deployed_clusters(
            deployed,
            [EAST, WEST],
            tmp_path / "engines",
            wait=0.5,
            poll=0.02,
            proxy=proxy,
            table=table,
        )
        started.append(stack)
        return stack.start(sync_interval=0.05, poll_interval=0.05, sweep_interval=0.5)

    try:
        yield make
    finally:
        for stack in started:
            stack.stop()


def fake_table(framework: str, *replace: tuple[str, str], extra: tuple[str, ...] = ()) -> EngineTable:
    """The fake engine for every framework; for `framework`, placeholders replaced and flags added."""
    table = EngineTable.fake()
    mapping = dict(replace)
    commands = dict(table.commands)
    commands[framework] = (*(mapping.get(part, part) for part in commands[framework]), *extra)
    return EngineTable(commands=commands)


def write_settings(path: Path, **changes: Any) -> Path:
    data = settings(**changes)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def ports(stack: LocalClusters) -> dict[str, Any]:
    """The matrix's adapters pointed at the stack: its API servers and its proxies."""
    return {
        "clusters": UrlClusters(
            {region: local.api.url for region, local in stack.reconcilers.regions.items()}
        ),
        "http": ProxyHttp(timeout=10, bases=stack.invoke_urls()),
    }


def stack_environment(stack: LocalClusters, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `gco local env` sets, for this stack (a `gco` subprocess inherits it)."""
    urls = {region: local.api.url for region, local in stack.reconcilers.regions.items()}
    monkeypatch.setenv(CLUSTER_URLS_ENV, json.dumps(urls))
    monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps(stack.invoke_urls()))
    monkeypatch.setenv(TABLE_ENV, stack.reconcilers.store.table_name)
    if stack.ca_bundle is not None:
        monkeypatch.setenv(INVOKE_CA_BUNDLE_ENV, str(stack.ca_bundle))
    else:
        monkeypatch.delenv(INVOKE_CA_BUNDLE_ENV, raising=False)


def run_matrix(
    stack: LocalClusters, store: EndpointStore, tmp_path: Path, *, run_id: str, **changes: Any
) -> MatrixResult:
    path = write_settings(tmp_path / "settings.json", **changes)
    return start(path, store, run_dir=tmp_path / "run", run_id=run_id, **ports(stack))


def steps(tmp_path: Path) -> list[dict[str, Any]]:
    checkpoint = json.loads((tmp_path / "run" / "matrix" / "checkpoint.json").read_text(encoding="utf-8"))
    return list(checkpoint["steps"])


def first_failure(tmp_path: Path) -> dict[str, Any]:
    return next(step for step in steps(tmp_path) if step["verdict"] == "fail")


def assert_nothing_left(stack: LocalClusters, store: EndpointStore, run_id: str) -> None:
    """No record with the run's label, and in no Region an object of the run's endpoints' lifecycles."""
    records = [r for r in store.list(consistent_read=True) if r.labels.get(OWNER_LABEL) == run_id]
    assert records == []
    ours = {r.lifecycle_id for r in store.list(consistent_read=True)}  # lifecycles that still have a record
    for region, local in stack.reconcilers.regions.items():
        left = [
            obj["metadata"]["name"]
            for obj in local.api.objects()
            if (obj["metadata"].get("labels") or {}).get(ENDPOINT_LABEL, "").startswith(f"mx-{run_id}-")
            and (obj["metadata"].get("annotations") or {}).get(LIFECYCLE_ANNOTATION) not in ours
        ]
        assert left == [], f"{region} still holds {left}"
