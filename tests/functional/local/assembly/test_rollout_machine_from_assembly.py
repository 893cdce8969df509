"""The rollout state machine run from its synthesized definition, its tasks the rollout functions run
from their synthesized asset (gco.local.assembly.states and invoke).

An execution asked for a lifecycle the endpoint no longer has: Begin's function refuses it
(`RolloutSupersededError`), the Catch hands the error to GiveUp's function, which finds no canary of
that rollout to remove, and the execution ends FAILED `RolloutFailed` with the refusal as its cause,
the endpoint's record untouched: the path every failed rollout takes in AWS.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gco import aws
from gco.endpoints import EndpointStore, init_table
from gco.local.assembly import CloudAssembly, functions
from gco.local.assembly.invoke import AssetFunction, FunctionRuntime, credentials_environment
from gco.local.assembly.resolve import ACCOUNT, Resolver
from gco.local.assembly.states import StateMachine
from gco.local.assembly.template import function_arns, state_machines
from gco.local.moto.motoserver import MotoServer
from gco.processes.cpython import find_cpython
from tests.cdk.synth_cache import HOME, synthesize_deployed
from tests.conftest import SYNTH_GROUP
from tests.tools.lambda_runtime import runtime_sdk
from tests.unit.reconcile.records import IMAGE

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group(SYNTH_GROUP),
    pytest.mark.skipif(
        find_cpython("3.13") is None, reason="the functions' Python 3.13 is not on this machine"
    ),
]
BUCKET = "gco-local-evidence"


def test_a_superseded_rollout_is_given_up_and_fails_as_its_definition_says(
    moto: MotoServer, tmp_path: Path
) -> None:
    stack = CloudAssembly.open(synthesize_deployed()).stack("gco-global")
    arns = function_arns(stack, ACCOUNT)
    table_id = next(k for k, r in stack.resources("AWS::DynamoDB::GlobalTable").items()
                    if r["Properties"]["TableName"] == "gco-inference-endpoints")  # fmt: skip
    # the evidence bucket, made locally under one name (every bucket of the stack stands for it here)
    refs = {table_id: "gco-inference-endpoints", **dict.fromkeys(stack.resources("AWS::S3::Bucket"), BUCKET)}
    resolver = Resolver(region=HOME, stack=stack.name, refs=refs, attributes=arns)
    definition = json.loads(resolver.resolve(state_machines(stack)["gco-rollout"], "DefinitionString"))

    dynamodb = aws.client("dynamodb", endpoint_url=moto.url)
    init_table(dynamodb, "gco-inference-endpoints")
    aws.client("s3", endpoint_url=moto.url).create_bucket(Bucket=BUCKET)
    store = EndpointStore(dynamodb, "gco-inference-endpoints")
    record = store.create("llama", {"image": IMAGE}, [HOME])
    assert record is not None

    runtime = FunctionRuntime.for_runtime("python3.13", runtime_sdk(tmp_path / "sdk"))
    running: dict[str, AssetFunction] = {}
    with (tmp_path / "functions.log").open("w") as log:
        for logical_id, function in functions(stack).items():
            if (logical_id, "Arn") in arns and arns[(logical_id, "Arn")] in json.dumps(definition):
                variables = {
                    **{k: str(v) for k, v in resolver.resolve(function.environment, "Environment").items()},
                    **credentials_environment("testing", "testing", None),
                    "AWS_ENDPOINT_URL": moto.url,
                }
                running[arns[(logical_id, "Arn")]] = AssetFunction(
                    function, runtime, environment=variables, region=HOME, log=log
                )
        assert {f.function.handler for f in running.values()} == {
            "rollout.handler",
            "rollout.give_up_handler",
        }
        sleeps: list[float] = []
        try:
            machine = StateMachine(
                definition, lambda arn, payload: running[arn].invoke(payload), sleep=sleeps.append
            )
            other_lifecycle = "f" * 64
            ended = machine.start({"settings": {"endpoint": "llama", "image": "vllm/vllm-openai:v0.6.4"},
                                   "lifecycle_id": other_lifecycle})  # fmt: skip
        finally:
            for environment in running.values():
                environment.close()
    assert (ended.status, ended.error) == ("FAILED", "RolloutFailed"), (
        ended,
        (tmp_path / "functions.log").read_text()[-2000:],
    )
    assert ended.visited == ["Init", "Begin", "GiveUp", "RolloutFailed"]
    assert ended.cause is not None and ended.cause.startswith("RolloutSupersededError: ")
    assert sleeps == []  # a function's own error is not retried (only Lambda's transient ones are)
    after = store.get("llama")
    assert after is not None and after.spec == record.spec and after.lifecycle_id == record.lifecycle_id
