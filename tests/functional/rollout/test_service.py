"""What the rollout state machine's Lambdas do, against the moto server: begin on the right lifecycle
only, give up (removing only this rollout's canary), start an execution once, read the stream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from gco.endpoints import EndpointStore, canary, operations
from gco.endpoints.codec import to_item
from gco.evidence.store import LocalEvidenceStore
from gco.local.moto.motoserver import MotoServer
from gco.rollout import execution
from gco.rollout.blocks import Sample, Version
from gco.rollout.errors import ExecutionStartError, RolloutInputError, RolloutSupersededError
from gco.rollout.service import REQUEST_ATTRIBUTE, advance, give_up, requests_from_stream
from gco.rollout.state import RolloutSettings
from gco.rollout.steps import Ports
from tests.unit.reconcile.records import EAST, IMAGE, WEST

CANARY = "registry.example.com/vllm:next"


class Unreached:
    """A stand-in for the traffic port where no request may be sent (begin and give up send none)."""

    def send(self, region: str, version: Version) -> Sample:
        raise AssertionError(f"no request expected ({region}, {version})")


def ports(store: EndpointStore, tmp_path: Path) -> Ports:
    return Ports(store=store, traffic=Unreached(), evidence=[LocalEvidenceStore(tmp_path)])


def test_begin_gives_the_first_region_the_canary_on_the_named_lifecycle_only(
    store: EndpointStore, tmp_path: Path
) -> None:
    lifecycle = store.create("smol", {"image": IMAGE}, [EAST, WEST]).lifecycle_id or ""
    settings = RolloutSettings(endpoint="smol", image=CANARY, waves=True)
    event = execution.execution_input(settings, "0" * 64)
    with pytest.raises(RolloutSupersededError):
        advance(event, lambda _: ports(store, tmp_path))
    assert operations.fresh(store, "smol").spec.canary is None
    answer = advance(execution.execution_input(settings, lifecycle), lambda _: ports(store, tmp_path))
    assert answer["waiting"] and not answer["done"]
    assert [r["region"] for r in answer["state"]["regions"]] == [EAST, WEST]
    spec_canary = operations.fresh(store, "smol").spec.canary
    assert spec_canary is not None and spec_canary.regions == [EAST] and spec_canary.image == CANARY
    with pytest.raises(RolloutInputError, match="already has a canary"):
        advance(execution.execution_input(settings, lifecycle), lambda _: ports(store, tmp_path))
    # a step while the canary is not yet counted ready: still waiting, nothing sent
    again = advance({"state": answer["state"]}, lambda _: ports(store, tmp_path))
    assert again["waiting"] and again["state"] == answer["state"]


def test_an_ended_execution_removes_only_its_own_canary(store: EndpointStore, tmp_path: Path) -> None:
    lifecycle = store.create("smol", {"image": IMAGE}, [EAST]).lifecycle_id or ""
    settings = RolloutSettings(endpoint="smol", image=CANARY)
    status_change = {
        "detail": {"status": "ABORTED", "input": json.dumps(execution.execution_input(settings, lifecycle))}
    }
    canary.set_canary(store, "smol", "registry.example.com/vllm:other", 10)  # another rollout's
    assert give_up(status_change, lambda _: ports(store, tmp_path), store)["removed"] is False
    assert operations.fresh(store, "smol").spec.canary is not None
    canary.set_canary(store, "smol", CANARY, 10)
    assert give_up(status_change, lambda _: ports(store, tmp_path), store)["removed"] is True
    assert operations.fresh(store, "smol").spec.canary is None
    assert give_up(status_change, lambda _: ports(store, tmp_path), store)["removed"] is False  # idempotent
    # the Catch of a Begin that failed: the state machine's empty state, and the execution's input
    canary.set_canary(store, "smol", CANARY, 10)
    caught = {"state": {}, **execution.execution_input(settings, lifecycle), "error": {"Error": "X"}}
    assert give_up(caught, lambda _: ports(store, tmp_path), store)["removed"] is True


def test_a_failed_step_gives_up_with_its_state_and_writes_the_evidence(
    store: EndpointStore, tmp_path: Path
) -> None:
    lifecycle = store.create("smol", {"image": IMAGE}, [EAST, WEST]).lifecycle_id or ""
    settings = RolloutSettings(endpoint="smol", image=CANARY, waves=True)
    begun = advance(execution.execution_input(settings, lifecycle), lambda _: ports(store, tmp_path))
    caught = {"state": begun["state"], "error": {"Error": "States.Timeout", "Cause": "step timed out"}}
    answer = give_up(caught, lambda _: ports(store, tmp_path), store)
    assert answer["state"]["outcome"] == "rolled_back" and "States.Timeout" in answer["state"]["reason"]
    record = operations.fresh(store, "smol")
    assert record.spec.canary is None and record.rollout_evidence == answer["state"]["evidence_ids"][-1]
    assert LocalEvidenceStore(tmp_path).get(record.rollout_evidence or "").kind == "rollout"


def _stream_record(new: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    change: dict[str, Any] = {"NewImage": to_item(new)}
    if old is not None:
        change["OldImage"] = to_item(old)
    return {"eventName": "MODIFY" if old else "INSERT", "dynamodb": change}


def test_the_stream_asks_for_a_rollout_where_the_request_appeared_or_changed() -> None:
    base = {"endpoint_name": "smol", "lifecycle_id": "a" * 64, "desired_state": "running"}
    request = {"image": CANARY, "waves": True}
    asked = requests_from_stream(
        [
            _stream_record({**base, REQUEST_ATTRIBUTE: request}, base),  # appeared
            _stream_record(
                {**base, REQUEST_ATTRIBUTE: request}, {**base, REQUEST_ATTRIBUTE: request}
            ),  # kept
            _stream_record({**base, "desired_state": "stopped", REQUEST_ATTRIBUTE: request}, base),  # stopped
            _stream_record({**base, REQUEST_ATTRIBUTE: {"image": CANARY, "block_requests": 3}}, base),  # bad
            _stream_record(base, None),  # none
            {
                "eventName": "INSERT",
                "dynamodb": {"NewImage": {"endpoint_name": {"Q": "smol"}}},
            },  # undecodable
        ]
    )
    assert len(asked) == 1
    settings, lifecycle = asked[0]
    assert (settings.endpoint, settings.image, settings.waves, lifecycle) == ("smol", CANARY, True, "a" * 64)


def test_an_execution_is_started_once_per_rollout(moto: MotoServer) -> None:
    client = boto3.client("stepfunctions", region_name=EAST, endpoint_url=moto.url)
    machine = client.create_state_machine(
        name="gco-rollout",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
        roleArn="arn:aws:iam::123456789012:role/gco-rollout",
    )["stateMachineArn"]
    settings = RolloutSettings(endpoint="smol", image=CANARY)
    name = execution.execution_name("smol", "b" * 64, CANARY)
    assert len(name) <= 80 and name.startswith("smol-bbbbbbbbbbbb-")
    arn = execution.start(client, machine, settings, "b" * 64)
    assert arn.endswith(name)
    described = client.describe_execution(executionArn=arn)
    assert json.loads(described["input"]) == execution.execution_input(settings, "b" * 64)
    with pytest.raises(ExecutionStartError):
        execution.start(client, machine + "-missing", settings, "b" * 64)
