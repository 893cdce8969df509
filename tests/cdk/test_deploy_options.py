"""The deploy options of `cdk.json` as the templates carry them: capacity types with a priority, the
network (CIDRs, NAT per zone, VPC endpoints), alarm subscriptions, and the charts' ordering."""

from __future__ import annotations

import functools
import json
import tempfile
from typing import Any

import yaml
from aws_cdk.assertions import Match, Template

from gco.deployment.capacity import capacity_kinds
from stacks.config import NodeGroupConfig, parse_config
from stacks.constructs.gpu_nodes import gpu_group_names, priority_expander
from tests.cdk.conftest import HOME, OTHER, Synthesized
from tests.cdk.synth_cache import cdk_json_config

TOPIC = f"arn:aws:sns:{OTHER}:111122223333:oncall"
ELSEWHERE_TOPIC = "arn:aws:sns:eu-west-1:111122223333:elsewhere"
ZONES = [f"{OTHER}b", f"{OTHER}c"]
PREBUILT = "111122223333.dkr.ecr.us-east-1.amazonaws.com/team/gco-runner@sha256:" + "b" * 64


@functools.cache
def options_app() -> Any:
    """One app with every non-default option (no nag: the whole app's nag run covers the defaults)."""
    from aws_cdk import App

    from stacks.app import build_app

    raw = {
        **cdk_json_config(),
        "gpu_nodes": {
            "instance_types": ["g6e.xlarge", "g6e.2xlarge", "g5.xlarge"],
            "min_size": 0,
            "max_size": 3,
            "desired_size": 0,
            "capacity_type": "both",
            "capacity_priority": "spot",
        },
        "network": {
            "vpc_cidrs": {OTHER: "10.80.0.0/16"},
            "nat_per_zone": True,
            "vpc_endpoints": False,
            "availability_zones": {OTHER: ZONES},
        },
        "alarms": {"emails": ["oncall@example.com"], "topic_arns": [TOPIC, ELSEWHERE_TOPIC]},
        "api_gateway_account": "existing",
        "runner": {
            **cdk_json_config()["runner"],
            "fallback_instance_types": ["g6.2xlarge"],
            "image_uri": PREBUILT,
        },
    }
    return build_app(parse_config(raw), app=App(outdir=tempfile.mkdtemp(prefix="gco-options-")), nag=False)


def other_template() -> Any:
    return Template.from_stack(options_app().regional[OTHER])


def helm_values(template: dict[str, Any], chart: str) -> dict[str, Any]:
    found = next(
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Chart"] == chart
    )
    values: dict[str, Any] = json.loads(found["Values"])
    return values


def test_both_capacity_types_make_a_spot_and_an_on_demand_group_per_model() -> None:
    template = other_template()
    template.resource_count_is("AWS::EKS::Nodegroup", 5)  # system + (l40s, a10g) x (spot, on-demand)
    for model, types in (("l40s", ["g6e.xlarge", "g6e.2xlarge"]), ("a10g", ["g5.xlarge"])):
        for kind, capacity in (("spot", "SPOT"), ("on-demand", "ON_DEMAND")):
            template.has_resource_properties(
                "AWS::EKS::Nodegroup",
                {
                    "NodegroupName": f"gco-{OTHER}-gpu-{model}-{kind}-nvme",
                    "InstanceTypes": types,
                    "CapacityType": capacity,
                    "ScalingConfig": {"MinSize": 0, "MaxSize": 3, "DesiredSize": 0},
                    "Labels": Match.object_like({"gco.io/gpu-type": model}),
                },
            )


def test_the_autoscaler_prefers_the_priority_kind_and_falls_to_the_other() -> None:
    values = helm_values(other_template().to_json(), "cluster-autoscaler")
    assert values["extraArgs"]["expander"] == "priority,least-waste"
    priorities = yaml.safe_load(values["expanderPriorities"])
    assert priorities[20] == [f".*gco-{OTHER}-gpu-l40s-spot-nvme.*", f".*gco-{OTHER}-gpu-a10g-spot-nvme.*"]
    assert priorities[10] == [
        f".*gco-{OTHER}-gpu-l40s-on-demand-nvme.*",
        f".*gco-{OTHER}-gpu-a10g-on-demand-nvme.*",
    ]
    assert priorities[1] == [".*"]


def test_priority_expander_and_group_names_are_pure() -> None:
    group = NodeGroupConfig(
        instance_types=["g6e.xlarge"],
        min_size=0,
        max_size=1,
        desired_size=0,
        capacity_type="both",
        capacity_priority="on-demand",
    )
    assert capacity_kinds(group) == ["on-demand", "spot"]
    assert priority_expander("c", group) == {
        1: [".*"],
        10: [".*c-gpu-l40s-spot-nvme.*"],
        20: [".*c-gpu-l40s-on-demand-nvme.*"],
    }
    single = group.model_copy(update={"capacity_type": "spot"})
    assert gpu_group_names("c", single) == {("l40s", "spot"): "c-gpu-l40s-nvme"}
    # A type without instance store keeps the pods' storage on its EBS root volume, and says so.
    root = single.model_copy(update={"instance_types": ["p3.2xlarge"]})
    assert gpu_group_names("c", root) == {("v100", "spot"): "c-gpu-v100-ebs"}


