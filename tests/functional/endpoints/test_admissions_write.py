"""The record's admissions are written only with the spec or targets they admit, under their fences
(docs/fencing.md): a write that loses its race writes neither; the map round-trips through DynamoDB."""

from __future__ import annotations

from gco.endpoints import EndpointStore
from gco.endpoints.admissions import ImageAdmission
from gco.endpoints.spec import parse_spec

IMAGE = "vllm/vllm-openai:v1"


def entry(image: str, evidence: str | None = "e" * 64) -> ImageAdmission:
    return ImageAdmission(
        image=image,
        digest="sha256:" + "a" * 64,
        outcome="validated" if evidence else "allowed",
        policy="enforce",
        evidence_id=evidence,
        reason=None if evidence else "hotfix",
        by="ops",
        at="2026-12-03T00:00:00Z",
    )


def test_admissions_round_trip_and_a_stale_spec_write_writes_neither(store: EndpointStore) -> None:
    created = store.create(
        "chat", {"image": IMAGE}, ["us-east-1"], admissions={"us-east-1": {"primary": entry(IMAGE)}}
    )
    assert store.get("chat", consistent_read=True) == created
    assert created.admissions["us-east-1"]["primary"].evidence_id == "e" * 64
    moved = store.update_spec(
        "chat",
        parse_spec({"image": "other:2"}),
        expected_lifecycle_id=created.lifecycle_id or "",
        expected_updated_at=created.updated_at,
        admissions={"us-east-1": {"primary": entry("other:2", None)}},
    )
    assert moved is not None and moved.admissions["us-east-1"]["primary"].reason == "hotfix"
    stale = store.update_spec(
        "chat",
        parse_spec({"image": "third:3"}),
        expected_lifecycle_id=created.lifecycle_id or "",
        expected_updated_at=created.updated_at,  # planned from the first view: loses
        admissions={"us-east-1": {"primary": entry("third:3")}},
    )
    assert stale is None
    assert store.get("chat", consistent_read=True) == moved


def test_a_target_change_writes_its_admissions_in_the_same_update(store: EndpointStore) -> None:
    created = store.create("chat", {"image": IMAGE}, ["us-east-1"])
    assert created.admissions == {} and "admissions" not in created.to_json()
    both = {"us-east-1": {"primary": entry(IMAGE)}, "us-west-2": {"primary": entry(IMAGE)}}
    moved = store.update_target_regions(
        "chat",
        ["us-east-1", "us-west-2"],
        expected_lifecycle_id=created.lifecycle_id or "",
        expected_updated_at=created.updated_at or "",
        admissions=both,
    )
    assert moved is not None and set(moved.admissions) == {"us-east-1", "us-west-2"}
    stale = store.update_target_regions(
        "chat",
        ["us-east-1"],
        expected_lifecycle_id=created.lifecycle_id or "",
        expected_updated_at=created.updated_at or "",
        admissions={},
    )
    assert stale is None and store.get("chat", consistent_read=True) == moved
