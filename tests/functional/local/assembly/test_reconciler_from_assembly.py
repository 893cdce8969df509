"""The Regional reconciler's stream function run from its synthesized asset, as Lambda and EKS run it.

From the home Region's Regional stack: the stream function (asset, handler, environment, timeout,
reserved concurrency), its event source mapping, its role with every policy the template attaches
(made in the moto server, assumed, moto's IAM enforcement on) and the cluster's access entries. The
function finds its cluster with `eks:DescribeCluster` (a stand-in answering with the stand-in API
server's URL) and authenticates with an EKS token, a presigned STS GetCallerIdentity that the stand-in
API server verifies against the moto server and maps through the access entries to the reconciler's
grant (gco.local.assembly.eks). A table write reaches the function through the mapping and ends as
objects in the cluster and the Region's status in the record, and its delete ends with the objects
gone and the record purged; with `dynamodb:UpdateItem` taken out of
the role's policy, the status write fails with AccessDenied naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from gco.endpoints import EndpointStore, init_table, operations
from gco.local.assembly import CloudAssembly, functions, mappings, schedules
from gco.local.assembly.eks import DescribeClusterStandIn, IamTokens, access_entries, moto_sessions
from gco.local.assembly.iam import assume, make_role, role_arns, role_id
from gco.local.assembly.invoke import AssetFunction, FunctionRuntime, credentials_environment
from gco.local.assembly.reader import StackArtifact
from gco.local.assembly.resolve import ACCOUNT, Resolver
from gco.local.assembly.template import scheduled_event
from gco.local.moto.motoserver import MotoServer
from gco.local.region.poller import StreamPoller
from gco.local.standin import StandInKubeAPI
from gco.processes.cpython import find_cpython
from gco.reconcile.access import RECONCILER_GRANT
from gco.reconcile.heartbeat import Heartbeat, SsmParameters, read_heartbeat
from gco.reconcile.objects import DEPLOYMENT
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
STACK = f"gco-regional-{HOME}"
NAMESPACE = "gco-inference"


def client_as(service: str, url: str, credentials: dict[str, str]) -> Any:
    return botocore.session.Session().create_client(
        service,
        region_name=HOME,
        endpoint_url=url,
        aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=credentials.get("AWS_SESSION_TOKEN"),
    )


def without_action(iam: Any, role: str, action: str) -> None:
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


def sweep_from_its_schedule(
    reader: dict[str, str],
    stack: StackArtifact,
    endpoints: dict[str, str],
    credentials: dict[str, str],
    runtime: FunctionRuntime,
    log: Path,
) -> Heartbeat | None:
    """Invoke the function the stack's schedule targets with EventBridge's scheduled event, from its
    asset, with its template's environment and as its role; the heartbeat it wrote to its Region's SSM."""
    (rule,) = schedules(stack).values()
    assert rule.every_s == 300 and rule.retry_attempts == 2
    sweep = functions(stack)[rule.targets[0]]
    assert sweep.handler == "sweep.handler" and sweep.reserved_concurrency == 1  # one sweep at a time
    environment = {
        k: str(v) for k, v in Resolver(region=HOME, stack=stack.name).resolve(sweep.environment).items()
    }
    variables = {**environment, **credentials, **endpoints}
    event = scheduled_event(rule, HOME, ACCOUNT, "2026-12-07T00:00:00Z")
    with (
        log.open("w") as written,
        AssetFunction(sweep, runtime, environment=variables, region=HOME, log=written) as running,
    ):
        running.invoke(event)
    # read as the operator: the sweep's role may write its heartbeat, not read it (least privilege)
    ssm = client_as("ssm", endpoints["AWS_ENDPOINT_URL"], reader)
    return read_heartbeat(SsmParameters(ssm), environment["INFERENCE_ENDPOINTS_TABLE_NAME"], HOME)


@pytest.mark.parametrize("removed", [None, "dynamodb:UpdateItem"])
def test_a_table_write_is_reconciled_by_the_deployed_function_under_its_role(
    removed: str | None, tmp_path: Path
) -> None:
    assembly = CloudAssembly.open(synthesize_deployed())
    stack = assembly.stack(STACK)
    (function,) = [f for f in functions(stack).values() if f.handler == "reconciler.handler"]
    (mapping,) = [m for m in mappings(stack).values() if m.function == function.logical_id]
    environment = {
        k: str(v) for k, v in Resolver(region=HOME, stack=STACK).resolve(function.environment).items()
    }
    cluster, table = environment["EKS_CLUSTER_NAME"], environment["INFERENCE_ENDPOINTS_TABLE_NAME"]
    with MotoServer() as server:
        bootstrap = credentials_environment("testing", "testing", None)
        iam = client_as("iam", server.url, bootstrap)
        iam.create_user(UserName="operator")
        everything = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
        }
        iam.put_user_policy(UserName="operator", PolicyName="all", PolicyDocument=json.dumps(everything))
        key = iam.create_access_key(UserName="operator")["AccessKey"]
        operator = credentials_environment(key["AccessKeyId"], key["SecretAccessKey"], None)
        stream_arn = init_table(client_as("dynamodb", server.url, bootstrap), table)[1]["LatestStreamArn"]
        role_arn = make_role(iam, stack, function)
        if removed is not None:
            without_action(iam, role_arn.rsplit("/", 1)[1], removed)
        role = assume(client_as("sts", server.url, bootstrap), role_arn, "gco-reconciler")
        (rule,) = schedules(stack).values()
        sweep = functions(stack)[rule.targets[0]]
        sweep_role = role
        if role_id(sweep) != role_id(function):
            sweep_arn = make_role(iam, stack, sweep)
            sweep_role = assume(client_as("sts", server.url, bootstrap), sweep_arn, "gco-sweep")
        server.enforce_iam()

        entries = access_entries(stack, Resolver(region=HOME, stack=STACK, attributes=role_arns(stack)))
        grants = {RECONCILER_GRANT.group: RECONCILER_GRANT}
        tokens = IamTokens(server.url, cluster, entries, grants, moto_sessions(server.url))
        log = tmp_path / "function.log"
        with (
            StandInKubeAPI(authenticator=tokens, token="only-eks-tokens-here") as api,
            DescribeClusterStandIn({cluster: api.url}) as eks,
            log.open("w") as log_file,
        ):
            variables = {
                **environment,
                **role,
                "AWS_ENDPOINT_URL": server.url,
                "AWS_ENDPOINT_URL_EKS": eks.url,
            }
            runtime = FunctionRuntime.for_runtime(function.runtime, runtime_sdk(tmp_path / "sdk"))
            with AssetFunction(
                function, runtime, environment=variables, region=HOME, log=log_file
            ) as running:
                poller = StreamPoller(
                    client_as("dynamodbstreams", server.url, role),
                    stream_arn,
                    lambda event, _context: running.invoke(event),
                    region=HOME,
                    batch_size=mapping.batch_size,
                    parallelization=mapping.parallelization_factor,
                    filters=mapping.filters,
                )
                store = EndpointStore(client_as("dynamodb", server.url, operator), table)
                store.create("llama", {"image": IMAGE}, [HOME])
                poller.poll_once()
                record = store.get("llama")
                assert record is not None
                logged = log.read_text()
                if removed is None:
                    deployed = api.store.get(DEPLOYMENT, NAMESPACE, "llama")
                    endpoints = {"AWS_ENDPOINT_URL": server.url, "AWS_ENDPOINT_URL_EKS": eks.url}
                    log_of_sweep = tmp_path / "sweep.log"
                    beat = sweep_from_its_schedule(
                        operator, stack, endpoints, sweep_role, runtime, log_of_sweep
                    )
                    assert beat is not None and beat.every_s == int(environment["GCO_SWEEP_SECONDS"])
                    # deleted: the function removes the objects, acknowledges, and the record is purged
                    operations.delete(store, "llama", expected_lifecycle_id=record.lifecycle_id)
                    for _ in range(10):
                        if store.get("llama") is None:
                            break
                        poller.poll_once()
                    assert store.get("llama") is None, log.read_text()[-2000:]
                    assert api.store.get(DEPLOYMENT, NAMESPACE, "llama") is None
        if removed is None:
            assert deployed is not None, (tokens.refusals, logged[-2000:])
            assert record.region_status[HOME].state in ("creating", "running"), logged[-3000:]
            assert tokens.refusals == []
        else:
            assert HOME not in record.region_status
            assert "AccessDenied" in logged and removed in logged
