"""A table write starts a rollout: the starter run from its synthesized asset, fed by its synthesized
event source mapping (filters, batch size, parallelization, retries) over the moto server's stream.

The app is synthesized as `cdk deploy` ships it (wheels from the locks). The starter runs in an
execution environment of the runtime's Python with its asset alone on the import path
(gco.local.assembly.invoke), its environment resolved from its template, and calls StartExecution
on the moto server's Step Functions, where the rollout state machine is created under its
synthesized name. A record without a rollout request must never reach it (the filter), one with a
request must start exactly one execution.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from gco import aws
from gco.endpoints import EndpointStore, init_table
from gco.endpoints.codec import to_attribute, to_item
from gco.local.assembly import CloudAssembly, EventSourceMapping, LambdaFunction, functions, mappings
from gco.local.assembly.iam import assume, make_role
from gco.local.assembly.invoke import AssetFunction, FunctionRuntime, credentials_environment
from gco.local.assembly.resolve import Resolver
from gco.local.errors import FunctionInvokeError
from gco.local.moto.motoserver import MotoServer
from gco.local.region.poller import StreamPoller
from gco.processes.cpython import find_cpython
from gco.rollout.service import REQUEST_ATTRIBUTE
from tests.cdk.synth_cache import HOME, synthesize_deployed
from tests.conftest import SYNTH_GROUP
from tests.tools.lambda_runtime import runtime_sdk
from tests.unit.reconcile.records import EAST, IMAGE

RUNTIME = "python3.13"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group(SYNTH_GROUP),
    pytest.mark.skipif(
        find_cpython("3.13") is None, reason="the functions' Python 3.13 is not on this machine"
    ),
]


@pytest.fixture(scope="module")
def assembly() -> CloudAssembly:
    return CloudAssembly.open(synthesize_deployed())


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return runtime_sdk(tmp_path_factory.mktemp("runtime-sdk"))


def starter_of(assembly: CloudAssembly) -> tuple[LambdaFunction, EventSourceMapping, str]:
    stack = assembly.stack("gco-global")
    (starter,) = [f for f in functions(stack).values() if f.handler == "rollout_starter.handler"]
    (mapping,) = [m for m in mappings(stack).values() if m.function == starter.logical_id]
    (table,) = [
        r["Properties"]["TableName"]
        for r in stack.resources("AWS::DynamoDB::GlobalTable").values()
        if r["Properties"]["TableName"].endswith("endpoints")
    ]
    return starter, mapping, table


@pytest.fixture
def started(
    assembly: CloudAssembly, packages: Path, moto: MotoServer
) -> Iterator[tuple[AssetFunction, StreamPoller, EndpointStore, Any]]:
    starter, mapping, table = starter_of(assembly)
    dynamodb = aws.client("dynamodb", endpoint_url=moto.url)
    _, description = init_table(dynamodb, table)
    stream_arn = description["LatestStreamArn"]
    states = aws.client("stepfunctions", endpoint_url=moto.url, region=HOME)
    states.create_state_machine(
        name="gco-rollout",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
        roleArn="arn:aws:iam::123456789012:role/gco-rollout",
    )
    stack = assembly.stack("gco-global")
    table_id = next(
        k
        for k, r in stack.resources("AWS::DynamoDB::GlobalTable").items()
        if r["Properties"]["TableName"] == table
    )
    resolver = Resolver(region=HOME, stack=stack.name, attributes={(table_id, "StreamArn"): stream_arn})
    assert resolver.resolve(mapping.source, "EventSourceArn") == stream_arn
    environment = {
        **{k: str(v) for k, v in resolver.resolve(starter.environment, "Environment").items()},
        **credentials_environment("testing", "testing", None),
        "AWS_ENDPOINT_URL": moto.url,
    }
    function = AssetFunction(
        starter, FunctionRuntime.for_runtime(starter.runtime, packages), environment=environment, region=HOME
    )
    poller = StreamPoller(
        aws.client("dynamodbstreams", endpoint_url=moto.url),
        stream_arn,
        lambda event, _context: function.invoke(event),
        region=HOME,
        batch_size=mapping.batch_size,
        parallelization=mapping.parallelization_factor,
        max_retries=mapping.retry_attempts + 1,
        filters=mapping.filters,
    )
    try:
        yield function, poller, EndpointStore(dynamodb, table), states
    finally:
        function.close()


def executions(states: Any) -> list[dict[str, Any]]:
    (machine,) = states.list_state_machines()["stateMachines"]
    return list(states.list_executions(stateMachineArn=machine["stateMachineArn"])["executions"])


def test_a_table_write_with_a_rollout_request_starts_one_execution_and_no_other_write_does(
    started: tuple[AssetFunction, StreamPoller, EndpointStore, Any],
) -> None:
    function, poller, store, states = started
    assert function.function.runtime == RUNTIME
    record = store.create("llama", {"image": IMAGE}, [EAST])
    assert record is not None
    poller.poll_once()
    assert poller.filtered >= 1 and function.started == 0  # filtered: the starter never ran
    assert poller.checkpoints  # and the checkpoint moved past what the filter dropped
    assert executions(states) == []
    request = {"image": "vllm/vllm-openai:v0.6.4", "waves": True}
    aws.client("dynamodb").update_item(
        TableName=starter_of_table(function),
        Key={"endpoint_name": {"S": "llama"}},
        UpdateExpression="SET #r = :r",
        ExpressionAttributeNames={"#r": REQUEST_ATTRIBUTE},
        ExpressionAttributeValues={":r": to_attribute(request)},
    )
    poller.poll_once()
    assert function.started == 1 and poller.dead_letters == []
    (execution,) = executions(states)
    assert execution["name"].startswith("llama")
    # the same record redelivered starts nothing twice (the execution's name is the request's)
    assert function.invoke({"Records": []}) == {"started": []}


SLOW = """
import time

