"""Every store operation and condition against a real moto server over HTTP, races included."""

from __future__ import annotations

import threading
from typing import Any, TypedDict

import pytest

from gco.endpoints import (
    EndpointExistsError,
    EndpointNotFoundError,
    EndpointStore,
    InvalidSpecError,
    InvalidTransitionError,
    canary,
    operations,
)
from gco.endpoints.codec import from_item, to_item
from gco.endpoints.record import EndpointRecord
from gco.endpoints.tokens import is_token

SPEC = {"image": "vllm/vllm-openai:v0.6.3", "model_id": "m", "replicas": 2}
OTHER = "f" * 64


class StatusFences(TypedDict):
    """The fences of an ordinary status write, passed as keywords."""

    expected_lifecycle_id: str | None
    expected_region_generation: str | None


def create(
    store: EndpointStore, name: str = "chat", regions: tuple[str, ...] = ("us-east-1", "us-west-2")
) -> EndpointRecord:
    return store.create(name, SPEC, list(regions), labels={"gco.dev/owner": "run-1"}, created_by="tester")


def raw(store: EndpointStore, name: str) -> dict[str, Any] | None:
    item = store.client.get_item(
        TableName=store.table_name, Key={"endpoint_name": {"S": name}}, ConsistentRead=True
    )
    return from_item(item["Item"]) if "Item" in item else None


def ack_all(store: EndpointStore, record: EndpointRecord) -> None:
    for region in record.deletion_regions or []:
        assert store.region_writes.update_region_status(
            record.endpoint_name, region, "deleted", expected_deletion_generation=record.deletion_generation
        )


# -- create / get / list ---------------------------------------------------------------------------


def test_create_starts_a_lifecycle_with_a_token_per_region(store: EndpointStore) -> None:
    record = store.create("chat", SPEC, ["us-east-1", "us-west-2", "us-east-1"], created_by="me")
    assert record.desired_state == "deploying"
    assert record.target_regions == ["us-east-1", "us-west-2"]
    assert record.cleanup_regions == ["us-east-1", "us-west-2"]
    assert is_token(record.lifecycle_id)
    assert set(record.region_generations) == {"us-east-1", "us-west-2"}
    assert all(is_token(token) for token in record.region_generations.values())
    assert len({record.lifecycle_id, *record.region_generations.values()}) == 3
    assert record.ingress_path == "/inference/chat"
    assert record.namespace == "gco-inference"
    assert record.created_at == record.updated_at
    assert record.created_at and record.created_at.endswith("Z")
    assert store.get("chat") == record


def test_create_refuses_a_taken_name_even_while_deleted(store: EndpointStore) -> None:
    first = create(store)
    with pytest.raises(EndpointExistsError):
        create(store)
    store.update_desired_state("chat", "deleted")
    with pytest.raises(EndpointExistsError, match="deleted"):
        create(store)
    assert store.get("chat").lifecycle_id == first.lifecycle_id  # type: ignore[union-attr]


def test_create_with_bad_input_writes_nothing(store: EndpointStore) -> None:
    with pytest.raises(InvalidSpecError, match=r"^spec.port"):
        store.create("chat", {**SPEC, "port": 0}, ["us-east-1"])
    with pytest.raises(InvalidSpecError, match=r"target_regions\[1\]"):
        store.create("chat", SPEC, ["us-east-1", "mars-1"])
    with pytest.raises(InvalidSpecError, match="labels"):
        store.create("chat", SPEC, ["us-east-1"], labels={"bad key!": "x"})
    assert store.list(consistent_read=True) == []


def test_get_missing_is_none(store: EndpointStore) -> None:
    assert store.get("nothing") is None


def test_list_pages_through_everything_newest_first_with_filters(store: EndpointStore) -> None:
    # Items of ~40 KB make moto's 1 MB scan page cut the 60 records into several pages.
    padding = {f"PADDING_{index}": "x" * 4000 for index in range(10)}
    for index in range(60):
        store.create(
            f"ep{index:02d}", {**SPEC, "env": padding}, ["us-east-1"] if index % 2 else ["eu-west-1"]
        )
    first_page = store.client.scan(TableName=store.table_name)
    assert "LastEvaluatedKey" in first_page  # the table really has more than one page
    records = store.list()
    assert [record.endpoint_name for record in records] == [f"ep{index:02d}" for index in reversed(range(60))]
    assert len(store.list(target_region="eu-west-1")) == 30
    store.update_desired_state("ep03", "stopped", expected_lifecycle_id=store.get("ep03").lifecycle_id)  # type: ignore[union-attr]
    assert [record.endpoint_name for record in store.list(desired_state="stopped")] == ["ep03"]
    with pytest.raises(InvalidSpecError, match="desired_state"):
        store.list(desired_state="sleeping")
    with pytest.raises(InvalidSpecError, match="target_region"):
        store.list(target_region="moon")


