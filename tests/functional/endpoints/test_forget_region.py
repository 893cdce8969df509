"""Finishing a deleted record whose Region no reconciler serves: `forget_region` acknowledges for
that Region only after a stated silence, loses to a reconciler that writes meanwhile, records who
forgot it, and purges with the last acknowledgement; `delete --wait` names it as the way out."""

from __future__ import annotations

from datetime import timedelta

import pytest

from gco.cli import main
from gco.endpoints import EndpointStore
from gco.endpoints.errors import InvalidSpecError, InvalidTransitionError
from gco.endpoints.forget import forget_region
from gco.endpoints.record import EndpointRecord
from gco.endpoints.tokens import format_timestamp, parse_timestamp
from gco.local.moto.motoserver import MotoServer
from tests.conftest import TABLE

SPEC = {"image": "vllm/vllm-openai:v0.6.3"}
EAST, WEST, GONE = "us-east-1", "us-west-2", "eu-west-1"


def deleted(store: EndpointStore, regions: tuple[str, ...] = (EAST, GONE)) -> EndpointRecord:
    store.create("chat", SPEC, list(regions))
    record = store.update_desired_state("chat", "deleted")
    assert record is not None and record.deleted_at is not None
    return record


def acknowledge(store: EndpointStore, region: str, record: EndpointRecord) -> EndpointRecord | None:
    return store.region_writes.update_region_status(
        "chat", region, "deleted", expected_deletion_generation=record.deletion_generation
    )


def test_a_silent_region_is_forgotten_after_the_silence_and_the_record_purged(store: EndpointStore) -> None:
    record = deleted(store)
    acknowledge(store, EAST, record)
    assert record.deleted_at is not None
    soon = parse_timestamp(record.deleted_at) + timedelta(seconds=100)
    with pytest.raises(InvalidTransitionError) as caught:
        forget_region(store, "chat", GONE, silent_for=900, by="ops", now=soon)
    # The truth of what it saw: GONE never wrote (no "its reconciler wrote 100 s ago").
    assert (
        f"it was deleted 100 s ago (at {record.deleted_at}) and {GONE} has not acknowledged; "
        "its reconciler never wrote for it; it may still acknowledge"
    ) in str(caught.value)
    later = parse_timestamp(record.deleted_at) + timedelta(seconds=1000)
    done = forget_region(store, "chat", GONE, silent_for=900, by="ops", now=later)
    assert done.purged and done.record is None and store.get("chat") is None


def test_the_forget_is_recorded_in_the_region_status(store: EndpointStore) -> None:
    record = deleted(store, (EAST, WEST, GONE))
    assert record.deleted_at is not None
    later = parse_timestamp(record.deleted_at) + timedelta(seconds=1000)
    done = forget_region(store, "chat", GONE, silent_for=900, by="ops", now=later)
    assert not done.purged and done.record is not None
    status = done.record.region_status[GONE]
    assert status.deletion_generation == record.deletion_generation and status.state == "deleted"
    assert (status.model_extra or {}) == {
        "forgotten_by": "ops",
        "forgotten_at": format_timestamp(later),
        "forgotten_after_s": 1000,
    }
    assert done.record.pending_deletion_regions() == [EAST, WEST]
    # forgetting again is nothing to do
    assert forget_region(store, "chat", GONE, silent_for=900, by="ops", now=later).silent_for_s == 0.0


def test_a_reconciler_that_writes_meanwhile_wins(store: EndpointStore) -> None:
    record = deleted(store)
    assert record.deletion_generation is not None
    acknowledge(store, GONE, record)  # the Region's reconciler acknowledged after the operator's read
    lost = store.region_writes.forget_region(
        "chat",
        GONE,
        expected_deletion_generation=record.deletion_generation,
        expected_last_sync=None,
        details={"forgotten_by": "ops"},
    )
    assert lost is None
    current = store.get("chat")
    assert current is not None and "forgotten_by" not in (current.region_status[GONE].model_extra or {})


def test_only_a_deleted_record_and_one_of_its_deletion_regions(store: EndpointStore) -> None:
    store.create("chat", SPEC, [EAST])
    with pytest.raises(InvalidTransitionError, match="delete it first"):
        forget_region(store, "chat", EAST, by="ops")
    store.update_desired_state("chat", "deleted")
    with pytest.raises(InvalidSpecError, match=f"--region: {WEST} is not a deletion Region of chat"):
        forget_region(store, "chat", WEST, by="ops")
    with pytest.raises(InvalidSpecError, match="--silent-for"):
        forget_region(store, "chat", EAST, silent_for=10, by="ops")


def age_deletion(store: EndpointStore, seconds: float) -> None:
    """Move the record's deleted_at back, as if the delete was `seconds` ago."""
    record = store.get("chat")
    assert record is not None and record.deleted_at is not None
    earlier = format_timestamp(parse_timestamp(record.deleted_at) - timedelta(seconds=seconds))
    store.client.update_item(
        TableName=store.table_name,
        Key={"endpoint_name": {"S": "chat"}},
        UpdateExpression="SET deleted_at = :t",
        ExpressionAttributeValues={":t": {"S": earlier}},
    )


def test_the_command(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> None:
    connection = ["--endpoint-url", moto.url, "--table", TABLE]
    deleted(store, (GONE,))
    assert main(["inference", "delete", "chat", "--wait", "--timeout", "0", *connection]) == 1
    err = capsys.readouterr().err
    assert f"awaiting the acknowledgement of {GONE}" in err.splitlines()[-1]
    # suggested for GONE because its reconciler is really not live (no heartbeat was ever written)
    assert (
        f"{GONE} (no live reconciler: no heartbeat was ever written: if its stack is gone, "
        f"gco inference forget-region chat --region {GONE} --yes)"
    ) in err.splitlines()[-1]

    assert main(["inference", "forget-region", "chat", "--region", GONE, *connection]) == 2
    assert capsys.readouterr().err.startswith("error: --yes: ")
    assert main(["inference", "forget-region", "chat", "--region", GONE, "--yes", *connection]) == 1
    assert "it may still acknowledge" in capsys.readouterr().err
    age_deletion(store, 1000)
    assert main(["inference", "forget-region", "chat", "--region", GONE, "--yes", *connection]) == 0
    assert "purged" in capsys.readouterr().out and store.get("chat") is None


def test_forget_region_tells_the_truth_about_what_it_saw(store: EndpointStore) -> None:
    """A Region whose reconciler last wrote before the delete is named with the delete and that
    earlier write, never as having "written N s ago"."""
    created = store.create("chat", SPEC, [EAST, GONE])
    written = store.region_writes.update_region_status(
        "chat",
        GONE,
        "running",
        expected_lifecycle_id=created.lifecycle_id,
        expected_region_generation=created.region_generations[GONE],
    )
    assert written is not None
    last = written.region_status[GONE].last_sync
    record = store.update_desired_state("chat", "deleted")
    assert record is not None and record.deleted_at is not None and last is not None
    soon = parse_timestamp(record.deleted_at) + timedelta(seconds=30)
    with pytest.raises(InvalidTransitionError) as caught:
        forget_region(store, "chat", GONE, silent_for=900, by="ops", now=soon)
    assert (
        f"it was deleted 30 s ago (at {record.deleted_at}) and {GONE} has not acknowledged; "
        f"its reconciler last wrote for it at {last}, before the delete"
    ) in str(caught.value)
