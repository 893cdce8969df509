"""The scheduled cleanup of matrix endpoints past their run's deadline, against the moto server's table."""

from __future__ import annotations

from typing import Any

from gco.endpoints import EndpointRecord, EndpointStore, operations
from gco.reconcile.expiry import DEADLINE_LABEL, OWNER_LABEL, destroy_expired, expired
from tests.unit.reconcile.records import EAST, IMAGE, WEST

NOW = 1_800_000_000


class StaleListing(EndpointStore):
    """The table as it was when listed (`records`), every write going to the real one: the cleanup's
    read and its delete with another writer in between."""

    def __init__(self, store: EndpointStore, records: list[EndpointRecord]) -> None:
        super().__init__(store.client, store.table_name)
        self.records = records

    def list(self, *args: Any, **kwargs: Any) -> list[EndpointRecord]:
        return list(self.records)


def _create(store: EndpointStore, name: str, labels: dict[str, str], region: str = EAST) -> None:
    store.create(name, {"image": IMAGE}, [region], labels=labels)


def test_only_live_matrix_records_of_the_region_past_their_deadline_are_deleted(store: EndpointStore) -> None:
    _create(store, "mx-old", {OWNER_LABEL: "run1", DEADLINE_LABEL: str(NOW - 1)})
    _create(store, "mx-due", {OWNER_LABEL: "run1", DEADLINE_LABEL: str(NOW)})
    _create(store, "mx-later", {OWNER_LABEL: "run2", DEADLINE_LABEL: str(NOW + 1)})
    _create(store, "mx-west", {OWNER_LABEL: "run1", DEADLINE_LABEL: str(NOW - 1)}, region=WEST)
    _create(store, "no-owner", {DEADLINE_LABEL: str(NOW - 1)})  # not a matrix record
    _create(store, "no-deadline", {OWNER_LABEL: "run3"})  # a run from before deadlines: left alone
    _create(store, "bad-deadline", {OWNER_LABEL: "run4", DEADLINE_LABEL: "soon"})

    report = destroy_expired(store, region=EAST, now=NOW)

    assert sorted(report.destroyed) == ["mx-due", "mx-old"] and report.failed == {}
    states = {r.endpoint_name: r.desired_state for r in store.list(consistent_read=True)}
    assert states == {
        "mx-old": "deleted",
        "mx-due": "deleted",
        "mx-later": "deploying",
        "mx-west": "deploying",  # its own Region's sweep deletes it
        "no-owner": "deploying",
        "no-deadline": "deploying",
        "bad-deadline": "deploying",
    }
    # Deleted records are not deleted again (their deletion generation stays).
    generation = {r.endpoint_name: r.deletion_generation for r in store.list(consistent_read=True)}
    assert destroy_expired(store, region=EAST, now=NOW).destroyed == []
    assert {r.endpoint_name: r.deletion_generation for r in store.list(consistent_read=True)} == generation


def test_a_record_that_changed_after_the_read_is_not_touched(store: EndpointStore) -> None:
    _create(store, "mx-old", {OWNER_LABEL: "run1", DEADLINE_LABEL: str(NOW - 1)})
    stale = expired(store.list(consistent_read=True), NOW)
    # Meanwhile the record is deleted, purged, and the name reused by another run.
    operations.delete(store, "mx-old")
    record = store.get("mx-old", consistent_read=True)
    assert record is not None and record.deletion_generation is not None
    generation = record.deletion_generation
    assert store.region_writes.update_region_status(
        "mx-old", EAST, "deleted", expected_deletion_generation=generation
    )
    assert store.region_writes.purge("mx-old", expected_deletion_generation=record.deletion_generation)
    _create(store, "mx-old", {OWNER_LABEL: "run9", DEADLINE_LABEL: str(NOW + 600)})
    assert [r.endpoint_name for r in stale] == ["mx-old"]
    report = destroy_expired(StaleListing(store, stale), region=EAST, now=NOW)
    assert report.destroyed == [] and list(report.failed) == ["mx-old"]
    fresh = store.get("mx-old", consistent_read=True)
    assert fresh is not None and fresh.desired_state == "deploying" and fresh.labels[OWNER_LABEL] == "run9"
