"""`operations.create`, the way `gco inference deploy` writes a new endpoint: the spec and the Regions
checked before the admission hook is asked, the admissions written with the record, a taken name final."""

from __future__ import annotations

import pytest

from gco.endpoints import EndpointStore, operations
from gco.endpoints.admissions import Admissions, ImageAdmission
from gco.endpoints.errors import EndpointExistsError, InvalidSpecError
from gco.endpoints.namespaces import DEFAULT_NAMESPACE
from gco.endpoints.record import EndpointRecord
from gco.endpoints.spec import EndpointSpec

IMAGE = "vllm/vllm-openai:v1"
ADMITTED = ImageAdmission(
    image=IMAGE,
    digest="sha256:" + "a" * 64,
    outcome="validated",
    policy="enforce",
    evidence_id="e" * 64,
    by="ops",
    at="2026-12-03T00:00:00Z",
)


class RecordingHook:
    """An admission hook that admits every target Region's image and records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[EndpointRecord | None, EndpointSpec, list[str]]] = []

    def __call__(self, record: EndpointRecord | None, spec: EndpointSpec, targets: list[str]) -> Admissions:
        self.asked.append((record, spec, targets))
        return {region: {"primary": ADMITTED} for region in targets}


def test_create_writes_the_record_with_the_admissions_the_hook_gave(store: EndpointStore) -> None:
    hook = RecordingHook()
    created = operations.create(
        store,
        "chat",
        {"image": IMAGE},
        ["us-west-2", "us-east-1"],
        labels={"team": "a"},
        created_by="ops",
        admit=hook,
    )
    assert store.get("chat", consistent_read=True) == created
    assert created.desired_state == "deploying" and created.created_by == "ops"
    assert created.labels == {"team": "a"} and created.namespace == DEFAULT_NAMESPACE
    [(record, spec, targets)] = hook.asked
    assert record is None and spec.image == IMAGE and targets == created.target_regions
    assert {region: entry["primary"] for region, entry in created.admissions.items()} == {
        region: ADMITTED for region in targets
    }


def test_bad_input_is_refused_before_the_hook_is_asked_and_nothing_is_written(store: EndpointStore) -> None:
    hook = RecordingHook()
    with pytest.raises(InvalidSpecError) as raised:
        operations.create(store, "chat", {"image": IMAGE, "replicas": -1}, ["us-east-1"], admit=hook)
    assert "replicas" in raised.value.field
    with pytest.raises(InvalidSpecError):
        operations.create(store, "chat", {"image": IMAGE}, ["not a region"], admit=hook)
    with pytest.raises(InvalidSpecError):
        operations.create(store, "Bad_Name", {"image": IMAGE}, ["us-east-1"], admit=hook)
    assert hook.asked == []
    assert store.get("chat", consistent_read=True) is None


def test_a_taken_name_is_refused_and_the_first_record_stays(store: EndpointStore) -> None:
    first = operations.create(store, "chat", {"image": IMAGE}, ["us-east-1"])
    assert first.admissions == {}
    with pytest.raises(EndpointExistsError):
        operations.create(store, "chat", {"image": "other:2"}, ["us-east-1"])
    assert store.get("chat", consistent_read=True) == first
