"""Residency through the fenced store: a resident Region outside the targets is refused at each write
that sets the spec or the targets (exit 2 from the CLI's point of view), nothing written."""

from __future__ import annotations

from typing import Any

import pytest

from gco.endpoints import EndpointStore, InvalidSpecError, operations

SPEC: dict[str, Any] = {"image": "vllm/vllm-openai:v0.6.3"}
RESIDENT: dict[str, Any] = {**SPEC, "residency": {"enabled": True, "regions": ["eu-west-1"]}}


def test_create_refuses_a_resident_region_outside_the_targets(store: EndpointStore) -> None:
    with pytest.raises(InvalidSpecError) as caught:
        store.create("smol", RESIDENT, ["us-east-1"])
    assert caught.value.field == "spec.residency.regions" and caught.value.exit_code == 2
    assert store.get("smol") is None
    record = store.create("smol", RESIDENT, ["us-east-1", "eu-west-1"])
    assert record.spec.residency is not None and record.spec.residency.regions == ["eu-west-1"]


def test_removing_the_resident_region_from_the_targets_is_refused(store: EndpointStore) -> None:
    before = store.create("smol", RESIDENT, ["us-east-1", "eu-west-1"])
    with pytest.raises(InvalidSpecError):
        operations.change_regions(store, "smol", remove=["eu-west-1"])
    after = store.get("smol")
    assert after is not None and after.target_regions == before.target_regions
    assert after.updated_at == before.updated_at


def test_an_update_naming_a_region_outside_the_targets_is_refused(store: EndpointStore) -> None:
    before = store.create("smol", SPEC, ["us-east-1"])
    with pytest.raises(InvalidSpecError):
        operations.update_spec(store, "smol", {"residency": {"enabled": True, "regions": ["eu-west-1"]}})
    after = store.get("smol")
    assert after is not None and after.updated_at == before.updated_at and after.spec.residency is None
    updated = operations.update_spec(store, "smol", {"residency": {"enabled": True}})
    assert updated.spec.residency is not None and updated.spec.residency.enabled
