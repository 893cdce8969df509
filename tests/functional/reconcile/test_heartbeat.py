"""The heartbeat against the moto server's SSM over HTTP: written by a sweep that lists its Region (and
only then), in that Region's Parameter Store, overwritten each sweep, with no write to the table.

It runs the reconciler library in this process (`local`): it calls each Region's in-process reconciler
directly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gco import aws
from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.local.region.reconcilers import LocalReconcilers
from gco.reconcile.errors import HeartbeatError
from gco.reconcile.heartbeat import Heartbeat, HeartbeatWriter, SsmParameters, parameter_name, read_heartbeat
from gco.reconcile.reconciler import Reconciler
from gco.reconcile.runtime import heartbeat_from_env
from gco.reconcile.sweep import sweep
from tests.unit.reconcile.records import EAST, IMAGE, WEST

T0 = datetime(2026, 12, 2, 6, 0, 0, tzinfo=UTC)


def ssm(moto: MotoServer, region: str) -> SsmParameters:
    return SsmParameters(aws.client("ssm", region=region, endpoint_url=moto.url))


def consumed_writes(store: EndpointStore) -> int:
    """Items written so far: moto counts no capacity, so count the table's stream records instead."""
    table = store.client.describe_table(TableName=store.table_name)["Table"]
    streams = aws.client("dynamodbstreams", region=store.client.meta.region_name)
    shards = streams.describe_stream(StreamArn=table["LatestStreamArn"])["StreamDescription"]["Shards"]
    total = 0
    for shard in shards:
        iterator = streams.get_shard_iterator(
            StreamArn=table["LatestStreamArn"], ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        total += len(streams.get_records(ShardIterator=iterator, Limit=1000)["Records"])
    return total


def test_a_parameter_never_written_reads_as_none_and_an_overwrite_replaces_it(moto: MotoServer) -> None:
    parameters = ssm(moto, EAST)
    assert parameters.get(parameter_name("tbl", EAST)) is None
    writer = HeartbeatWriter(parameters, "tbl", 300.0, clock=lambda: T0)
    assert writer.beat(EAST) and writer.beat(EAST)
    later = HeartbeatWriter(parameters, "tbl", 300.0, clock=lambda: T0 + timedelta(minutes=5))
    assert later.beat(EAST)
    assert read_heartbeat(parameters, "tbl", EAST) == Heartbeat(at=T0 + timedelta(minutes=5), every_s=300.0)
    assert read_heartbeat(ssm(moto, WEST), "tbl", EAST) is None  # each Region's own Parameter Store


def test_an_ssm_error_other_than_not_found_is_a_heartbeat_error(moto: MotoServer) -> None:
    # SSM refuses both (ValidationException): a Secrets Manager reference read without decryption,
    # and a name prefixed with "aws" (PutParameter's name rules).
    with pytest.raises(HeartbeatError, match=r"cannot read /aws/reference/secretsmanager/x: .*ValidationExc"):
        ssm(moto, EAST).get("/aws/reference/secretsmanager/x")
    with pytest.raises(HeartbeatError, match=r"cannot write awsheartbeat: .*ValidationException"):
        ssm(moto, EAST).put("awsheartbeat", "{}")


def test_a_sweep_writes_its_regions_heartbeat_and_nothing_to_the_table(
    store: EndpointStore, local: LocalReconcilers, moto: MotoServer
) -> None:
    store.create("steady", {"image": IMAGE}, [EAST])
    local.pump()
    east = local.regions[EAST].reconciler
    sweep(east)  # as desired from here on
    before = consumed_writes(store)
    writer = HeartbeatWriter(ssm(moto, EAST), store.table_name, 300.0, clock=lambda: T0)
    report = sweep(east, heartbeat=writer)
    assert report.heartbeat is True and report.error is None and report.done == 1
    assert consumed_writes(store) == before
    assert read_heartbeat(ssm(moto, EAST), store.table_name, EAST) == Heartbeat(at=T0, every_s=300.0)
    assert read_heartbeat(ssm(moto, WEST), store.table_name, WEST) is None


def test_a_sweep_that_cannot_list_its_region_writes_no_heartbeat(
    dynamodb: Any, local: LocalReconcilers, moto: MotoServer
) -> None:
    missing = EndpointStore(dynamodb, "no-such-table")
    reconciler = Reconciler(missing, local.regions[EAST].cluster, EAST)
    writer = HeartbeatWriter(ssm(moto, EAST), missing.table_name, 300.0)
    report = sweep(reconciler, heartbeat=writer)
    assert report.error is not None and report.heartbeat is None
    assert read_heartbeat(ssm(moto, EAST), missing.table_name, EAST) is None


def test_the_lambdas_heartbeat_is_built_from_its_environment(moto: MotoServer) -> None:
    writer = heartbeat_from_env(
        {
            "EKS_CLUSTER_NAME": "gco-west",
            "RECONCILER_REGION": WEST,
            "INFERENCE_ENDPOINTS_TABLE_NAME": "tbl",
            "GCO_SWEEP_SECONDS": "600",
        }
    )
    assert writer.beat(WEST)
    found = read_heartbeat(ssm(moto, WEST), "tbl", WEST)
    assert found is not None and found.every_s == 600.0
    assert abs((datetime.now(UTC) - found.at).total_seconds()) < 60