def test_floats_survive_the_round_trip(store: EndpointStore) -> None:
    spec = {
        **SPEC,
        "autoscaling": {
            "enabled": True,
            "min_replicas": 1,
            "max_replicas": 4,
            "metrics": [{"type": "queue_depth", "target": 0.1 + 0.2}],
        },
    }
    store.create("chat", spec, ["us-east-1"])
    stored = store.get("chat")
    assert stored is not None
    assert stored.spec.autoscaling.metrics[0].target == 0.1 + 0.2
    assert raw(store, "chat")["spec"]["autoscaling"]["metrics"][0]["target"] == 0.30000000000000004  # type: ignore[index]


# -- desired state ---------------------------------------------------------------------------------


def test_non_delete_moves_need_the_lifecycle_id(store: EndpointStore) -> None:
    record = create(store)
    with pytest.raises(InvalidSpecError, match="expected_lifecycle_id"):
        store.update_desired_state("chat", "stopped")
    with pytest.raises(InvalidSpecError, match="desired_state"):
        store.update_desired_state("chat", "paused", expected_lifecycle_id=record.lifecycle_id)
    assert store.update_desired_state("chat", "stopped", expected_lifecycle_id=OTHER) is None
    assert store.get("chat") == record
    stopped = store.update_desired_state("chat", "stopped", expected_lifecycle_id=record.lifecycle_id)
    assert stopped is not None and stopped.desired_state == "stopped"
    assert stopped.updated_at > record.updated_at  # type: ignore[operator]


def test_expected_desired_state_and_label_fence_the_move(store: EndpointStore) -> None:
    record = create(store)
    lid = record.lifecycle_id
    assert (
        store.update_desired_state(
            "chat", "running", expected_lifecycle_id=lid, expected_desired_state="stopped"
        )
        is None
    )
    assert store.update_desired_state("chat", "deleted", expected_label=("gco.dev/owner", "run-2")) is None
    assert store.get("chat") == record
    moved = store.update_desired_state(
        "chat",
        "running",
        expected_lifecycle_id=lid,
        expected_desired_state="deploying",
        expected_label=("gco.dev/owner", "run-1"),
    )
    assert moved is not None and moved.desired_state == "running"


def test_first_delete_fixes_generation_and_snapshots_cleanup(store: EndpointStore) -> None:
    record = create(store)
    store.update_target_regions(
        "chat",
        ["us-east-1"],
        expected_lifecycle_id=record.lifecycle_id or "",
        expected_updated_at=record.updated_at or "",
    )
    deleted = store.update_desired_state("chat", "deleted")
    assert deleted is not None and deleted.is_deleted
    assert is_token(deleted.deletion_generation)
    assert deleted.deletion_regions == ["us-east-1", "us-west-2"]
    again = store.update_desired_state("chat", "deleted", expected_lifecycle_id=record.lifecycle_id)
    assert again is not None
    assert again.deletion_generation == deleted.deletion_generation
    assert again.deletion_regions == deleted.deletion_regions
    assert again.updated_at == deleted.updated_at  # idempotent: no write at all
    assert store.update_desired_state("chat", "deleted", expected_lifecycle_id=OTHER) is None


def test_a_deleted_lifecycle_never_comes_back(store: EndpointStore) -> None:
    record = create(store)
    store.update_desired_state("chat", "deleted")
    for state in ("deploying", "running", "stopped"):
        with pytest.raises(InvalidTransitionError, match="desired_state is deleted"):
            store.update_desired_state("chat", state, expected_lifecycle_id=record.lifecycle_id)
    with pytest.raises(InvalidTransitionError, match="redeploy"):
        store.start("chat", record.lifecycle_id or "")
    with pytest.raises(InvalidTransitionError, match="deleted"):
        store.update_spec("chat", SPEC, expected_lifecycle_id=record.lifecycle_id)  # type: ignore[arg-type]
    with pytest.raises(InvalidTransitionError, match="deleted"):
        store.scale("chat", 3, expected_lifecycle_id=record.lifecycle_id)  # type: ignore[arg-type]
    assert store.get("chat").is_deleted  # type: ignore[union-attr]


