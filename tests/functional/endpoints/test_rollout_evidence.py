"""The record names its last rollout's evidence: a write fenced by the lifecycle, against moto."""

from __future__ import annotations

import pytest

from gco.endpoints import EndpointStore, operations
from gco.endpoints.errors import InvalidSpecError, InvalidTransitionError
from tests.unit.reconcile.records import EAST, IMAGE

EVIDENCE = "e" * 64


def test_the_rollout_evidence_is_written_on_its_lifecycle_only(store: EndpointStore) -> None:
    created = store.create("smol", {"image": IMAGE}, [EAST])
    lifecycle = created.lifecycle_id or ""
    written = store.set_rollout_evidence("smol", EVIDENCE, lifecycle)
    assert written is not None and written.rollout_evidence == EVIDENCE
    assert operations.fresh(store, "smol").rollout_evidence == EVIDENCE
    assert written.spec == created.spec and written.desired_state == created.desired_state
    # another lifecycle's rollout writes nothing
    assert store.set_rollout_evidence("smol", "f" * 64, "0" * 64) is None
    assert operations.fresh(store, "smol").rollout_evidence == EVIDENCE


def test_a_deleted_record_or_a_bad_id_is_refused(store: EndpointStore) -> None:
    lifecycle = store.create("smol", {"image": IMAGE}, [EAST]).lifecycle_id or ""
    for bad in ("E" * 64, "e" * 63, "../x"):
        with pytest.raises(InvalidSpecError, match="rollout_evidence"):
            store.set_rollout_evidence("smol", bad, lifecycle)
    operations.delete(store, "smol")
    with pytest.raises(InvalidTransitionError, match="deleted"):
        store.set_rollout_evidence("smol", EVIDENCE, lifecycle)