def test_network_cidr_nat_per_zone_and_no_endpoints() -> None:
    template = other_template()
    template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": "10.80.0.0/16"})
    template.resource_count_is("AWS::EC2::NatGateway", 2)
    template.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    # The zones the config names, written as names (not Fn::GetAZs), one public, one private and one
    # load balancer subnet each.
    subnets = template.find_resources("AWS::EC2::Subnet")
    assert sorted(s["Properties"]["AvailabilityZone"] for s in subnets.values()) == sorted(ZONES * 3)
    # The home Region keeps its default network: the base's first /16.
    Template.from_stack(options_app().regional[HOME]).has_resource_properties(
        "AWS::EC2::VPC", {"CidrBlock": "10.64.0.0/16"}
    )


def test_alarms_mail_and_notify_an_existing_topic_of_their_region() -> None:
    template = other_template()
    template.has_resource_properties(
        "AWS::SNS::Subscription", {"Protocol": "email", "Endpoint": "oncall@example.com"}
    )
    alarms = template.find_resources("AWS::CloudWatch::Alarm")
    assert alarms
    for alarm in alarms.values():
        actions = alarm["Properties"]["AlarmActions"]
        assert TOPIC in actions and ELSEWHERE_TOPIC not in actions
        assert len(actions) == 2  # the stack's own topic and the existing one


def test_default_network_has_endpoints_and_one_nat(synthesized: Synthesized) -> None:
    template = synthesized.template(f"gco-regional-{OTHER}")
    template.resource_count_is("AWS::EC2::NatGateway", 1)
    for service in ("ecr.api", "ecr.dkr", "sts", "logs"):
        template.has_resource_properties(
            "AWS::EC2::VPCEndpoint",
            {
                "VpcEndpointType": "Interface",
                "PrivateDnsEnabled": True,
                "ServiceName": f"com.amazonaws.{OTHER}.{service}",
            },
        )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "GroupDescription": "VPC interface endpoints: HTTPS from this VPC",
            "SecurityGroupIngress": [
                Match.object_like(
                    {"CidrIp": "10.65.0.0/16", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp"}
                )
            ],
        },
    )
    for service in ("s3", "dynamodb"):
        template.has_resource_properties(
            "AWS::EC2::VPCEndpoint",
            {
                "VpcEndpointType": "Gateway",
                "ServiceName": Match.object_like(
                    {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, f".{service}"]]}
                ),
            },
        )


def test_every_chart_waits_with_a_timeout_after_the_system_nodes(synthesized: Synthesized) -> None:
    template = synthesized.template_json(f"gco-regional-{OTHER}")
    system = next(
        logical_id
        for logical_id, r in template["Resources"].items()
        if r["Type"] == "AWS::EKS::Nodegroup" and r["Properties"]["NodegroupName"] == f"gco-{OTHER}-system"
    )
    charts = {i: r for i, r in template["Resources"].items() if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    assert len(charts) >= 3
    for logical_id, chart in charts.items():
        assert chart["Properties"]["Wait"] is True, logical_id
        assert chart["Properties"]["Timeout"] == "600s", logical_id
        assert system in chart.get("DependsOn", []), logical_id


def runner_states() -> dict[str, Any]:
    from tests.cdk.synth_cache import state_machine_definition

    template = dict(Template.from_stack(options_app().global_stack).to_json())
    states: dict[str, Any] = state_machine_definition(template, substitute={"Partition": "aws"})["States"]
    return states


def test_the_runner_falls_through_zones_then_instance_types() -> None:
    states = runner_states()
    order = ["Launch", "LaunchZone2", "LaunchType2", "LaunchZone2Type2"]
    for state, following in zip(order, [*order[1:], "LaunchFailed"], strict=True):
        assert states[state]["Catch"][0]["Next"] == following
        assert states[state]["Next"] == "AwaitRunner"
    assert [states[s]["Parameters"]["InstanceType"] for s in order] == ["g6e.xlarge"] * 2 + ["g6.2xlarge"] * 2
    assert states["LaunchZone2Type2"]["Parameters"]["LaunchTemplate"]["LaunchTemplateName"] == "gco-runner-2"


def test_each_launch_has_its_own_idempotency_token() -> None:
    states = runner_states()
    for state in ("Launch", "LaunchZone2Type2"):
        token = states[state]["Parameters"]["ClientToken.$"]
        assert token == f"States.Hash(States.Format('{{}}/{state}', $$.Execution.Name), 'SHA-1')"


def test_the_workflow_may_launch_only_the_configured_types() -> None:
    template = Template.from_stack(options_app().global_stack)
    template.has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Sid": "LaunchTaggedRunner",
                                "Condition": {
                                    "StringEquals": Match.object_like(
                                        {"ec2:InstanceType": ["g6e.xlarge", "g6.2xlarge"]}
                                    )
                                },
                            }
                        )
                    ]
                )
            }
        },
    )


def test_a_prebuilt_runner_image_is_pulled_not_built() -> None:
    gco = options_app()
    assert gco.runner.image_uri == PREBUILT
    assert not [a for a in gco.app.node.find_all() if type(a).__name__ == "DockerImageAsset"]
    template = Template.from_stack(gco.runner)
    statements = [
        statement
        for policy in template.find_resources("AWS::IAM::ManagedPolicy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Sid") == "PullRunnerImage"
    ]
    assert len(statements) == 1
    assert json.dumps(statements[0]["Resource"]).endswith(
        ':ecr:us-east-1:111122223333:repository/team/gco-runner"]]}'
    )
    user_data = json.dumps(template.find_resources("AWS::EC2::LaunchTemplate"))
    assert f"docker pull {PREBUILT}" in user_data