def handler(event, context):
    time.sleep(event["sleep"])
    if event.get("fail"):
        raise ValueError("asked to fail")
    return {"slept": event["sleep"], "remaining_ms": context.get_remaining_time_in_millis()}
"""


def test_a_function_that_overruns_its_timeout_fails_or_raises_as_on_lambda(
    assembly: CloudAssembly, packages: Path, tmp_path: Path
) -> None:
    starter, _, _ = starter_of(assembly)
    runtime = FunctionRuntime.for_runtime(RUNTIME, packages)
    (tmp_path / "slow.py").write_text(SLOW)
    slow = LambdaFunction(**{**vars(starter), "code": tmp_path, "handler": "slow.handler", "timeout_s": 1})
    with AssetFunction(slow, runtime, environment={}, region=HOME) as function:
        answer = function.invoke({"sleep": 0})
        assert answer["slept"] == 0 and 0 < answer["remaining_ms"] <= 1000
        with pytest.raises(
            FunctionInvokeError, match=r"Sandbox\.Timedout: Task timed out after 1\.00 seconds"
        ):
            function.invoke({"sleep": 5})
        with pytest.raises(FunctionInvokeError, match=r"ValueError: asked to fail"):
            function.invoke({"sleep": 0, "fail": True})
        assert function.started == 2  # the environment that timed out was ended; the next one is kept
    # The local stack is not shipped: importing it from the asset fails, as it would on Lambda.
    missing = LambdaFunction(**{**vars(starter), "handler": "gco.local.stack.handler"})
    with (
        AssetFunction(missing, runtime, environment={}, region=HOME) as function,
        pytest.raises(
            FunctionInvokeError,
            match=r"Runtime\.ImportModuleError: Unable to import module 'gco\.local\.stack'",
        ),
    ):
        function.invoke({})


def starter_of_table(function: AssetFunction) -> str:
    """The endpoint table the starter's stream is of (the fixture created it under its template name)."""
    return "gco-inference-endpoints"


def client_as(service: str, url: str, credentials: dict[str, str]) -> Any:
    """A client signing with `credentials` (an IAM user's keys, a role's session), not the environment's."""
    return botocore.session.Session().create_client(
        service,
        region_name=HOME,
        endpoint_url=url,
        aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=credentials.get("AWS_SESSION_TOKEN"),
    )


