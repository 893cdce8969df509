"""The pure parts of reconciling at scale: the poller's lanes by key, the stand-in's label
index and kept list answers, the cost model's choice, and the local moto server's direct JSON bodies."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

from gco.local.moto.moto_json import EncodedRecords, item_body, record_json, records_body
from gco.local.region.poller import lane_of
from gco.local.standin.labels import (
    LabelIndex,
    equality_term,
    matches,
    parse_selector,
    set_term,
    split_terms,
)
from gco.local.standin.store import ObjectStore, tree_copy
from gco.reconcile.objects import DEPLOYMENT, INGRESS, set_selector
from gco.reconcile.throughput import (
    AWS_MODEL,
    DESIGN_WRITES_PER_SECOND,
    MAX_HANDLER_CONCURRENCY,
    RECORDS_PER_WRITE,
    STREAM_SETTINGS,
    CostModel,
    StreamSettings,
    choose,
)


def record(name: str, seq: int) -> dict[str, Any]:
    return {"dynamodb": {"Keys": {"endpoint_name": {"S": name}}, "SequenceNumber": str(seq)}}


def test_lanes_keep_every_key_in_one_lane_and_spread_the_keys() -> None:
    names = [f"ep-{index}" for index in range(70)]
    lanes = {name: lane_of(record(name, index), 4) for index, name in enumerate(names)}
    assert all(lane_of(record(name, 1000 + index), 4) == lanes[name] for index, name in enumerate(names))
    assert set(lanes.values()) == {0, 1, 2, 3}  # 70 keys over 4 lanes: every lane has some
    assert all(lane_of(record(name, 0), 1) == 0 for name in names)  # one lane: the whole shard
    assert lane_of({"dynamodb": {}}, 4) == lane_of({}, 4)  # a record without keys has a lane too


def test_selector_terms_and_the_label_index() -> None:
    query = "gco.dev/endpoint in (a,b),app=x,role!=y"
    assert split_terms(query) == ["gco.dev/endpoint in (a,b)", "app=x", "role!=y"]
    assert set_term("gco.dev/endpoint in (a, b)") == ("gco.dev/endpoint", frozenset({"a", "b"}))
    assert equality_term("app==x") == ("app", "x")
    assert equality_term("role!=y") is None
    assert set_selector("k", ["b", "a", "b"]) == "k in (a,b)"
    index: LabelIndex[str] = LabelIndex()
    index.put("one", {"gco.dev/endpoint": "a", "app": "x"})
    index.put("two", {"gco.dev/endpoint": "b", "app": "x"})
    index.put("three", {"gco.dev/endpoint": "c", "app": "x"})
    assert index.candidates(query) == {"one", "two"}
    assert index.candidates("role!=y") is None  # narrows nothing: the caller scans
    index.put("one", {"gco.dev/endpoint": "z"})  # relabelled
    assert index.candidates(query) == {"two"}
    index.remove("two")
    assert index.candidates(query) == set()


def test_the_chosen_settings_drain_the_design_load_with_headroom() -> None:
    settings = choose(AWS_MODEL, DESIGN_WRITES_PER_SECOND)
    assert settings == STREAM_SETTINGS
    assert settings.batching_window_seconds == 0
    assert settings.handler_concurrency == min(settings.batch_size, MAX_HANDLER_CONCURRENCY)
    assert settings.write_capacity(AWS_MODEL) >= 2 * DESIGN_WRITES_PER_SECOND
    # The old mapping (one batch of 25 per shard, 1 s window, 8 at a time) does not keep up.
    old = StreamSettings(
        parallelization_factor=1, batch_size=25, batching_window_seconds=1, handler_concurrency=8
    )
    assert old.write_capacity(AWS_MODEL) < DESIGN_WRITES_PER_SECOND


def test_a_batch_is_counted_in_records_most_of_them_status_echoes() -> None:
    """A write is 5 records in each Region's stream (2 Regions), 2 of them reconciled: batches of 10
    records hold 4 reconciles, and 9 of them in flight drain fewer writes than the design load."""
    assert RECORDS_PER_WRITE == 5
    small = StreamSettings(
        parallelization_factor=9, batch_size=10, batching_window_seconds=0, handler_concurrency=10
    )
    assert small.reconciles_per_batch == 4
    assert small.write_capacity(AWS_MODEL) < DESIGN_WRITES_PER_SECOND
    assert STREAM_SETTINGS.batch_size > small.batch_size
    # One wave even when every record of a batch is a new endpoint's INSERT.
    assert STREAM_SETTINGS.handler_concurrency >= STREAM_SETTINGS.batch_size


def test_a_slower_round_trip_needs_more_in_flight() -> None:
    fast = choose(CostModel(store_round_trip=0.005, kube_round_trip=0.01), 10)
    slow = choose(CostModel(store_round_trip=0.2, kube_round_trip=0.05), 10)
    in_flight = [s.parallelization_factor * s.handler_concurrency for s in (fast, slow)]
    assert in_flight[0] < in_flight[1]
    assert CostModel(0.1, 0.02).batch_seconds(20, 10) > CostModel(0.1, 0.02).batch_seconds(10, 10)


def test_direct_json_bodies_as_the_protocol_writes_them() -> None:
    item = json.loads(item_body({"Item": {"blob": {"B": b"\x00\x01"}, "n": {"N": "1.5"}}, "Gone": None}))
    assert item == {"Item": {"blob": {"B": "AAE="}, "n": {"N": "1.5"}}}
    when = datetime(2026, 1, 1, tzinfo=UTC)
    records = json.loads(
        records_body(
            {
                "Records": [
                    {
                        "dynamodb": {
                            "ApproximateCreationDateTime": when.replace(tzinfo=None),
                            "NewImage": {"blob": {"B": b"\x00\x01"}},  # moto keeps stream binaries raw
                        }
                    }
                ],
                "NextShardIterator": "it",
            }
        )
    )
    assert records["Records"][0]["dynamodb"]["ApproximateCreationDateTime"] == when.timestamp()
    assert records["Records"][0]["dynamodb"]["NewImage"]["blob"] == {"B": "AAE="}
    assert records["NextShardIterator"] == "it"


def test_each_stream_record_is_written_once_for_every_reader() -> None:
    """Every Region's poller reads every record: its JSON is written once and kept (a bounded number)."""
    written: list[str] = []

    def encode(record: dict[str, Any]) -> str:
        written.append(record["eventID"])
        return record_json(record)

    encoded = EncodedRecords(size=2, encode=encode)
    first, second, third = ({"eventID": f"e{i}", "dynamodb": {"Keys": {}, "Gone": None}} for i in range(3))
    result = {"Records": [first, second], "NextShardIterator": "it"}
    body = records_body(result, encoded)
    assert (
        json.loads(body)
        == json.loads(records_body(result))
        == {
            "Records": [
                {"eventID": "e0", "dynamodb": {"Keys": {}}},
                {"eventID": "e1", "dynamodb": {"Keys": {}}},
            ],
            "NextShardIterator": "it",
        }
    )
    assert records_body(result, encoded) == body and written == ["e0", "e1"]  # the second reader
    assert json.loads(records_body({"Records": []}, encoded)) == {"Records": []}
    encoded(third)  # past the bound: the oldest is dropped, and written again when read again
    encoded(first)
    assert written == ["e0", "e1", "e2", "e0"]
    assert encoded({**second}) == encoded(second)  # an equal record of its own identity: same text


