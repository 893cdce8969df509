"""The fencing review's findings, each as a test that failed on the store before the fix.

Tokens are minted by the store and never reused; reconciler and operator writes need their
fences; status details cannot forge fences; updated_at moves forward whatever a host's clock
says; numbers keep their type through DynamoDB's normalisation; too-large items are refused
before the write. Every refusal leaves the table as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from gco.endpoints import EndpointError, EndpointStore, InvalidSpecError, InvalidTransitionError
from gco.endpoints.codec import to_item
from gco.endpoints.record import EndpointRecord
from gco.endpoints.tokens import MonotonicClock, is_token, new_token

SPEC = {"image": "vllm/vllm-openai:v0.6.3", "replicas": 2}
EAST, WEST = "us-east-1", "us-west-2"


def scan(store: EndpointStore) -> list[dict[str, Any]]:
    return store.client.scan(TableName=store.table_name, ConsistentRead=True)["Items"]  # type: ignore[no-any-return]


def replaying(replays: list[str]) -> Callable[[], str]:
    """A token source that first offers `replays` (a broken or hostile source), then fresh ones."""
    queue: Iterator[str] = iter(replays)
    return lambda: next(queue, None) or new_token()


def move(store: EndpointStore, record: EndpointRecord, targets: list[str]) -> EndpointRecord:
    moved = store.update_target_regions(
        record.endpoint_name,
        targets,
        expected_lifecycle_id=record.lifecycle_id or "",
        expected_updated_at=record.updated_at or "",
    )
    assert moved is not None
    return moved


def test_a_rejoining_region_never_gets_a_token_of_an_earlier_membership(store: EndpointStore) -> None:
    record = store.create("chat", SPEC, [EAST, WEST])
    first = record.region_generations[WEST]
    left = move(store, record, [EAST])
    acked = store.region_writes.update_region_status(
        "chat", WEST, "deleted", expected_lifecycle_id=left.lifecycle_id, expected_region_generation=first
    )
    assert acked is not None
    # The token source offers the first membership's token and another Region's token again.
    store.table.token = replaying([first, record.region_generations[EAST], record.lifecycle_id or ""])
    second = move(store, acked, [EAST, WEST])
    assert second.region_generations[WEST] not in {
        first,
        record.region_generations[EAST],
        record.lifecycle_id,
    }
    third = move(store, move(store, second, [EAST]), [EAST, WEST])
    assert len({first, second.region_generations[WEST], third.region_generations[WEST]}) == 3
    # A delayed acknowledgement of the first membership cannot land on the third.
    before = scan(store)
    late = store.region_writes.update_region_status(
        "chat", WEST, "deleted", expected_lifecycle_id=third.lifecycle_id, expected_region_generation=first
    )
    assert late is None and scan(store) == before


def test_callers_cannot_propose_tokens(store: EndpointStore) -> None:
    record = store.create("chat", SPEC, [EAST])
    with pytest.raises(TypeError):
        store.update_target_regions(  # type: ignore[call-arg]
            "chat",
            [EAST, WEST],
            generations={WEST: "a" * 64},
            expected_lifecycle_id=record.lifecycle_id or "",
            expected_updated_at=record.updated_at or "",
        )


def test_a_token_source_that_keeps_repeating_is_refused(store: EndpointStore) -> None:
    store.table.token = lambda: "a" * 64
    with pytest.raises(EndpointError, match="CSPRNG"):
        store.create("chat", SPEC, [EAST, WEST])
    assert scan(store) == []


@pytest.mark.parametrize(
    ("fences", "missing"),
    [
        ((), "expected_lifecycle_id"),
        (("lifecycle_id",), "expected_region_generation"),
        (("region_generation",), "expected_lifecycle_id"),
    ],
)
def test_a_status_write_without_its_fences_is_refused(
    store: EndpointStore, fences: tuple[str, ...], missing: str
) -> None:
    record = store.create("chat", SPEC, [EAST])
    before = scan(store)
    with pytest.raises(InvalidSpecError, match=f"^{missing}: is required"):
        store.region_writes.update_region_status(  # a fence not given is None, the keyword's default
            "chat",
            EAST,
            "running",
            expected_lifecycle_id=record.lifecycle_id if "lifecycle_id" in fences else None,
            expected_region_generation=record.region_generations[EAST]
            if "region_generation" in fences
            else None,
        )
    assert scan(store) == before


def test_start_and_purge_need_their_fences(store: EndpointStore) -> None:
    store.create("chat", SPEC, [EAST])
    before = scan(store)
    with pytest.raises(InvalidSpecError, match=r"^expected_lifecycle_id"):
        store.start("chat", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpecError, match=r"^expected_deletion_generation"):
        store.region_writes.purge("chat", expected_deletion_generation=None)  # type: ignore[arg-type]
    assert scan(store) == before


@pytest.mark.parametrize("field", ["lifecycle_id", "region_generation", "deletion_generation", "state"])
def test_status_details_cannot_set_fence_fields(store: EndpointStore, field: str) -> None:
    record = store.create("chat", SPEC, [EAST])
    before = scan(store)
    with pytest.raises(InvalidSpecError, match=rf"^details\.{field}: is a status field"):
        store.region_writes.update_region_status(
            "chat",
            EAST,
            "running",
            details={field: "f" * 64},
            expected_lifecycle_id=record.lifecycle_id,
            expected_region_generation=record.region_generations[EAST],
        )
    assert scan(store) == before


def test_status_details_are_bounded_scalars(store: EndpointStore) -> None:
    record = store.create("chat", SPEC, [EAST])
    fences = {
        "expected_lifecycle_id": record.lifecycle_id,
        "expected_region_generation": record.region_generations[EAST],
    }
    before = scan(store)
    for details, field in [
        ({"ratio": 0.5}, "details.ratio"),
        ({"note": "a\nb"}, "details.note"),
        ({"Bad-Key": 1}, "details"),
        ({f"k{i}": i for i in range(9)}, "details"),
    ]:
        with pytest.raises(InvalidSpecError, match=rf"^{field}"):
            store.region_writes.update_region_status("chat", EAST, "running", details=details, **fences)  # type: ignore[arg-type]
    assert scan(store) == before
    written = store.region_writes.update_region_status(
        "chat",
        EAST,
        "error",
        error="line one\nline two\x00" + "x" * 5000,
        **fences,  # type: ignore[arg-type]
    )
    assert written is not None
    error = written.region_status[EAST].error or ""
    assert error.startswith("line one line two ") and len(error) == 1024


def test_updated_at_moves_forward_when_a_host_clock_is_behind(store: EndpointStore) -> None:
    behind = EndpointStore(
        store.client,
        store.table_name,
        clock=MonotonicClock(lambda: datetime.now(UTC) - timedelta(hours=1)),
    )
    record = store.create("chat", SPEC, [EAST])
    stamps = [record.updated_at or ""]
    lid, token = record.lifecycle_id or "", record.region_generations[EAST]
    for writer in (behind, store, behind, behind, store):
        written = writer.region_writes.update_region_status(
            "chat", EAST, "running", expected_lifecycle_id=lid, expected_region_generation=token
        )
        assert written is not None
        stamps.append(written.updated_at or "")
    stopped = behind.update_desired_state("chat", "stopped", expected_lifecycle_id=lid)
    assert stopped is not None
    stamps.append(stopped.updated_at or "")
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps), stamps


def normalised(attribute: dict[str, Any]) -> dict[str, Any]:
    """An attribute as the real service returns it: numbers with leading and trailing zeros
    trimmed (2.0 -> 2, 1.50 -> 1.5, 1e+20 -> 100000000000000000000)."""
    if "N" in attribute:
        text = format(Decimal(attribute["N"]).normalize(), "f")
        return {"N": "0" if text in ("-0", "0") else text}
    if "M" in attribute:
        return {"M": {key: normalised(value) for key, value in attribute["M"].items()}}
    if "L" in attribute:
        return {"L": [normalised(value) for value in attribute["L"]]}
    return attribute


def test_numbers_keep_their_type_through_the_services_normalisation(store: EndpointStore) -> None:
    spec = {
        **SPEC,
        "autoscaling": {
            "enabled": True,
            "min_replicas": 1,
            "max_replicas": 4,
            "metrics": [{"type": "cpu", "target": 2.0}, {"type": "queue_depth", "target": 1e20}],
        },
    }
    store.create("chat", spec, [EAST])
    key = {"endpoint_name": {"S": "chat"}}
    item = store.client.get_item(TableName=store.table_name, Key=key)["Item"]
    assert item["spec"]["M"]["autoscaling"]["M"]["metrics"]["L"][0]["M"]["target"] == {"N": "2.0"}
    store.client.put_item(TableName=store.table_name, Item={k: normalised(v) for k, v in item.items()})
    raw = store.client.get_item(TableName=store.table_name, Key=key)["Item"]
    assert raw["spec"]["M"]["autoscaling"]["M"]["metrics"]["L"][0]["M"]["target"] == {"N": "2"}
    record = store.get("chat")
    assert record is not None
    targets = [metric.target for metric in record.spec.autoscaling.metrics]
    assert targets == [2.0, 1e20] and all(type(target) is float for target in targets)
    assert type(record.spec.replicas) is int and record.spec.replicas == 2
    assert record.to_json()["spec"]["autoscaling"]["metrics"][0]["target"] == 2.0


def test_an_item_too_large_for_dynamodb_is_refused_before_the_write(store: EndpointStore) -> None:
    env = {f"VAR_{index}": "x" * 4000 for index in range(80)}  # 320 KB: valid field by field
    with pytest.raises(InvalidSpecError, match=r"^spec\.env: the spec would take \d+ bytes"):
        store.create("chat", {**SPEC, "env": env}, [EAST])
    assert scan(store) == []
    record = store.create("chat", SPEC, [EAST])
    before = scan(store)
    with pytest.raises(InvalidSpecError, match=r"^spec\.env"):
        store.update_spec("chat", {**SPEC, "env": env}, record.lifecycle_id or "")
    assert scan(store) == before
    assert is_token(record.lifecycle_id)


def test_two_hosts_reading_the_same_microsecond_still_move_updated_at(store: EndpointStore) -> None:
    frozen = datetime(2030, 1, 1, tzinfo=UTC)
    first, second = (
        EndpointStore(store.client, store.table_name, clock=MonotonicClock(lambda: frozen)) for _ in range(2)
    )
    record = first.create("chat", SPEC, [EAST])
    fences = {
        "expected_lifecycle_id": record.lifecycle_id,
        "expected_region_generation": record.region_generations[EAST],
    }
    # The second host's first reading equals the stored stamp: it must still move past it.
    b = second.region_writes.update_region_status("chat", EAST, "running", **fences)  # type: ignore[arg-type]
    a = first.region_writes.update_region_status("chat", EAST, "running", **fences)  # type: ignore[arg-type]
    assert a is not None and b is not None
    assert (record.updated_at or "") < (b.updated_at or "") < (a.updated_at or "")


def legacy_item(store: EndpointStore, **fields: Any) -> EndpointRecord:
    item = {"endpoint_name": "old", "desired_state": "running", "target_regions": [EAST], "spec": SPEC}
    store.client.put_item(TableName=store.table_name, Item=to_item({**item, **fields}))
    record = store.get("old")
    assert record is not None and record.is_legacy
    return record


def test_a_backfill_never_replaces_a_lifecycle_set_meanwhile(store: EndpointStore) -> None:
    snapshot = legacy_item(store, updated_at="2025-01-01T00:00:00.000000Z")
    # Another tool set a lifecycle id and left updated_at as it was.
    store.client.update_item(
        TableName=store.table_name,
        Key={"endpoint_name": {"S": "old"}},
        UpdateExpression="SET lifecycle_id = :l",
        ExpressionAttributeValues={":l": {"S": "e" * 64}},
    )
    assert store.ensure_lifecycle_metadata(snapshot) is None
    assert store.get("old").lifecycle_id == "e" * 64  # type: ignore[union-attr]


def test_a_backfill_of_an_unstamped_record_loses_to_a_later_stamp(store: EndpointStore) -> None:
    snapshot = legacy_item(store)
    assert snapshot.updated_at is None
    store.client.update_item(
        TableName=store.table_name,
        Key={"endpoint_name": {"S": "old"}},
        UpdateExpression="SET updated_at = :u, target_regions = :t",
        ExpressionAttributeValues={
            ":u": {"S": "2025-01-01T00:00:00.000000Z"},
            ":t": {"L": [{"S": EAST}, {"S": WEST}]},
        },
    )
    assert store.ensure_lifecycle_metadata(snapshot) is None
    fresh = store.get("old")
    assert fresh is not None and fresh.is_legacy
    filled = store.ensure_lifecycle_metadata(fresh)
    assert filled is not None and WEST in filled.cleanup_regions


def test_a_running_endpoint_scales(store: EndpointStore) -> None:
    record = store.create("chat", SPEC, [EAST])
    lid = record.lifecycle_id or ""
    assert store.update_desired_state("chat", "running", expected_lifecycle_id=lid) is not None
    scaled = store.scale("chat", 5, lid)
    assert scaled is not None and scaled.spec.replicas == 5 and scaled.desired_state == "running"


def test_a_purge_pinned_to_the_current_snapshot_lands(store: EndpointStore) -> None:
    store.create("chat", SPEC, [EAST])
    deleted = store.update_desired_state("chat", "deleted")
    assert deleted is not None
    generation = deleted.deletion_generation or ""
    acked = store.region_writes.update_region_status(
        "chat", EAST, "deleted", expected_deletion_generation=generation
    )
    assert acked is not None
    assert not store.region_writes.purge(
        "chat", expected_deletion_generation=generation, expected_updated_at=deleted.updated_at
    )
    assert store.region_writes.purge(
        "chat", expected_deletion_generation=generation, expected_updated_at=acked.updated_at
    )
    assert store.get("chat") is None


def test_a_plain_delete_of_a_legacy_record_is_refused_until_it_is_backfilled(store: EndpointStore) -> None:
    legacy = legacy_item(store, updated_at="2025-01-01T00:00:00.000000Z")
    before = scan(store)
    with pytest.raises(InvalidTransitionError, match="back-fill it first"):
        store.update_desired_state("old", "deleted")
    assert scan(store) == before
    filled = store.ensure_lifecycle_metadata(legacy)
    assert filled is not None
    deleted = store.update_desired_state("old", "deleted")
    assert deleted is not None and deleted.deletion_regions == [EAST]


def test_a_token_of_a_region_that_is_no_member_lets_no_status_in(store: EndpointStore) -> None:
    """An older gco left a token for a Region outside every list; the back-fill keeps tokens."""
    stray = "d" * 64
    legacy = legacy_item(
        store, updated_at="2025-01-01T00:00:00.000000Z", region_generations={"ap-south-1": stray}
    )
    filled = store.ensure_lifecycle_metadata(legacy)
    assert filled is not None and "ap-south-1" not in filled.cleanup_regions
    assert filled.region_generations["ap-south-1"] == stray
    before = scan(store)
    written = store.region_writes.update_region_status(
        "old",
        "ap-south-1",
        "running",
        expected_lifecycle_id=filled.lifecycle_id,
        expected_region_generation=stray,
    )
    assert written is None and scan(store) == before