def test_missing_records_raise_not_found(store: EndpointStore) -> None:
    with pytest.raises(EndpointNotFoundError):
        store.update_desired_state("ghost", "deleted")
    with pytest.raises(EndpointNotFoundError):
        store.start("ghost", OTHER)
    with pytest.raises(EndpointNotFoundError):
        store.scale("ghost", 1, expected_lifecycle_id=OTHER)
    with pytest.raises(EndpointNotFoundError):
        store.update_spec("ghost", SPEC, expected_lifecycle_id=OTHER)
    assert (
        store.region_writes.update_region_status(
            "ghost", "us-east-1", "running", expected_lifecycle_id=OTHER, expected_region_generation=OTHER
        )
        is None
    )
    assert store.region_writes.purge("ghost", expected_deletion_generation=OTHER) is True


# -- start / spec / scale --------------------------------------------------------------------------


def test_start_only_from_stopped(store: EndpointStore) -> None:
    record = create(store)
    with pytest.raises(InvalidTransitionError, match="desired_state is deploying"):
        store.start("chat", record.lifecycle_id or "")
    with pytest.raises(InvalidSpecError, match="expected_lifecycle_id"):
        store.start("chat", None)  # type: ignore[arg-type]
    store.update_desired_state("chat", "stopped", expected_lifecycle_id=record.lifecycle_id)
    assert store.start("chat", expected_lifecycle_id=OTHER) is None
    started = store.start("chat", expected_lifecycle_id=record.lifecycle_id or "")
    assert started is not None and started.desired_state == "running"


def test_update_spec_sets_deploying_and_respects_updated_at(store: EndpointStore) -> None:
    record = create(store)
    lid = record.lifecycle_id or ""
    store.update_desired_state("chat", "running", expected_lifecycle_id=lid)
    newer = {**SPEC, "image": "vllm/vllm-openai:v0.7.0"}
    assert (
        store.update_spec("chat", newer, expected_lifecycle_id=lid, expected_updated_at=record.updated_at)
        is None
    )
    current = store.get("chat")
    assert current is not None
    updated = store.update_spec(
        "chat", newer, expected_lifecycle_id=lid, expected_updated_at=current.updated_at
    )
    assert updated is not None
    assert updated.spec.image == "vllm/vllm-openai:v0.7.0" and updated.desired_state == "deploying"
    assert store.update_spec("chat", newer, expected_lifecycle_id=OTHER) is None
    with pytest.raises(InvalidSpecError, match=r"spec\.replicas"):
        store.update_spec("chat", {**SPEC, "replicas": True}, expected_lifecycle_id=lid)


def test_a_stopped_endpoint_stays_stopped_through_spec_and_canary_changes(store: EndpointStore) -> None:
    lid = create(store).lifecycle_id or ""
    store.update_desired_state("chat", "stopped", expected_lifecycle_id=lid)
    newer = {**SPEC, "image": "vllm/vllm-openai:v0.7.0"}
    updated = store.update_spec("chat", newer, expected_lifecycle_id=lid)  # reads the state itself
    assert updated is not None and updated.desired_state == "stopped" and updated.spec.image == newer["image"]
    assert operations.update_spec(store, "chat", {"replicas": 3}).desired_state == "stopped"
    with_canary = canary.set_canary(store, "chat", "vllm/vllm-openai:v0.8.0", 50)
    assert with_canary.desired_state == "stopped" and with_canary.spec.canary is not None
    assert canary.rollback(store, "chat").desired_state == "stopped"
    # A change planned for a live endpoint does not land on a stopped one (`spec.not_stopped`) ...
    assert store.update_spec("chat", SPEC, expected_lifecycle_id=lid, stopped=False) is None
    started = operations.start(store, "chat")
    assert started.desired_state == "running" and started.spec.replicas == 3
    # ... nor one planned while it was stopped on one that has started since (`spec.stopped`).
    assert store.update_spec("chat", SPEC, expected_lifecycle_id=lid, stopped=True) is None
    assert operations.update_spec(store, "chat", {"replicas": 1}).desired_state == "deploying"


