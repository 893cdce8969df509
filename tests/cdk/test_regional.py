"""Regional stack: VPC, EKS and node groups, the reconciler on the stream, sweep, DLQ, alarms."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Capture, Match

from gco.deployment.kubernetes import DEFAULT_KUBERNETES_VERSION
from gco.reconcile.failures import METRICS_NAMESPACE, SWEEP_SERVICE, UNREADABLE_METRIC
from gco.reconcile.heartbeat import parameter_name
from tests.cdk.conftest import HOME, OTHER


def test_vpc_private_subnets_flow_logs(regional_template: Any) -> None:
    regional_template.resource_count_is("AWS::EC2::VPC", 1)
    # The second Region's network by default: the base's second /16, never the home Region's.
    regional_template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.65.0.0/16"})
    regional_template.resource_count_is("AWS::EC2::NatGateway", 1)
    regional_template.has_resource_properties("AWS::EC2::Subnet", {"MapPublicIpOnLaunch": False})
    regional_template.has_resource_properties(
        "AWS::EC2::FlowLog",
        {"ResourceType": "VPC", "TrafficType": "ALL", "LogDestinationType": "cloud-watch-logs"},
    )
    # The one NAT gateway's subnet is the only one routed to the internet gateway.
    regional_template.resource_count_is("AWS::EC2::Route", 3)


def test_eks_cluster_private_logged_encrypted(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "Name": f"gco-{OTHER}",
            "Version": DEFAULT_KUBERNETES_VERSION,
            "ResourcesVpcConfig": Match.object_like(
                {"EndpointPublicAccess": False, "EndpointPrivateAccess": True}
            ),
            "EncryptionConfig": [Match.object_like({"Resources": ["secrets"]})],
            "Logging": {
                "ClusterLogging": {"EnabledTypes": Match.array_with([{"Type": "api"}, {"Type": "audit"}])}
            },
            "AccessConfig": Match.object_like({"AuthenticationMode": Match.string_like_regexp("API")}),
        },
    )


def test_gpu_node_group_tainted_labelled_sized(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::EKS::Nodegroup",
        {
            "NodegroupName": f"gco-{OTHER}-gpu-l40s-nvme",
            "AmiType": "AL2023_x86_64_NVIDIA",
            "InstanceTypes": ["g6e.xlarge", "g6e.2xlarge"],
            "CapacityType": "ON_DEMAND",
            "ScalingConfig": {"MinSize": 0, "MaxSize": 4, "DesiredSize": 0},
            "Labels": {"gco.io/pool": "gpu", "gco.io/gpu-type": "l40s", "nvidia.com/gpu.present": "true"},
            "Taints": [{"Effect": "NO_SCHEDULE", "Key": "nvidia.com/gpu", "Value": "true"}],
        },
    )


def test_system_node_group(regional_template: Any) -> None:
    regional_template.resource_count_is("AWS::EKS::Nodegroup", 3)  # system, l40s, l4
    regional_template.has_resource_properties(
        "AWS::EKS::Nodegroup",
        {
            "NodegroupName": f"gco-{OTHER}-system",
            "AmiType": "AL2023_x86_64_STANDARD",
            "ScalingConfig": {"MinSize": 2, "MaxSize": 4, "DesiredSize": 2},
            "Taints": Match.absent(),
        },
    )


def test_functions_in_vpc_traced_named_with_environment(regional_template: Any) -> None:
    for kind, handler in (("stream", "reconciler.handler"), ("sweep", "sweep.handler")):
        regional_template.has_resource_properties(
            "AWS::Lambda::Function",
            {
                "FunctionName": f"gco-reconciler-{OTHER}-{kind}",
                "Handler": handler,
                "Runtime": "python3.13",
                "TracingConfig": {"Mode": "Active"},
                "VpcConfig": Match.object_like({"SubnetIds": Match.any_value()}),
                "DeadLetterConfig": {"TargetArn": Match.any_value()},
                "Environment": {
                    "Variables": Match.object_like(
                        {
                            "EKS_CLUSTER_NAME": f"gco-{OTHER}",
                            "RECONCILER_REGION": OTHER,
                            "DYNAMODB_REGION": HOME,
                            "INFERENCE_ENDPOINTS_TABLE_NAME": "gco-inference-endpoints",
                            "GCO_SWEEP_SECONDS": "300",  # the schedule's, written into the heartbeat
                            "PYDANTIC_DISABLE_PLUGINS": "__all__",
                        }
                    )
                },
                "LoggingConfig": Match.object_like({"LogFormat": "JSON"}),
            },
        )


def test_stream_mapping_partial_failures_bisect_bounded_dlq(regional_template: Any) -> None:
    source, destination = Capture(), Capture()
    regional_template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "EventSourceArn": {"Fn::GetAtt": [source, "StreamArn"]},
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BisectBatchOnFunctionError": True,
            "MaximumRetryAttempts": 5,
            "MaximumRecordAgeInSeconds": 3600,
            "StartingPosition": "TRIM_HORIZON",
            "DestinationConfig": {"OnFailure": {"Destination": {"Fn::GetAtt": [destination, "Arn"]}}},
        },
    )
    # The Region's own replica stream, read at deploy time; failures to the Region's DLQ.
    assert source.as_string().startswith("StreamArn")
    assert destination.as_string().startswith("DeadLetters")
    regional_template.has_resource_properties(
        "Custom::GcoStreamArn", {"TableName": "gco-inference-endpoints"}
    )


def test_stream_mapping_sized_from_the_cost_model(regional_template: Any) -> None:
    from gco.reconcile.throughput import STREAM_RESERVED_CONCURRENCY, STREAM_SETTINGS

    regional_template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "BatchSize": STREAM_SETTINGS.batch_size,
            "ParallelizationFactor": STREAM_SETTINGS.parallelization_factor,
            "MaximumBatchingWindowInSeconds": STREAM_SETTINGS.batching_window_seconds,
        },
    )
    # Every batch of a shard can run at once: reserved concurrency covers the factor.
    assert STREAM_SETTINGS.parallelization_factor <= STREAM_RESERVED_CONCURRENCY
    regional_template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "FunctionName": f"gco-reconciler-{OTHER}-stream",
            "ReservedConcurrentExecutions": STREAM_RESERVED_CONCURRENCY,
        },
    )


def test_dead_letter_queue_encrypted_tls_only(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::SQS::Queue", {"QueueName": f"gco-reconciler-{OTHER}-dlq", "KmsMasterKeyId": Match.any_value()}
    )
    regional_template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            }
        },
    )


def test_sweep_schedule(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::Events::Rule",
        {
            "Name": f"gco-reconciler-{OTHER}-sweep",
            "ScheduleExpression": "rate(5 minutes)",
            "Targets": [
                Match.object_like({"DeadLetterConfig": Match.any_value(), "RetryPolicy": Match.any_value()})
            ],
        },
    )


def test_alarms_on_dlq_iterator_age_errors(regional_template: Any) -> None:
    # The reconciler's five, the front door's and the global API's 5xx and the endpoints not ready
    # (test_dashboards.py), and the global authorizer's failures and errors
    # (tests/cdk/test_global_address.py).
    regional_template.resource_count_is("AWS::CloudWatch::Alarm", 10)
    for name, metric in (
        ("DlqDepth", "ApproximateNumberOfMessagesVisible"),
        ("IteratorAge", "IteratorAge"),
        ("StreamErrors", "Errors"),
        ("SweepErrors", "Errors"),
        ("UnreadableRecords", UNREADABLE_METRIC),
    ):
        regional_template.has_resource_properties(
            "AWS::CloudWatch::Alarm",
            {
                "AlarmName": f"gco-reconciler-{OTHER}-{name}",
                "MetricName": metric,
                "AlarmActions": [Match.any_value()],
            },
        )
    regional_template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "MetricName": UNREADABLE_METRIC,
            "Namespace": METRICS_NAMESPACE,
            "Dimensions": [{"Name": "service", "Value": SWEEP_SERVICE}],
        },
    )
    regional_template.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})


def test_reconciler_policy_names_home_table_and_cluster(regional_template: Any) -> None:
    policy = Capture()
    regional_template.has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {"ManagedPolicyName": f"gco-reconciler-{OTHER}-{OTHER}", "PolicyDocument": policy},
    )
    statements = {s["Sid"]: s for s in policy.as_object()["Statement"]}
    assert f":dynamodb:{HOME}:" in str(statements["HomeTable"]["Resource"])
    assert "gco-inference-endpoints" in str(statements["HomeTable"]["Resource"])
    assert statements["OwnCluster"]["Resource"]["Fn::GetAtt"][1] == "Arn"
    assert statements["OwnStream"]["Resource"]["Fn::GetAtt"][1] == "StreamArn"
    assert statements["TableKeysViaDynamoDB"]["Condition"]["StringEquals"]["kms:ViaService"] == [
        f"dynamodb.{HOME}.amazonaws.com",
        f"dynamodb.{OTHER}.amazonaws.com",
    ]


def test_reconciler_may_write_exactly_its_own_heartbeat_parameter(regional_template: Any) -> None:
    policy = Capture()
    regional_template.has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {"ManagedPolicyName": f"gco-reconciler-{OTHER}-{OTHER}", "PolicyDocument": policy},
    )
    statements = {s["Sid"]: s for s in policy.as_object()["Statement"]}
    heartbeat = statements["Heartbeat"]
    assert (heartbeat["Effect"], heartbeat["Action"]) == ("Allow", "ssm:PutParameter")
    parts = heartbeat["Resource"]["Fn::Join"][1]
    assert parts[0] == "arn:" and parts[1] == {"Ref": "AWS::Partition"}
    assert parts[2:] == [
        f":ssm:{OTHER}:",
        {"Ref": "AWS::AccountId"},
        ":parameter" + parameter_name("gco-inference-endpoints", OTHER),
    ]
    ssm_actions = [
        action
        for statement in policy.as_object()["Statement"]
        for action in ([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"])
        if action.startswith("ssm:")
    ]
    assert ssm_actions == ["ssm:PutParameter"]


def test_home_region_reconciler_uses_the_home_stream(home_regional_template: Any) -> None:
    home_regional_template.has_resource_properties(
        "AWS::Lambda::Function", {"FunctionName": f"gco-reconciler-{HOME}-stream"}
    )
    home_regional_template.resource_count_is("AWS::Lambda::EventSourceMapping", 1)
