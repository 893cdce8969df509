"""Reconciling many endpoints at once keeps the semantics: over the moto server's stream with
parallel batches per shard, each endpoint's records stay in order, a failed record is retried
without holding back the others, nothing is applied twice, and a sweep afterwards writes nothing.

It runs the reconciler library in this process: it counts the applies of the in-process reconciler's
cluster client and reads its in-process sweep reports."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from gco import aws
from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.local.region.poller import StreamPoller
from gco.local.region.reconcilers import LocalReconcilers
from gco.local.region.router import ShardReader
from gco.reconcile.objects import ObjectRef
from tests.unit.reconcile.records import EAST, IMAGE, WEST

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "meta-llama/Llama-3.1-8B-Instruct"}
ENDPOINTS = [f"model-{index:02d}" for index in range(12)]


def name_of(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["Keys"]["endpoint_name"]["S"])


def sequence_of(record: dict[str, Any]) -> int:
    return int(record["dynamodb"]["SequenceNumber"])


def test_parallel_batches_keep_each_endpoint_in_order_and_retry_only_what_failed(
    store: EndpointStore, moto: MotoServer
) -> None:
    for name in ENDPOINTS:
        lifecycle_id = store.create(name, SPEC, [EAST]).lifecycle_id
        assert lifecycle_id is not None
        for replicas in (2, 3):
            assert store.update_spec(name, {**SPEC, "replicas": replicas}, lifecycle_id) is not None
    invocations: list[list[dict[str, Any]]] = []
    lock = threading.Lock()
    failed_once: set[str] = set()

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        records = event["Records"]
        with lock:
            invocations.append(records)
        failures = []
        for item in records:  # model-03 fails its first delivery once
            if name_of(item) == "model-03" and "model-03" not in failed_once:
                failed_once.add("model-03")
                failures.append({"itemIdentifier": item["dynamodb"]["SequenceNumber"]})
        return {"batchItemFailures": failures}

    table = store.client.describe_table(TableName=store.table_name)["Table"]
    poller = StreamPoller(
        aws.client("dynamodbstreams", endpoint_url=moto.url),
        table["LatestStreamArn"],
        handler,
        region=EAST,
        batch_size=10,
        parallelization=4,
    )
    poller.drain()
    assert len(invocations) > 1
    assert poller.dead_letters == []
    delivered: dict[str, list[int]] = {}
    for records in invocations:
        per_endpoint: dict[str, list[int]] = {}
        for item in records:
            per_endpoint.setdefault(name_of(item), []).append(sequence_of(item))
        for name, sequences in per_endpoint.items():
            assert sequences == sorted(sequences)  # in stream order within a batch
            if delivered.get(name):  # a later delivery continues or restarts, never skips back past it
                assert sequences[0] > delivered[name][-1] or sequences[0] in delivered[name]
            delivered.setdefault(name, []).extend(sequences)
    # Every record of every endpoint was delivered; the failed one again after its failure.
    assert set(delivered) == set(ENDPOINTS)
    assert all(len(set(sequences)) == 3 for sequences in delivered.values())
    assert len(delivered["model-03"]) > 3


def test_many_endpoints_at_once_converge_with_no_duplicate_apply_and_an_idle_sweep_writes_nothing(
    store: EndpointStore, moto: MotoServer
) -> None:
    with LocalReconcilers(store, [EAST, WEST], endpoint_url=moto.url, wait=0.0) as local:
        applied: dict[str, Counter[str]] = {region: Counter() for region in local.regions}
        for region, stack in local.regions.items():
            apply = stack.cluster.apply

            def counting(obj: Any, apply: Any = apply, seen: Counter[str] = applied[region]) -> Any:
                seen[ObjectRef.of(obj).key.__repr__()] += 1
                return apply(obj)

            stack.cluster.apply = counting  # type: ignore[method-assign]
        failures = {"left": 1}
        east = local.regions[EAST]
        handle = east.poller.handler

        def failing_once(event: dict[str, Any], context: Any) -> dict[str, Any]:
            # One invocation of a parallel batch dies (Lambda retries that batch); others go on.
            if failures["left"] and any(name_of(r) == "model-05" for r in event["Records"]):
                failures["left"] -= 1
                raise RuntimeError("the invocation died")
            return handle(event, context)

        east.poller.handler = failing_once
        for name in ENDPOINTS:
            store.create(name, SPEC, [EAST, WEST])
        local.pump()
        for name in ENDPOINTS:
            record = store.get(name)
            assert record is not None
            assert {region: item.state for region, item in record.region_status.items()} == {
                EAST: "running",
                WEST: "running",
            }
        for region, stack in local.regions.items():
            endpoint_keys = {repr(ObjectRef.of(obj).key) for obj in stack.api.endpoint_objects()}
            assert endpoint_keys  # every endpoint object was applied exactly once
            assert {key: applied[region][key] for key in endpoint_keys} == dict.fromkeys(endpoint_keys, 1)
            paths = sorted(route.path for route in ShardReader(stack.api).table().routes)
            assert paths == sorted(f"/inference/{name}" for name in ENDPOINTS)  # no route lost
        assert failures["left"] == 0 and east.poller.dead_letters == []
        before = {record.endpoint_name: record.updated_at for record in store.list()}
        writes = {region: stack.api.writes() for region, stack in local.regions.items()}
        reports = local.sweep()
        assert all(report.done == len(ENDPOINTS) for report in reports.values())
        assert {record.endpoint_name: record.updated_at for record in store.list()} == before
        assert {region: stack.api.writes() for region, stack in local.regions.items()} == writes
        assert local.pump() == 0  # no DynamoDB write: no stream record