def admin_of(server: MotoServer) -> dict[str, str]:
    """An IAM user allowed everything: the operator writing the table once enforcement is on."""
    iam = client_as("iam", server.url, credentials_environment("testing", "testing", None))
    iam.create_user(UserName="operator")
    everything = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
    iam.put_user_policy(UserName="operator", PolicyName="all", PolicyDocument=json.dumps(everything))
    key = iam.create_access_key(UserName="operator")["AccessKey"]
    return credentials_environment(key["AccessKeyId"], key["SecretAccessKey"], None)


def without_action(iam: Any, role: str, action: str) -> None:
    """Take `action` out of every inline policy of `role` (the synthesized policy, one action less)."""
    for name in iam.list_role_policies(RoleName=role)["PolicyNames"]:
        document = iam.get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
        kept = []
        for statement in document["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            if [a for a in actions if a != action]:
                kept.append({**statement, "Action": [a for a in actions if a != action]})
        iam.put_role_policy(
            RoleName=role, PolicyName=name, PolicyDocument=json.dumps({**document, "Statement": kept})
        )


@pytest.mark.parametrize("removed", [None, "states:StartExecution"])
def test_the_starter_runs_with_its_synthesized_role_under_iam_enforcement(
    assembly: CloudAssembly, packages: Path, removed: str | None
) -> None:
    """The starter's role and its policies made in moto from the template, assumed, enforced: its stream
    reads and its StartExecution pass; with `states:StartExecution` taken out of its policy, the
    invocation fails with AccessDenied naming that action (gco.local.assembly.iam says what moto's
    evaluation leaves out)."""
    starter, mapping, table = starter_of(assembly)
    stack = assembly.stack("gco-global")
    with MotoServer() as server:
        admin = admin_of(server)
        bootstrap = credentials_environment("testing", "testing", None)
        dynamodb = client_as("dynamodb", server.url, bootstrap)
        stream_arn = init_table(dynamodb, table)[1]["LatestStreamArn"]
        client_as("stepfunctions", server.url, bootstrap).create_state_machine(
            name="gco-rollout",
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
            roleArn="arn:aws:iam::123456789012:role/gco-rollout",
        )
        iam = client_as("iam", server.url, bootstrap)
        role_arn = make_role(iam, stack, starter)
        if removed is not None:
            without_action(iam, role_arn.rsplit("/", 1)[1], removed)
        role = assume(client_as("sts", server.url, bootstrap), role_arn, "gco-rollout-starter")
        server.enforce_iam()

        resolver = Resolver(region=HOME, stack=stack.name)
        environment = {
            **{k: str(v) for k, v in resolver.resolve(starter.environment, "Environment").items()},
            **role,
            "AWS_ENDPOINT_URL": server.url,
        }
        runtime = FunctionRuntime.for_runtime(starter.runtime, packages)
        with AssetFunction(starter, runtime, environment=environment, region=HOME) as function:
            poller = StreamPoller(
                client_as(
                    "dynamodbstreams", server.url, role
                ),  # Lambda reads the stream as the function's role
                stream_arn,
                lambda event, _context: function.invoke(event),
                region=HOME,
                batch_size=mapping.batch_size,
                filters=mapping.filters,
            )
            store = EndpointStore(client_as("dynamodb", server.url, admin), table)
            store.create("llama", {"image": IMAGE}, [EAST])
            record = store.get("llama")
            assert record is not None
            new_image: dict[str, Any] = {
                "endpoint_name": "llama",
                "desired_state": "deploying",
                "lifecycle_id": record.lifecycle_id,
                REQUEST_ATTRIBUTE: {"image": "vllm/vllm-openai:v0.6.4"},
            }
            event = {"Records": [{"eventName": "MODIFY", "dynamodb": {"NewImage": to_item(new_image)}}]}
            states = client_as("stepfunctions", server.url, admin)
            if removed is None:
                poller.poll_once()  # the role reads the stream; the filter drops the create
                assert function.invoke(event)["started"]
                assert len(executions(states)) == 1
            else:
                with pytest.raises(FunctionInvokeError, match=rf"AccessDenied.*{removed}"):
                    function.invoke(event)
                assert executions(states) == []