def _ingress(name: str, upstream: str) -> dict[str, Any]:
    return {
        "apiVersion": INGRESS.api_version,
        "kind": INGRESS.kind,
        "metadata": {"name": name, "namespace": "gco-system", "labels": {"role": "route"}},
        "spec": {"rules": [{"http": {"paths": [{"path": f"/inference/{name}", "backend": upstream}]}}]},
    }


def test_the_stand_in_lists_the_same_json_it_renders_and_a_change_is_seen() -> None:
    clock = [0.0]
    store = ObjectStore(namespaces=["gco-system"], ready_delay=5.0, clock=lambda: clock[0])
    for name in ("a", "b"):
        store.apply_as("gco", _ingress(name, "one"))
    encoded, version = store.list_encoded(INGRESS, "gco-system", "role=route")
    assert [json.loads(item) for item in encoded] == store.list(INGRESS, "gco-system", "role=route")[0]
    store.apply_as("gco", _ingress("a", "two"))  # a new resourceVersion: the kept JSON is stale
    changed, later = store.list_encoded(INGRESS, "gco-system", "role=route")
    assert json.loads(changed[0])["spec"]["rules"][0]["http"]["paths"][0]["backend"] == "two"
    assert json.loads(changed[0])["metadata"]["resourceVersion"] == later != version
    assert changed[1] is encoded[1]  # the unchanged object's JSON is not encoded again