def test_scale_only_live_plain_endpoints(store: EndpointStore) -> None:
    record = create(store)
    lid = record.lifecycle_id or ""
    scaled = store.scale("chat", 5, expected_lifecycle_id=lid)
    assert scaled is not None and scaled.spec.replicas == 5
    assert store.scale("chat", 6, expected_lifecycle_id=OTHER) is None
    for bad in (True, -1, 1001, "3"):
        with pytest.raises(InvalidSpecError, match="replicas"):
            store.scale("chat", bad, expected_lifecycle_id=lid)  # type: ignore[arg-type]
    store.update_desired_state("chat", "stopped", expected_lifecycle_id=lid)
    with pytest.raises(InvalidTransitionError, match="desired_state is stopped"):
        store.scale("chat", 1, expected_lifecycle_id=lid)

    auto = {
        **SPEC,
        "autoscaling": {"enabled": True, "max_replicas": 3, "metrics": [{"type": "cpu", "target": 70}]},
    }
    lid_auto = store.create("auto", auto, ["us-east-1"]).lifecycle_id or ""
    with pytest.raises(InvalidTransitionError, match="autoscaling"):
        store.scale("auto", 2, expected_lifecycle_id=lid_auto)
    mooncake = {**SPEC, "mooncake": {"mode": "disaggregated", "proxy_image": "mooncake/proxy:1"}}
    lid_moon = store.create("moon", mooncake, ["us-east-1"]).lifecycle_id or ""
    with pytest.raises(InvalidTransitionError, match="mooncake"):
        store.scale("moon", 2, expected_lifecycle_id=lid_moon)


# -- Regions ---------------------------------------------------------------------------------------


def test_region_removal_keeps_cleanup_and_readd_rotates_the_token(store: EndpointStore) -> None:
    record = create(store)
    lid = record.lifecycle_id or ""
    old_token = record.region_generations["us-west-2"]
    removed = store.update_target_regions(
        "chat", ["us-east-1"], expected_lifecycle_id=lid, expected_updated_at=record.updated_at or ""
    )
    assert removed is not None
    assert removed.target_regions == ["us-east-1"]
    assert removed.cleanup_regions == ["us-east-1", "us-west-2"]
    assert removed.region_generations["us-west-2"] == old_token  # the removal is acknowledged with it
    acked = store.region_writes.update_region_status(
        "chat", "us-west-2", "deleted", expected_lifecycle_id=lid, expected_region_generation=old_token
    )
    assert acked is not None and acked.region_status["us-west-2"].region_generation == old_token

    readded = store.update_target_regions(
        "chat",
        ["us-east-1", "us-west-2", "eu-west-1"],
        expected_lifecycle_id=lid,
        expected_updated_at=acked.updated_at or "",
    )
    assert readded is not None
    new_token = readded.region_generations["us-west-2"]
    assert is_token(new_token) and new_token != old_token
    assert readded.region_generations["us-east-1"] == record.region_generations["us-east-1"]
    assert readded.cleanup_regions == ["us-east-1", "us-west-2", "eu-west-1"]
    # The acknowledgement of the earlier membership cannot stand for the current one.
    assert (
        store.region_writes.update_region_status(
            "chat", "us-west-2", "deleted", expected_lifecycle_id=lid, expected_region_generation=old_token
        )
        is None
    )
    assert store.region_writes.update_region_status(
        "chat", "us-west-2", "running", expected_lifecycle_id=lid, expected_region_generation=new_token
    )


def test_region_change_is_fenced_by_snapshot(store: EndpointStore) -> None:
    record = create(store)
    lid = record.lifecycle_id or ""
    store.update_desired_state("chat", "running", expected_lifecycle_id=lid)
    assert (
        store.update_target_regions(
            "chat", ["eu-west-1"], expected_lifecycle_id=lid, expected_updated_at=record.updated_at or ""
        )
        is None
    )
    current = store.get("chat")
    assert current is not None
    assert (
        store.update_target_regions(
            "chat", ["eu-west-1"], expected_lifecycle_id=OTHER, expected_updated_at=current.updated_at or ""
        )
        is None
    )
    with pytest.raises(InvalidSpecError, match="target_regions"):
        store.update_target_regions(
            "chat", [], expected_lifecycle_id=lid, expected_updated_at=current.updated_at or ""
        )
    assert store.get("chat") == current
    store.update_desired_state("chat", "deleted")
    deleted = store.get("chat")
    assert deleted is not None
    with pytest.raises(InvalidTransitionError):
        store.update_target_regions(
            "chat", ["eu-west-1"], expected_lifecycle_id=lid, expected_updated_at=deleted.updated_at or ""
        )


