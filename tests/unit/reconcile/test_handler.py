"""Stream-record helpers: endpoint keys, poison records, and records that only change another
Region's status (which the Region's reconciler may skip)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gco.local.region.poller import lambda_event
from gco.reconcile.handler import PoisonRecordError, endpoint_name_of, is_status_echo, parse_stream_record
from gco.reconcile.stream_event import StreamRecord

EVENTS = Path(__file__).parents[2] / "events"


def image(east: str, west: str, replicas: str = "1", updated: str = "t1") -> dict[str, Any]:
    return {
        "endpoint_name": {"S": "llama"},
        "updated_at": {"S": updated},
        "spec": {"M": {"replicas": {"N": replicas}}},
        "region_status": {
            "M": {"us-east-1": {"M": {"state": {"S": east}}}, "eu-west-1": {"M": {"state": {"S": west}}}}
        },
    }


def record(old: dict[str, Any] | None, new: dict[str, Any] | None, event: str = "MODIFY") -> StreamRecord:
    images: dict[str, Any] = {"Keys": {"endpoint_name": {"S": "llama"}}, "SequenceNumber": "1"}
    if old is not None:
        images["OldImage"] = old
    if new is not None:
        images["NewImage"] = new
    return StreamRecord.model_validate({"eventID": "1", "eventName": event, "dynamodb": images})


def test_status_only_changes_are_echoes_unless_progressing() -> None:
    settled = record(image("running", "creating"), image("running", "running", updated="t2"))
    assert is_status_echo(settled, "us-east-1")  # another Region's status
    assert is_status_echo(settled, "eu-west-1")  # its own status, now settled
    progressing = record(image("running", "pending"), image("running", "creating", updated="t2"))
    assert not is_status_echo(progressing, "eu-west-1")  # the echo re-checks readiness


def test_desired_changes_are_never_skipped() -> None:
    assert not is_status_echo(record(image("a", "b"), image("a", "b", replicas="2")), "us-east-1")
    assert not is_status_echo(record(None, image("a", "b"), "INSERT"), "us-east-1")
    assert not is_status_echo(record(image("a", "b"), None, "REMOVE"), "us-east-1")


def test_endpoint_names_and_poison_records() -> None:
    event = json.loads((EVENTS / "dynamodb_stream_batch.json").read_text())
    records = [parse_stream_record(item) for item in event["Records"]]
    assert endpoint_name_of(records[0]) == "llama"
    with pytest.raises(PoisonRecordError, match="no endpoint_name"):
        endpoint_name_of(records[1])
    with pytest.raises(PoisonRecordError):
        endpoint_name_of(parse_stream_record({"eventID": "x"}))
    for shapeless in (
        "not a record",
        {"dynamodb": "no change"},
        {"dynamodb": {"Keys": {"endpoint_name": 7}}},
    ):
        with pytest.raises(PoisonRecordError):
            endpoint_name_of(parse_stream_record(shapeless))
    first = parse_stream_record(event["Records"][0])
    assert first is not None and first.item_identifier == "111"


def test_lambda_event_shape_from_get_records() -> None:
    from datetime import UTC, datetime

    raw = [
        {
            "eventID": "1",
            "eventName": "INSERT",
            "dynamodb": {
                "ApproximateCreationDateTime": datetime(2026, 1, 1, tzinfo=UTC),
                "Keys": {"endpoint_name": {"S": "llama"}},
                "NewImage": {"blob": {"B": b"\x00\x01"}, "tags": {"BS": [b"\x02"]}},
                "SequenceNumber": "7",
            },
        }
    ]
    event = lambda_event(raw, "arn:stream", "eu-west-1")
    item = event["Records"][0]
    assert (item["eventSource"], item["awsRegion"], item["eventSourceARN"]) == (
        "aws:dynamodb",
        "eu-west-1",
        "arn:stream",
    )
    assert item["dynamodb"]["ApproximateCreationDateTime"] == 1767225600
    assert item["dynamodb"]["NewImage"] == {"blob": {"B": "AAE="}, "tags": {"BS": ["Ag=="]}}
    json.dumps(event)
