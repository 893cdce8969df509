"""An object the endpoint renders but does not own is never applied over nor deleted: the conflict
is in the Region's status, and the endpoint converges once the name is free."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from gco.endpoints import EndpointStore, canary
from gco.local.standin import StandInKubeAPI
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.objects import (
    DEPLOYMENT,
    ENDPOINT_LABEL,
    KINDS,
    LIFECYCLE_ANNOTATION,
    MANAGED_BY,
    MANAGER,
)
from gco.reconcile.reconciler import Reconciler
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, IMAGE

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m", "canary": {"image": IMAGE + "-next", "weight": 50}}
NAMESPACE = "gco-inference"


@pytest.fixture
def api() -> Iterator[StandInKubeAPI]:
    with StandInKubeAPI() as server:
        yield server


@pytest.fixture
def reconciler(store: EndpointStore, api: StandInKubeAPI) -> Iterator[Reconciler]:
    retry = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)
    cluster = KubeCluster(api.url, static_token("t"), retry=retry, sleep=lambda _: None)
    yield Reconciler(store, cluster, EAST, wait=0.0, poll=0.01)
    cluster.close()


def squatter(store: EndpointStore, labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    """The canary Deployment `col` would render, as another owner holds it."""
    record = store.get("col")
    assert record is not None
    (canary,) = [
        o for o in render(record, EAST) if o["kind"] == "Deployment" and o["metadata"]["name"] != "col"
    ]
    held = copy.deepcopy(canary)
    held["metadata"]["labels"] = labels
    held["metadata"]["annotations"] = annotations
    held["spec"]["template"]["spec"]["containers"][0]["image"] = "someone/else:1"
    return held


def canary_image(api: StandInKubeAPI) -> str:
    found = api.get(DEPLOYMENT, NAMESPACE, "col--canary")
    assert found is not None
    return str(found["spec"]["template"]["spec"]["containers"][0]["image"])


@pytest.mark.parametrize(
    ("labels", "annotations", "holder"),
    [
        ({MANAGED_BY: MANAGER, ENDPOINT_LABEL: "other"}, {}, "endpoint other"),
        ({"app": "by-hand"}, {}, "an object gco did not make"),
    ],
)
def test_a_held_name_is_reported_and_left_alone_until_it_is_free(
    store: EndpointStore,
    api: StandInKubeAPI,
    reconciler: Reconciler,
    labels: dict[str, str],
    annotations: dict[str, str],
    holder: str,
) -> None:
    store.create("col", SPEC, [EAST])
    reconciler.ensure_system()  # the namespaces
    assert api.apply_as("someone", squatter(store, labels, annotations))[0] == 201
    outcome = reconciler.reconcile("col", wait=0.0)
    assert outcome.kind == "terminal"
    assert "Deployment gco-inference/col--canary is held by " + holder in outcome.detail
    record = store.get("col")
    assert record is not None
    status = record.region_status[EAST]
    assert status.state == "error" and status.error is not None and holder in status.error
    assert canary_image(api) == "someone/else:1"  # not applied over
    assert api.get(DEPLOYMENT, NAMESPACE, "col") is not None  # what is free was applied
    assert reconciler.reconcile("col", wait=0.0).kind == "terminal"  # still held: still reported
    assert canary_image(api) == "someone/else:1"

    # Rolling the canary back never deletes what col does not own.
    canary.rollback(store, "col")
    reconciler.reconcile("col", wait=0.0)
    assert canary_image(api) == "someone/else:1"


def test_in_a_batch_a_name_held_by_hand_is_found_by_the_batch_lists_and_left_alone(
    store: EndpointStore, api: StandInKubeAPI, reconciler: Reconciler
) -> None:
    """A batch lists, besides its endpoints' objects, the objects without an endpoint's label; a
    rendered name one of them holds is reported and not applied over, and no name is read alone."""
    store.create("col", SPEC, [EAST])
    store.create("bystander", {"image": IMAGE, "model_id": "m"}, [EAST])
    reconciler.ensure_system()
    assert api.apply_as("someone", squatter(store, {"app": "by-hand"}, {}))[0] == 201
    api.requests.clear()
    outcomes = reconciler.reconcile_many(["col", "bystander"], wait=0.0, concurrency=2)
    col, bystander = outcomes["col"].result(), outcomes["bystander"].result()
    assert (col.kind, bystander.kind) == ("terminal", "done")
    assert "Deployment gco-inference/col--canary is held by an object gco did not make" in col.detail
    assert canary_image(api) == "someone/else:1"  # not applied over
    assert api.get(DEPLOYMENT, NAMESPACE, "col") is not None  # what is free was applied
    # Every GET was a list of the batch (7 scopes, 2 selectors): no name was read alone.
    assert api.requests["GET"] == 2 * len(list(reconciler.grant.object_scopes(KINDS)))


def test_in_a_batch_a_role_object_an_older_gco_named_is_read_and_left_alone(
    store: EndpointStore, api: StandInKubeAPI, reconciler: Reconciler
) -> None:
    """An older gco named the canary of `chat` `chat-canary`, the name the endpoint `chat-canary`
    renders; that object carries `chat`'s label, which the batch's lists show only with `chat` in
    the batch, so a name ending in a role is read before it is applied."""
    store.create("chat-canary", {"image": IMAGE, "model_id": "m"}, [EAST])
    store.create("bystander", {"image": IMAGE, "model_id": "m"}, [EAST])
    reconciler.ensure_system()
    record = store.get("chat-canary")
    assert record is not None
    (rendered,) = [o for o in render(record, EAST) if o["kind"] == "Deployment"]
    legacy = copy.deepcopy(rendered)
    legacy["metadata"]["labels"] = {MANAGED_BY: MANAGER, ENDPOINT_LABEL: "chat"}
    legacy["metadata"]["annotations"] = {}
    legacy["spec"]["template"]["spec"]["containers"][0]["image"] = "older/canary:1"
    assert api.apply_as("gco-reconciler", legacy)[0] == 201
    outcomes = reconciler.reconcile_many(["chat-canary", "bystander"], wait=0.0, concurrency=2)
    held = outcomes["chat-canary"].result()
    assert (held.kind, outcomes["bystander"].result().kind) == ("terminal", "done")
    assert "Deployment gco-inference/chat-canary is held by endpoint chat" in held.detail
    found = api.get(DEPLOYMENT, NAMESPACE, "chat-canary")
    assert found is not None
    assert found["spec"]["template"]["spec"]["containers"][0]["image"] == "older/canary:1"  # not applied over


def test_an_earlier_lifecycle_of_the_same_endpoint_is_removed_not_adopted(
    store: EndpointStore, api: StandInKubeAPI, reconciler: Reconciler
) -> None:
    store.create("col", SPEC, [EAST])
    reconciler.ensure_system()
    old = squatter(store, {MANAGED_BY: MANAGER, ENDPOINT_LABEL: "col"}, {LIFECYCLE_ANNOTATION: "f" * 64})
    assert api.apply_as("someone", old)[0] == 201
    assert reconciler.reconcile("col", wait=5.0).kind == "done"
    assert canary_image(api) == IMAGE + "-next"  # removed, then created as this lifecycle's
