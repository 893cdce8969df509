"""Malformed items beside good ones (moto server, two Regions of stand-ins): one unreadable record
never stops a Region. The sweep reconciles every good endpoint in every Region and names the bad
keys; the stream handler fails only the bad records (to the dead-letter queue after their retries);
`gco inference list` prints the readable ones and one warning per unreadable key, and `status` of a
bad key exits 1 naming the field.

It runs the reconciler library in this process (`local`): it reads the in-process sweep's reports and
hands batches to the in-process reconciler."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from gco.cli import main
from gco.endpoints import EndpointStore, MalformedRecordError
from gco.endpoints.codec import to_item
from gco.local.moto.motoserver import MotoServer
from gco.local.region.poller import lambda_event
from gco.local.region.reconcilers import LocalReconcilers
from gco.reconcile.handler import handle_stream_event
from tests.conftest import TABLE
from tests.unit.reconcile.records import EAST, IMAGE, WEST

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}
GOOD = {"alpha": [EAST, WEST], "beta": [WEST], "gamma": [EAST]}
# key -> (what is wrong with the stored item, the field the error must name)
BAD: dict[str, tuple[dict[str, Any], str]] = {
    "no-spec": ({"spec": None}, "spec"),
    "port-text": ({"spec": {**SPEC, "port": "eighty"}}, "spec.port"),
    "paused": ({"desired_state": "paused"}, "desired_state"),
    "odd-status": ({"region_status": {EAST: {"state": "hibernating"}}}, f"region_status.{EAST}.state"),
    "regions-text": ({"target_regions": EAST}, "target_regions"),
}


def seed_bad(store: EndpointStore) -> None:
    """Put each malformed item as another writer would: straight into the table."""
    for key, (change, _) in BAD.items():
        fields: dict[str, Any] = {
            "endpoint_name": key,
            "lifecycle_id": "a" * 64,
            "desired_state": "deploying",
            "target_regions": [EAST, WEST],
            "cleanup_regions": [EAST, WEST],
            "region_generations": {EAST: "b" * 64, WEST: "c" * 64},
            "spec": SPEC,
            "created_at": "2026-01-01T00:00:00.000000Z",
            "updated_at": "2026-01-01T00:00:00.000000Z",
            **change,
        }
        store.client.put_item(
            TableName=store.table_name, Item=to_item({k: v for k, v in fields.items() if v is not None})
        )


def seed_good(store: EndpointStore) -> None:
    for name, regions in GOOD.items():
        store.create(name, SPEC, regions)


def assert_good_running(store: EndpointStore, local: LocalReconcilers) -> None:
    for name, regions in GOOD.items():
        record = store.get(name)
        assert record is not None
        assert {region: record.region_status[region].state for region in record.region_status} == {
            region: "running" for region in regions
        }, name
        for region in regions:
            owners = {
                obj["metadata"]["labels"]["gco.dev/endpoint"]
                for obj in local.regions[region].api.endpoint_objects()
            }
            assert name in owners


def test_sweep_reconciles_every_good_endpoint_in_every_region_and_names_the_bad_keys(
    store: EndpointStore, local: LocalReconcilers, caplog: pytest.LogCaptureFixture
) -> None:
    seed_bad(store)
    seed_good(store)  # no stream delivery: the sweep does all of it
    with caplog.at_level(logging.WARNING):
        reports = local.sweep()
    for region, report in reports.items():
        assert report.error is None and report.failed == [], region
        assert sorted(report.unreadable) == sorted(BAD), region
        assert report.endpoints == len(GOOD)
    assert_good_running(store, local)
    for key, (_, field) in BAD.items():
        lines = [r.getMessage() for r in caplog.records if f"endpoint={key} " in r.getMessage()]
        assert len(lines) == 2  # once per Region
        assert all(f"kind=unreadable field={field}:" in line for line in lines), lines


def test_list_yields_the_readable_records_and_each_unreadable_key(store: EndpointStore) -> None:
    seed_bad(store)
    seed_good(store)
    listing = store.scan()
    assert sorted(record.endpoint_name for record in listing.records) == sorted(GOOD)
    assert {problem.key: problem.field for problem in listing.unreadable} == {
        key: field for key, (_, field) in BAD.items()
    }
    assert sorted(record.endpoint_name for record in store.list()) == sorted(GOOD)
    for key, (_, field) in BAD.items():
        with pytest.raises(MalformedRecordError) as raised:
            store.get(key)
        assert (raised.value.key, raised.value.field) == (key, field)


def test_stream_fails_only_the_bad_records_which_end_in_the_dead_letter_queue(
    store: EndpointStore, local: LocalReconcilers
) -> None:
    seed_good(store)
    seed_bad(store)
    local.pump()
    assert_good_running(store, local)
    for region, stack in local.regions.items():
        dead = sorted(
            record["dynamodb"]["Keys"]["endpoint_name"]["S"] for record in stack.poller.dead_letters
        )
        assert dead == sorted(BAD), region


def test_one_batch_reports_only_the_bad_records_and_counts_them(
    store: EndpointStore, local: LocalReconcilers
) -> None:
    seed_good(store)
    seed_bad(store)
    keys = [*GOOD, *BAD]
    records = [
        {
            "eventID": f"e{index}",
            "eventName": "INSERT",
            "dynamodb": {"Keys": {"endpoint_name": {"S": key}}, "SequenceNumber": str(100 + index)},
        }
        for index, key in enumerate(keys)
    ]
    kinds: list[str] = []
    response = handle_stream_event(
        lambda_event(records, local.stream_arn, EAST), local.regions[EAST].reconciler, on_failure=kinds.append
    )
    failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
    assert failed == {str(100 + keys.index(key)) for key in BAD}
    assert kinds == ["unreadable"] * len(BAD)


def test_cli_list_warns_once_per_unreadable_key_and_status_names_the_field(
    store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_bad(store)
    seed_good(store)
    capsys.readouterr()
    assert main(["inference", "list", "--endpoint-url", moto.url, "--table", TABLE]) == 0
    out, err = capsys.readouterr()
    listed = [line.split()[0] for line in out.splitlines()[1:]]
    assert sorted(listed) == sorted(GOOD)
    warnings = err.strip().splitlines()
    assert len(warnings) == len(BAD)
    for key, (_, field) in BAD.items():
        assert sum(f"record {key!r} is unreadable: {field}:" in line for line in warnings) == 1
    for key, (_, field) in BAD.items():
        assert main(["inference", "status", key, "--endpoint-url", moto.url, "--table", TABLE]) == 1
        _, err = capsys.readouterr()
        assert err.count("\n") == 1 and f"record {key!r} is unreadable: {field}:" in err