def test_cleanup_regions_union_with_requested_history(store: EndpointStore) -> None:
    record = create(store, regions=("us-east-1",))
    changed = store.update_target_regions(
        "chat",
        ["us-west-2"],
        cleanup=["ap-south-1"],
        expected_lifecycle_id=record.lifecycle_id or "",
        expected_updated_at=record.updated_at or "",
    )
    assert changed is not None
    assert changed.cleanup_regions == ["us-east-1", "ap-south-1", "us-west-2"]


# -- region status, acknowledgement, purge --------------------------------------------------------


def test_ordinary_status_is_fenced_and_never_lands_on_a_deleted_record(store: EndpointStore) -> None:
    record = create(store)
    lid = record.lifecycle_id
    token = record.region_generations["us-east-1"]
    written = store.region_writes.update_region_status(
        "chat",
        "us-east-1",
        "running",
        replicas_ready=2,
        replicas_desired=2,
        details={"ratio_percent": 50, "reason": "ok", "rollout": True},
        expected_lifecycle_id=lid,
        expected_region_generation=token,
    )
    assert written is not None
    status = written.region_status["us-east-1"]
    assert (status.state, status.replicas_ready, status.lifecycle_id, status.region_generation) == (
        "running",
        2,
        lid,
        token,
    )
    assert status.model_extra == {"ratio_percent": 50, "reason": "ok", "rollout": True}
    fences = StatusFences(expected_lifecycle_id=lid, expected_region_generation=token)
    assert (
        store.region_writes.update_region_status(
            "chat", "us-east-1", "running", expected_lifecycle_id=OTHER, expected_region_generation=token
        )
        is None
    )
    assert (
        store.region_writes.update_region_status(
            "chat", "us-east-1", "running", expected_lifecycle_id=lid, expected_region_generation=OTHER
        )
        is None
    )
    assert (
        store.region_writes.update_region_status("chat", "ap-south-1", "running", **fences) is None
    )  # never a member
    with pytest.raises(InvalidSpecError, match="state"):
        store.region_writes.update_region_status("chat", "us-east-1", "sleeping", **fences)
    with pytest.raises(InvalidSpecError, match="expected_region_generation"):
        store.region_writes.update_region_status(
            "chat", "us-east-1", "running", expected_lifecycle_id=lid, expected_region_generation="abc"
        )
    store.update_desired_state("chat", "deleted")
    before = raw(store, "chat")
    assert store.region_writes.update_region_status("chat", "us-east-1", "running", **fences) is None
    assert raw(store, "chat") == before


def test_deletion_acknowledgement_rules(store: EndpointStore) -> None:
    record = create(store)
    with pytest.raises(InvalidSpecError, match="state"):
        store.region_writes.update_region_status(
            "chat", "us-east-1", "running", expected_deletion_generation=OTHER
        )
    # Not deleted yet: an acknowledgement cannot land.
    assert (
        store.region_writes.update_region_status(
            "chat", "us-east-1", "deleted", expected_deletion_generation=OTHER
        )
        is None
    )
    deleted = store.update_desired_state("chat", "deleted")
    assert deleted is not None
    generation = deleted.deletion_generation
    assert (
        store.region_writes.update_region_status(
            "chat", "us-east-1", "deleted", expected_deletion_generation=OTHER
        )
        is None
    )
    assert (
        store.region_writes.update_region_status(
            "chat", "eu-west-1", "deleted", expected_deletion_generation=generation
        )
        is None
    )
    first = store.region_writes.update_region_status(
        "chat",
        "us-east-1",
        "deleted",
        expected_deletion_generation=generation,
        expected_lifecycle_id=record.lifecycle_id,
    )
    assert first is not None and first.pending_deletion_regions() == ["us-west-2"]
    # That Region already acknowledged this generation: a duplicate changes nothing.
    assert (
        store.region_writes.update_region_status(
            "chat", "us-east-1", "deleted", expected_deletion_generation=generation
        )
        is None
    )


