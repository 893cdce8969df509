"""A Region's stream handler in execution environments of their own: each batch is reconciled in
another process (its own reconciler and clients, over HTTP to the same moto server and stand-in API
server), the poller gets its batch response back, an error there is raised here, and an environment
that cannot start stops the start with one error naming the Region."""

from __future__ import annotations

import os
from typing import Any

import pytest

from gco import aws
from gco.endpoints import EndpointStore
from gco.local.errors import LocalStackError
from gco.local.moto.motoserver import MotoServer
from gco.local.region.environments import EnvironmentConfig, ExecutionEnvironments
from gco.local.region.poller import StreamPoller
from gco.local.standin.process import StandInProcess
from gco.reconcile.objects import DEPLOYMENT
from tests.unit.reconcile.records import EAST

TOKEN = "environments-token"
SPEC: dict[str, Any] = {"image": "vllm/vllm-openai:v0.6.3", "model_id": "meta-llama/Llama-3.1-8B-Instruct"}


def config_for(store: EndpointStore, moto: MotoServer, api_url: str, **changes: Any) -> EnvironmentConfig:
    return EnvironmentConfig(EAST, store.table_name, moto.url, api_url, TOKEN, probe=False, **changes)


def test_each_batch_is_reconciled_in_an_environment_process_of_its_own(
    moto: MotoServer, store: EndpointStore
) -> None:
    names = ["alpha", "beta", "gamma"]
    with (
        StandInProcess(token=TOKEN) as api,
        ExecutionEnvironments(config_for(store, moto, api.url), 2) as environments,
    ):
        assert len(environments.pids) == 2 and os.getpid() not in environments.pids
        started_cpu = environments.cpu_seconds()
        for name in names:
            store.create(name, SPEC, [EAST])
        arn = store.client.describe_table(TableName=store.table_name)["Table"]["LatestStreamArn"]
        streams = aws.client("dynamodbstreams", endpoint_url=moto.url)
        poller = StreamPoller(streams, arn, environments, region=EAST, batch_size=2, parallelization=2)
        assert poller.drain() >= len(names)
        assert not poller.dead_letters
        created = api.created_at(DEPLOYMENT.plural)
        assert {name for _, namespace, name in created if namespace == "gco-inference"} == set(names)
        for name in names:  # each reconcile wrote its Region's status from the environment
            record = store.get(name)
            assert record is not None and record.region_status[EAST].state in {"creating", "running"}
        assert environments.cpu_seconds() > started_cpu


def test_an_error_in_an_environment_is_raised_to_the_poller(moto: MotoServer, store: EndpointStore) -> None:
    with (
        StandInProcess(token=TOKEN) as api,
        ExecutionEnvironments(config_for(store, moto, api.url), 1) as environments,
    ):
        with pytest.raises(TypeError):  # `Records` is not a list: the handler fails as a whole
            environments({"Records": 5}, None)
        assert environments({"Records": []}, None) == {"batchItemFailures": []}  # still serves


def test_an_environment_that_cannot_start_stops_the_start(moto: MotoServer, store: EndpointStore) -> None:
    nowhere = config_for(store, moto, "http://127.0.0.1:9", attempts=1, timeout=0.5)  # nothing listens
    environments = ExecutionEnvironments(nowhere, 1)
    with pytest.raises(LocalStackError, match=f"the {EAST} execution environments did not start"):
        environments.start()
    with pytest.raises(LocalStackError, match="not started"):
        environments({"Records": []}, None)


def test_environments_are_counted_from_one(moto: MotoServer, store: EndpointStore) -> None:
    with pytest.raises(LocalStackError, match="count must be at least 1, not 0"):
        ExecutionEnvironments(config_for(store, moto, "http://127.0.0.1:9"), 0)
