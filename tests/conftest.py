"""Test harness: one real moto_server process per session on a free loopback port, reset per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from gco import aws
from gco.endpoints import EndpointStore, init_table
from gco.local.moto.motoserver import MotoServer

TABLE = "gco-test-endpoints"


@pytest.fixture(autouse=True, scope="session")
def _bundle_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The Lambda bundle cache of this test session (stacks/bundling.py), never the user's."""
    os.environ["GCO_BUNDLE_CACHE"] = str(tmp_path_factory.mktemp("lambda-bundles"))


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


@pytest.fixture
def moto(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    """A clean moto server; AWS_* variables point every boto3 client at it, with fake credentials."""
    moto_server.reset()
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("DYNAMODB_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return moto_server


@pytest.fixture
def dynamodb(moto: MotoServer) -> Any:
    return aws.client("dynamodb", endpoint_url=moto.url)


@pytest.fixture
def store(dynamodb: Any) -> EndpointStore:
    init_table(dynamodb, TABLE)
    return EndpointStore(dynamodb, TABLE)


# The xdist group of every test that reads the synthesized app (tests/cdk/synth_cache.py synthesizes it
# once per process, in tens of seconds): `--dist loadgroup` keeps them on one worker.
SYNTH_GROUP = "synthesized-app"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "synthesized" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(SYNTH_GROUP))
    # The longest tests go first (a stable sort keeps the rest in collection order): pytest-xdist
    # hands out work in this order, so no worker starts a minute-long test while the other idles at
    # the end of the run.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def soak_enabled() -> bool:
    return os.environ.get("GCO_SOAK") == "1"


@pytest.fixture(autouse=True, scope="session")
def _dropped_clauses() -> Iterator[None]:
    """With GCO_DROP_CLAUSES=a,b (set only by `make mutation-conditions`), the store's conditions
    leave those clauses out, so the harness can see whether the example tests notice."""
    labels = frozenset(filter(None, os.environ.get("GCO_DROP_CLAUSES", "").split(",")))
    if not labels:
        yield
        return
    from tests.functional.endpoints.mutation_conditions import dropped

    with dropped(labels):
        yield