def test_purge_only_after_every_acknowledgement(store: EndpointStore) -> None:
    record = create(store)
    assert store.region_writes.purge("chat", expected_deletion_generation=OTHER) is False  # not deleted
    deleted = store.update_desired_state("chat", "deleted")
    assert deleted is not None
    generation = deleted.deletion_generation or ""
    assert (
        store.region_writes.purge("chat", expected_deletion_generation=generation) is False
    )  # nobody acknowledged
    store.region_writes.update_region_status(
        "chat", "us-east-1", "deleted", expected_deletion_generation=generation
    )
    assert (
        store.region_writes.purge("chat", expected_deletion_generation=generation) is False
    )  # us-west-2 pending
    assert store.get("chat") is not None
    store.region_writes.update_region_status(
        "chat", "us-west-2", "deleted", expected_deletion_generation=deleted.deletion_generation
    )
    assert store.region_writes.purge("chat", expected_deletion_generation=OTHER) is False
    assert (
        store.region_writes.purge(
            "chat", expected_deletion_generation=generation, expected_lifecycle_id=OTHER
        )
        is False
    )
    assert (
        store.region_writes.purge(
            "chat", expected_deletion_generation=generation, expected_updated_at="2000-01-01T00:00:00.000000Z"
        )
        is False
    )
    assert (
        store.region_writes.purge(
            "chat",
            expected_lifecycle_id=record.lifecycle_id,
            expected_deletion_generation=generation,
        )
        is True
    )
    assert store.get("chat") is None
    assert store.region_writes.purge("chat", expected_deletion_generation=generation) is True  # already gone


def test_purge_loses_to_a_replacement_lifecycle(store: EndpointStore) -> None:
    first = create(store)
    deleted = store.update_desired_state("chat", "deleted")
    assert deleted is not None
    ack_all(store, deleted)
    assert store.region_writes.purge("chat", expected_deletion_generation=deleted.deletion_generation or "")
    second = create(store)
    assert second.lifecycle_id != first.lifecycle_id
    # Stale writers of the first lifecycle change nothing on the second.
    assert (
        store.region_writes.purge(
            "chat",
            expected_lifecycle_id=first.lifecycle_id,
            expected_deletion_generation=deleted.deletion_generation or "",
        )
        is False
    )
    assert store.update_desired_state("chat", "deleted", expected_lifecycle_id=first.lifecycle_id) is None
    assert (
        store.region_writes.update_region_status(
            "chat", "us-east-1", "deleted", expected_deletion_generation=deleted.deletion_generation
        )
        is None
    )
    assert (
        store.region_writes.update_region_status(
            "chat",
            "us-east-1",
            "running",
            expected_lifecycle_id=first.lifecycle_id,
            expected_region_generation=first.region_generations["us-east-1"],
        )
        is None
    )
    assert store.get("chat") == second


# -- races -----------------------------------------------------------------------------------------