def test_a_listed_deployment_follows_the_clock_not_a_kept_answer() -> None:
    clock = [0.0]
    store = ObjectStore(namespaces=["gco-inference"], ready_delay=5.0, clock=lambda: clock[0])
    deployment = {
        "apiVersion": DEPLOYMENT.api_version,
        "kind": DEPLOYMENT.kind,
        "metadata": {"name": "d", "namespace": "gco-inference", "labels": {"app": "d"}},
        "spec": {"replicas": 2},
    }
    store.apply_as("gco", deployment)
    before, _ = store.list_encoded(DEPLOYMENT, "gco-inference", "app=d")
    clock[0] = 6.0  # past the readiness delay: same resourceVersion, different status
    after, _ = store.list_encoded(DEPLOYMENT, "gco-inference", "app=d")
    assert "readyReplicas" not in json.loads(before[0])["status"]
    assert json.loads(after[0])["status"]["readyReplicas"] == 2


def test_tree_copy_is_a_deep_copy_of_json() -> None:
    document: dict[str, Any] = {"a": [{"b": 1}, ("c", [2])], "d": {"e": None}}
    copied = tree_copy(document)
    assert copied == document
    copied["a"][0]["b"] = 3
    copied["d"]["e"] = "x"
    assert document == {"a": [{"b": 1}, ("c", [2])], "d": {"e": None}}


def test_a_selector_is_parsed_once_and_matches_each_operator() -> None:
    query = "gco.dev/endpoint in (a,b),app==x,role!=y"
    assert parse_selector(query) == (
        ("in", "gco.dev/endpoint", frozenset({"a", "b"})),
        ("=", "app", "x"),
        ("!=", "role", "y"),
    )
    assert parse_selector(query) is parse_selector(query)  # kept: not parsed again for each object
    assert matches({"gco.dev/endpoint": "a", "app": "x"}, query)  # a missing label is != y
    assert matches({"gco.dev/endpoint": "b", "app": "x", "role": "z"}, query)
    assert not matches({"gco.dev/endpoint": "c", "app": "x"}, query)  # not in the set
    assert not matches({"app": "x"}, query)  # a missing label is in no set
    assert not matches({"gco.dev/endpoint": "a", "app": "w"}, query)
    assert not matches({"gco.dev/endpoint": "a", "app": "x", "role": "y"}, query)
    assert matches({"anything": "1"}, "")  # the empty selector matches everything


def test_existence_terms_select_by_whether_a_label_is_there() -> None:
    """`key` and `!key` as the API server parses them (apimachinery `labels.Parse`)."""
    assert parse_selector("!gco.dev/endpoint,app") == (
        ("!exists", "gco.dev/endpoint", ""),
        ("exists", "app", ""),
    )
    assert matches({"app": "x"}, "!gco.dev/endpoint,app")
    assert not matches({"app": "x", "gco.dev/endpoint": ""}, "!gco.dev/endpoint")  # present, if empty
    assert not matches({"gco.dev/endpoint": "a"}, "!gco.dev/endpoint,app")
    assert not matches({}, "app")
    index: LabelIndex[str] = LabelIndex()
    index.put("mine", {"gco.dev/endpoint": "a"})
    index.put("theirs", {"app": "x"})
    index.put("bare", {})
    assert index.candidates("!gco.dev/endpoint") == {"theirs", "bare"}
    assert index.candidates("!gco.dev/endpoint,app=x") == {"theirs"}
    index.put("mine", {"app": "y"})  # relabelled: no longer an endpoint's
    assert index.candidates("!gco.dev/endpoint") == {"mine", "theirs", "bare"}
    index.remove("bare")
    assert index.candidates("!gco.dev/endpoint") == {"mine", "theirs"}
    assert index.candidates("app") is None  # `key` narrows nothing: the caller matches each object


def test_creation_times_are_read_as_a_copy_while_objects_are_created() -> None:
    """The benchmark's control endpoint reads the creation clocks while requests create objects:
    iterating the live dict then fails with 'dictionary changed size during iteration'."""
    store = ObjectStore(namespaces=["gco-system"], ready_delay=0.0)
    stop = threading.Event()

    def create() -> None:
        for index in range(5000):
            if stop.is_set():
                return
            store.apply_as("gco", _ingress(f"r{index}", "one"))

    writer = threading.Thread(target=create)
    writer.start()
    try:
        for _ in range(200):
            copy = store.creations()
            assert all(isinstance(at, float) for at in copy.values())
    finally:
        stop.set()
        writer.join()
    before = store.creations()
    store.apply_as("gco", _ingress("late", "one"))
    assert len(store.creations()) == len(before) + 1  # a copy: the earlier one did not grow
