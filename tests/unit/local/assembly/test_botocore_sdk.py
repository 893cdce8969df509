"""The AWS SDK integrations' calls through botocore (gco.local.assembly.states.BotocoreSdk), against
stubbed clients: the camelCase action to the operation, PascalCase parameters to the API's members,
the response as Step Functions' JSON, and a service's errors named as Step Functions names them."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from gco.local.assembly.states import BotocoreSdk
from gco.local.errors import AssemblyError, StateError

# Botocore's name of each integration's service (the Resource writes `sfn`, botocore `stepfunctions`).
BOTOCORE = {"ec2": "ec2", "s3": "s3", "sfn": "stepfunctions", "glue": "glue"}
LAUNCHED = datetime.datetime(2024, 1, 2, 3, 4, 5, 678_901, tzinfo=datetime.UTC)


@pytest.fixture
def stubs() -> Iterator[dict[str, Stubber]]:
    session = botocore.session.get_session()
    clients = {
        service: session.create_client(
            name, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        for service, name in BOTOCORE.items()
    }
    stubbers = {service: Stubber(client) for service, client in clients.items()}
    for stubber in stubbers.values():
        stubber.activate()
    yield stubbers
    for stubber in stubbers.values():
        stubber.assert_no_pending_responses()
        stubber.deactivate()


def sdk_of(stubs: dict[str, Stubber]) -> BotocoreSdk:
    return BotocoreSdk(lambda service: stubs[service].client)


def test_an_action_calls_its_operation_and_answers_json(stubs: dict[str, Stubber]) -> None:
    request = {"LaunchTemplate": {"LaunchTemplateName": "gco-runner", "Version": "$Latest"},
               "MinCount": 1, "MaxCount": 1}  # fmt: skip
    stubs["ec2"].add_response(
        "run_instances",
        {"Instances": [{"InstanceId": "i-1", "LaunchTime": LAUNCHED}], "ReservationId": "r-1"},
        request,
    )
    result = sdk_of(stubs)("ec2", "runInstances", request)
    assert result == {
        "Instances": [{"InstanceId": "i-1", "LaunchTime": "2024-01-02T03:04:05.678Z"}],
        "ReservationId": "r-1",
    }  # no ResponseMetadata; the time as Step Functions writes one


def test_camel_case_members_are_written_in_pascal_case_both_ways(stubs: dict[str, Stubber]) -> None:
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:m"
    stubs["sfn"].add_response(
        "start_execution",
        {"executionArn": f"{machine.replace('stateMachine', 'execution')}:e", "startDate": LAUNCHED},
        {"stateMachineArn": machine, "input": "{}"},
    )
    result = sdk_of(stubs)("sfn", "startExecution", {"StateMachineArn": machine, "Input": "{}"})
    assert result == {
        "ExecutionArn": "arn:aws:states:us-east-1:123456789012:execution:m:e",
        "StartDate": "2024-01-02T03:04:05.678Z",
    }


@pytest.mark.parametrize(
    ("service", "operation", "action", "code", "status", "error"),
    [
        # EC2's model names no error: every one is the service's own exception.
        (
            "ec2",
            "terminate_instances",
            "terminateInstances",
            "InvalidInstanceID.NotFound",
            400,
            "Ec2.Ec2Exception",
        ),
        ("ec2", "terminate_instances", "terminateInstances", "RequestLimitExceeded", 503, "Ec2.Ec2Exception"),
        # S3's model names NoSuchBucket: the Exception suffix is added, as the guide says.
        ("s3", "put_object", "putObject", "NoSuchBucket", 404, "S3.NoSuchBucketException"),
        ("s3", "put_object", "putObject", "SlowDown", 503, "S3.S3Exception"),
    ],
)
def test_a_service_error_is_named_with_the_prefix_and_the_exception_suffix(
    stubs: dict[str, Stubber], service: str, operation: str, action: str, code: str, status: int, error: str
) -> None:
    stubs[service].add_client_error(
        operation, service_error_code=code, service_message="it failed", http_status_code=status
    )
    request = {"InstanceIds": ["i-1"]} if service == "ec2" else {"Bucket": "b", "Key": "k", "Body": "x"}
    with pytest.raises(StateError) as failed:
        sdk_of(stubs)(service, action, request)
    prefix = error.split(".", maxsplit=1)[0]
    assert failed.value.error == error
    assert failed.value.cause.startswith(f"it failed (Service: {prefix}, Status Code: {status}, Request ID: ")


@pytest.mark.parametrize(
    ("service", "action", "request_", "message"),
    [
        ("ec2", "RunInstances", {}, "camelCase"),
        ("ec2", "launchRockets", {}, "no such operation"),
        ("glue", "listJobs", {}, "exception prefix"),
    ],
)
def test_what_step_functions_would_refuse_is_refused(
    stubs: dict[str, Stubber], service: str, action: str, request_: dict[str, Any], message: str
) -> None:
    with pytest.raises(AssemblyError, match=message):
        sdk_of(stubs)(service, action, request_)


def test_parameters_that_do_not_fit_the_operation_are_refused() -> None:
    """Botocore checks the request before sending it (no stub: a stubbed client is asked first)."""
    client = botocore.session.get_session().create_client(
        "ec2",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # never reached
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    with pytest.raises(AssemblyError, match="aws-sdk:ec2:terminateInstances: Parameter validation failed"):
        BotocoreSdk(lambda _service: client)("ec2", "terminateInstances", {"Instances": ["i-1"]})