def test_two_writers_with_the_same_snapshot_one_wins(store: EndpointStore) -> None:
    """Real threads race through the server many times; every time exactly one writer lands."""
    create(store)
    for attempt in range(20):
        found = store.get("chat")
        assert found is not None
        snapshot: EndpointRecord = found  # the narrowed type, for the writer's default argument below
        lid = snapshot.lifecycle_id or ""
        results: list[Any] = []
        barrier = threading.Barrier(4)

        def writer(
            image: str,
            snapshot: EndpointRecord = snapshot,
            lid: str = lid,
            results: list[Any] = results,
            barrier: threading.Barrier = barrier,
        ) -> None:
            barrier.wait()
            spec = {**SPEC, "image": image}
            results.append(store.update_spec("chat", spec, lid, expected_updated_at=snapshot.updated_at))

        threads = [
            threading.Thread(target=writer, args=(f"vllm/vllm-openai:v{attempt}-{n}",)) for n in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        winners = [result for result in results if result is not None]
        assert len(winners) == 1, f"attempt {attempt}: {len(winners)} writers landed"
        assert store.get("chat").spec.image == winners[0].spec.image  # type: ignore[union-attr]


def test_delete_during_update(store: EndpointStore) -> None:
    record = create(store)
    store.update_desired_state("chat", "deleted")  # lands between the updater's read and its write
    with pytest.raises(InvalidTransitionError, match="deleted"):
        store.update_spec(
            "chat",
            {**SPEC, "replicas": 9},
            expected_lifecycle_id=record.lifecycle_id or "",
            expected_updated_at=record.updated_at,
        )
    current = store.get("chat")
    assert current is not None and current.is_deleted and current.spec.replicas == 2


def test_region_change_racing_delete_cannot_shrink_cleanup(store: EndpointStore) -> None:
    record = create(store)
    deleted = store.update_desired_state("chat", "deleted")
    assert deleted is not None
    with pytest.raises(InvalidTransitionError):
        store.update_target_regions(
            "chat",
            ["us-east-1", "eu-west-1"],
            expected_lifecycle_id=record.lifecycle_id or "",
            expected_updated_at=record.updated_at or "",
        )
    assert store.get("chat").deletion_regions == ["us-east-1", "us-west-2"]  # type: ignore[union-attr]


# -- legacy records ---------------------------------------------------------------------------------


def put_legacy(store: EndpointStore, **fields: Any) -> EndpointRecord:
    item = {
        "endpoint_name": "old",
        "desired_state": "running",
        "target_regions": ["us-east-1"],
        "spec": {"image": "vllm/vllm-openai:v0.5.0"},
        "updated_at": "2025-01-01T00:00:00.000000Z",
        "region_status": {"eu-west-1": {"state": "running"}},
        **fields,
    }
    store.client.put_item(TableName=store.table_name, Item=to_item(item))
    record = store.get("old")
    assert record is not None and record.is_legacy
    return record


def test_backfill_keeps_tokens_and_unions_cleanup(store: EndpointStore) -> None:
    kept = "a" * 64
    legacy = put_legacy(store, region_generations={"us-east-1": kept}, cleanup_regions=["ap-south-1"])
    filled = store.ensure_lifecycle_metadata(legacy)
    assert filled is not None and not filled.is_legacy
    assert filled.cleanup_regions == ["ap-south-1", "us-east-1", "eu-west-1"]
    assert filled.region_generations["us-east-1"] == kept
    assert set(filled.region_generations) == {"ap-south-1", "us-east-1", "eu-west-1"}
    assert filled.ingress_path == "/inference/old"
    assert filled.updated_at > legacy.updated_at  # type: ignore[operator]
    assert store.ensure_lifecycle_metadata(filled) is filled  # nothing to do
    # A second back-fill from the same old snapshot loses: one lifecycle only.
    assert store.ensure_lifecycle_metadata(legacy) is None
    assert store.get("old") == filled


def test_backfill_racing_a_concurrent_update_loses_then_retries(store: EndpointStore) -> None:
    legacy = put_legacy(store)
    # An old-version writer adds a Region after our snapshot.
    store.client.update_item(
        TableName=store.table_name,
        Key={"endpoint_name": {"S": "old"}},
        UpdateExpression="SET target_regions = :t, updated_at = :u",
        ExpressionAttributeValues={
            ":t": {"L": [{"S": "us-east-1"}, {"S": "sa-east-1"}]},
            ":u": {"S": "2025-01-01T00:00:01.000000Z"},
        },
    )
    assert store.ensure_lifecycle_metadata(legacy) is None
    fresh = store.get("old")
    assert fresh is not None
    filled = store.ensure_lifecycle_metadata(fresh)
    assert filled is not None and "sa-east-1" in filled.cleanup_regions


def test_backfill_of_legacy_without_timestamps_or_status(store: EndpointStore) -> None:
    store.client.put_item(
        TableName=store.table_name,
        Item=to_item(
            {
                "endpoint_name": "bare",
                "desired_state": "deleted",
                "target_regions": ["us-east-1"],
                "spec": {"image": "tgi:2"},
            }
        ),
    )
    legacy = store.get("bare")
    assert legacy is not None and legacy.updated_at is None
    with pytest.raises(InvalidTransitionError, match="legacy"):
        store.update_desired_state("bare", "deleted")
    filled = store.ensure_lifecycle_metadata(legacy)
    assert filled is not None
    assert filled.region_status == {}
    assert filled.deletion_regions == ["us-east-1"] and is_token(filled.deletion_generation)
    ack_all(store, filled)
    assert store.region_writes.purge("bare", expected_deletion_generation=filled.deletion_generation or "")
