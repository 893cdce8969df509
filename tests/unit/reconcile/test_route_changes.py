"""A batch's route changes merged into the table the proxy's ConfigMap holds, and that table read back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gco.reconcile.proxy.route_changes import PendingRouteChanges, RouteChanges
from gco.reconcile.proxy.route_shards import shard_data, shard_table, split
from gco.reconcile.proxy.routes import Route, RouteTable, route_of, route_table, table_from_json
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, make_record


def route(endpoint: str, weight: int | None = None) -> Route:
    canary = None if weight is None else f"http://{endpoint}--canary.gco-inference.svc:8000"
    return Route(
        endpoint=endpoint,
        path=f"/inference/{endpoint}",
        upstream=f"http://{endpoint}.gco-inference.svc:8000",
        canary_upstream=canary,
        canary_weight=weight or 0,
    )


def table(*routes: Route) -> RouteTable:
    return RouteTable(routes=tuple(sorted(routes, key=lambda r: r.path)))


def test_changes_replace_add_and_drop_endpoints_and_leave_the_rest() -> None:
    changes = RouteChanges()
    changes.put("b", route("b", 40))  # a canary weight changed
    changes.put("c", None)  # deleted
    changes.put("d", route("d"))  # created
    merged = changes.merged_into(table(route("a"), route("b", 10), route("c")))
    assert merged == table(route("a"), route("b", 40), route("d"))


def test_a_later_change_of_an_endpoint_wins_and_keeps_the_order_of_changes() -> None:
    earlier, later = RouteChanges(), RouteChanges()
    earlier.put("a", route("a"))
    earlier.put("b", route("b"))
    later.put("a", None)
    earlier.update(later)
    assert list(earlier.routes.items()) == [("b", route("b")), ("a", None)]
    assert earlier.merged_into(table(route("a"))) == table(route("b"))


def test_a_change_not_known_exactly_or_a_path_claimed_twice_is_left_to_a_rebuild() -> None:
    assert not RouteChanges()
    unknown = RouteChanges(rebuild=True)
    assert unknown and unknown.merged_into(table()) is None
    later = RouteChanges()
    later.update(unknown)
    assert later.rebuild  # a rebuild is never lost when changes are combined
    taken = RouteChanges()
    taken.put("a", route("b"))  # another endpoint's path
    assert taken.merged_into(table(route("b"))) is None
    named = RouteChanges()
    named.put("a", route("b"))  # a route naming another endpoint than the one that changed
    assert named.merged_into(table()) is None


def test_a_shards_table_reads_back_as_the_table_it_was_rendered_from() -> None:
    for rendered in (table(route("a", 25), route("b")), table()):
        for shard, part in split(rendered).items():
            assert shard_table(shard, shard_data(shard, part)) == part


ENTRY: dict[str, Any] = route("a").model_dump(mode="json")


@pytest.mark.parametrize(
    "text",
    [
        None,
        "not json",
        "[]",
        json.dumps({"routes": {}}),
        json.dumps({"routes": [], "extra": 1}),
        json.dumps({"routes": [{**ENTRY, "extra": 1}]}),
        json.dumps({"routes": [{k: v for k, v in ENTRY.items() if k != "upstream"}]}),
        json.dumps({"routes": [{**ENTRY, "canary_weight": "10"}]}),
        json.dumps({"routes": [{**ENTRY, "canary_weight": 101}]}),
        json.dumps({"routes": [{**ENTRY, "upstream": "http://evil.example.com:80"}]}),
        json.dumps({"routes": [ENTRY, ENTRY]}),
    ],
    ids=[
        "absent",
        "not-json",
        "not-an-object",
        "routes-not-a-list",
        "extra-key",
        "route-extra-field",
        "route-missing-field",
        "weight-not-int",
        "weight-out-of-range",
        "invalid-upstream",
        "path-twice",
    ],
)
def test_anything_but_a_route_table_is_not_trusted(text: str | None) -> None:
    assert table_from_json(text) is None


def test_route_of_is_the_route_tables_rule_for_one_object() -> None:
    ingress = next(obj for obj in render(make_record(), EAST) if obj["kind"] == "Ingress")
    assert route_of(ingress) == route_table([ingress]).routes[0]
    terminating = {
        **ingress,
        "metadata": {**ingress["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"},
    }
    elsewhere = {**ingress, "metadata": {**ingress["metadata"], "namespace": "gco-inference"}}
    assert route_of(terminating) is None and route_of(elsewhere) is None


def changed(*endpoints: str) -> RouteChanges:
    changes = RouteChanges()
    for endpoint in endpoints:
        changes.put(endpoint, route(endpoint))
    return changes


def test_the_last_of_concurrent_batches_refreshes_for_all_of_them() -> None:
    pending = PendingRouteChanges(max_delay=1.0, clock=lambda: 5.0)
    pending.begin_batch()
    pending.begin_batch()
    assert pending.end_batch(changed("a")) is False  # another batch runs: left to it
    assert pending.stale
    assert pending.end_batch(RouteChanges()) is True  # the last one, though it changed nothing
    assert list(pending.take().routes) == ["a"]
    assert not pending.stale
    pending.begin_batch()
    assert pending.end_batch(RouteChanges()) is False  # nothing waits


def test_a_change_waiting_max_delay_is_refreshed_while_batches_overlap() -> None:
    now = [0.0]
    pending = PendingRouteChanges(max_delay=1.0, clock=lambda: now[0])
    for _ in range(3):
        pending.begin_batch()
    assert pending.end_batch(changed("a")) is False
    now[0] = 0.5
    assert pending.end_batch(changed("b")) is False  # the oldest change is a's, 0.5 s old
    now[0] = 1.0
    pending.begin_batch()
    assert pending.end_batch(RouteChanges()) is True  # two still run; a's change waited 1 s
    assert list(pending.take().routes) == ["a", "b"]


def test_a_failed_refresh_puts_its_changes_back_ahead_of_later_ones() -> None:
    now = [0.0]
    pending = PendingRouteChanges(max_delay=1.0, clock=lambda: now[0])
    pending.record(changed("a", "b"))
    taken = pending.take()
    pending.record(changed("c", "a"))
    now[0] = 3.0
    pending.restore(taken)
    assert list(pending.take().routes) == ["b", "c", "a"]  # a's later change wins, last
    pending.restore(RouteChanges())
    assert not pending.stale
