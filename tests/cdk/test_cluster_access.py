"""The Regional stack's ways into the cluster and the way in for callers: the reconciler's and the GPU
runner's access entries and RBAC (held against the grants the stand-in enforces), the load balancer
controller and its role, the IAM-authorized front door and its outputs."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from gco.deployment.charts import CHART_RELEASES
from gco.front_door import GENERATION_TIMEOUT_S
from gco.reconcile.access import RECONCILER_GRANT, RECONCILER_GROUP, RUNNER_GRANT, RUNNER_GROUP, Grant
from gco.reconcile.objects import KINDS, SYSTEM_KINDS
from gco.reconcile.proxy.proxy_settings import PROXY_SETTINGS_ENV, ProxySettings
from gco.reconcile.proxy_forwarding import Forwarding
from stacks.constructs.cluster_access import cluster_objects
from stacks.constructs.front_door import STAGE
from tests.cdk.conftest import HOME, OTHER, Synthesized, iam_statements
from tests.cdk.synth_cache import GLOBAL_ADDRESS

PRUNE = "aws.cdk.eks/prune-"


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r["Properties"] for k, r in template["Resources"].items() if r["Type"] == kind}


def manifests(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every object the stack applies through the kubectl provider; tokens become "TOKEN"."""
    found = []
    for props in resources(template, "Custom::AWSCDK-EKS-KubernetesResource").values():
        body = props["Manifest"]
        if isinstance(body, dict):
            body = "".join(part if isinstance(part, str) else "TOKEN" for part in body["Fn::Join"][1])
        for obj in json.loads(body):
            labels = obj["metadata"].get("labels") or {}
            for key in [key for key in labels if key.startswith(PRUNE)]:
                del labels[key]  # CDK's own pruning label
            found.append(obj)
    return found


def rbac_allows(objects: list[dict[str, Any]], group: str, verb: str, api_group: str, resource: str,
                namespace: str | None, name: str | None) -> bool:  # fmt: skip
    """Kubernetes RBAC over the synthesized objects: the group's bindings, their roles' rules."""
    roles = {
        (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o
        for o in objects
        if o["kind"] in ("Role", "ClusterRole")
    }
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if not any(s["kind"] == "Group" and s["name"] == group for s in binding["subjects"]):
            continue
        scope = binding["metadata"].get("namespace")
        if binding["kind"] == "RoleBinding" and scope != namespace:
            continue
        ref = binding["roleRef"]
        role = roles.get((ref["kind"], scope if ref["kind"] == "Role" else None, ref["name"]))
        for rule in (role or {}).get("rules", []):
            names = rule.get("resourceNames")
            if (
                verb in rule["verbs"]
                and api_group in rule["apiGroups"]
                and resource in rule["resources"]
                and (not names or name in names)
            ):
                return True
    return False


@pytest.mark.parametrize(
    ("grant", "group"), [(RECONCILER_GRANT, RECONCILER_GROUP), (RUNNER_GRANT, RUNNER_GROUP)]
)
def test_the_stack_grants_exactly_what_the_stand_in_enforces(
    synthesized: Synthesized, grant: Grant, group: str
) -> None:
    """One definition, two derivations: RBAC in the template and `Grant.allows` agree everywhere, for
    the reconciler's group and the runner's."""
    template = synthesized.template_json(f"gco-regional-{OTHER}")
    objects = manifests(template)
    assert [o for o in objects if o["kind"] != "TargetGroupBinding"] == cluster_objects()
    resources_ = sorted({(k.group, k.plural) for k in (*KINDS, *SYSTEM_KINDS)} | {("", "secrets")})
    verbs = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
    namespaces = [None, "gco-inference", "gco-system", "kube-system", "default"]
    names = [None, "gco-inference", "gco-system", "kube-system", "llama"]
    compared = allowed = 0
    for verb, (api_group, resource), namespace, name in itertools.product(
        verbs, resources_, namespaces, names
    ):
        expected = grant.allows(verb, api_group, resource, namespace, name)
        assert rbac_allows(objects, group, verb, api_group, resource, namespace, name) == expected, (
            verb, api_group, resource, namespace, name,
        )  # fmt: skip
        compared += 1
        allowed += expected
    assert compared == 8 * len(resources_) * 25
    assert allowed > 0


def test_the_runner_access_entry_names_its_fixed_role_and_group_in_every_region(
    synthesized: Synthesized,
) -> None:
    """By the role's name (it is the global stack's, and no reference crosses Regions): no import."""
    role = [
        "arn:",
        {"Ref": "AWS::Partition"},
        ":iam::",
        {"Ref": "AWS::AccountId"},
        ":role/gco-runner-us-east-1",
    ]
    for region in synthesized.gco.regional:
        entries = list(
            resources(synthesized.template_json(f"gco-regional-{region}"), "AWS::EKS::AccessEntry").values()
        )
        [runner] = [entry for entry in entries if entry.get("KubernetesGroups") == [RUNNER_GROUP]]
        assert runner["PrincipalArn"] == {"Fn::Join": ["", role]}
        assert (runner["Type"], "AccessPolicies" in runner) == ("STANDARD", False)
        [reconciler] = [entry for entry in entries if entry.get("KubernetesGroups") == [RECONCILER_GROUP]]
        assert runner["ClusterName"] == reconciler["ClusterName"]


def test_the_reconciler_access_entry_names_the_group_and_no_policy(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::EKS::AccessEntry",
        {
            "KubernetesGroups": [RECONCILER_GROUP],
            "Type": "STANDARD",
            "PrincipalArn": {"Fn::GetAtt": [Match.string_like_regexp("^ReconcilerRole"), "Arn"]},
            "AccessPolicies": Match.absent(),
        },
    )


def test_reconciler_gets_the_proxy_settings(synthesized: Synthesized) -> None:
    template = synthesized.template_json(f"gco-regional-{OTHER}")
    functions = [p for p in resources(template, "AWS::Lambda::Function").values() if "FunctionName" in p]
    reconcilers = [p for p in functions if p["FunctionName"].startswith("gco-reconciler-")]
    assert len(reconcilers) == 2
    for props in reconcilers:
        raw = props["Environment"]["Variables"][PROXY_SETTINGS_ENV]
        # The defaults, and the Region's forwarding under the test app's global address.
        forwarding = Forwarding(region=OTHER, regions=(HOME, OTHER), domain=GLOBAL_ADDRESS["domain_name"])
        assert ProxySettings.model_validate_json(raw) == ProxySettings(forwarding=forwarding)


def test_load_balancer_controller_chart_and_role(synthesized: Synthesized) -> None:
    template = synthesized.template_json(f"gco-regional-{OTHER}")
    charts = resources(template, "Custom::AWSCDK-EKS-HelmChart").values()
    [chart] = [c for c in charts if c["Chart"] == "aws-load-balancer-controller"]
    assert (chart["Chart"], chart["Namespace"], chart["Repository"]) == (
        "aws-load-balancer-controller", "kube-system", "https://aws.github.io/eks-charts",
    )  # fmt: skip
    assert chart["Version"] == CHART_RELEASES["aws-load-balancer-controller"].version
    associations = resources(template, "AWS::EKS::PodIdentityAssociation").values()
    [association] = [a for a in associations if a["ServiceAccount"] == "aws-load-balancer-controller"]
    role_id = association["RoleArn"]["Fn::GetAtt"][0]
    trust = template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    actions = {a for s in trust for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == {"sts:AssumeRole", "sts:TagSession"}
    assert {s["Principal"]["Service"] for s in trust} == {"pods.eks.amazonaws.com"}
    statements = {
        s.get("Sid"): s for owner, s in iam_statements(template) if owner.startswith("LoadBalancerController")
    }
    register = statements["FrontDoorTargets"]
    assert register["Resource"]["Ref"].startswith("FrontDoorProxyTargets")
    assert statements["Describe"]["Resource"] == "*"
    assert all(not a.endswith("*") for s in statements.values() for a in s["Action"])
    [binding] = [o for o in manifests(template) if o["kind"] == "TargetGroupBinding"]
    assert binding["spec"] == {
        "serviceRef": {"name": "inference-proxy", "port": 443},
        "targetGroupARN": "TOKEN",
        "targetType": "ip",
    }


def test_front_door_is_an_iam_authorized_streaming_rest_api_over_a_vpc_link(regional_template: Any) -> None:
    """A REST API whose one method streams (STREAM, 15 minutes) through a VPC link V2 to the ALB."""
    regional_template.resource_count_is("AWS::ApiGatewayV2::Api", 0)
    regional_template.has_resource_properties(
        "AWS::ApiGateway::RestApi", {"EndpointConfiguration": {"Types": ["REGIONAL"]}}
    )
    # The front door's one method (the global address's API has two: tests/cdk/test_global_address.py).
    front_door = [
        method
        for method in regional_template.find_resources("AWS::ApiGateway::Method").values()
        if method["Properties"]["RestApiId"]["Ref"].startswith("FrontDoorApi")
    ]
    assert len(front_door) == 1
    regional_template.has_resource_properties(
        "AWS::ApiGateway::Method",
        {
            "HttpMethod": "ANY",
            "AuthorizationType": "AWS_IAM",
            "Integration": Match.object_like(
                {
                    "Type": "HTTP_PROXY",
                    "ConnectionType": "VPC_LINK",
                    "ConnectionId": {"Ref": Match.string_like_regexp("^FrontDoorVpcLink")},
                    "IntegrationTarget": {"Ref": Match.string_like_regexp("^FrontDoorAlb")},
                    "ResponseTransferMode": "STREAM",
                    "TimeoutInMillis": GENERATION_TIMEOUT_S * 1000,
                    "RequestParameters": {"integration.request.path.proxy": "method.request.path.proxy"},
                }
            ),
        },
    )
    regional_template.has_resource_properties("AWS::ApiGateway::Resource", {"PathPart": "{proxy+}"})
    regional_template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "StageName": STAGE,
            "AccessLogSetting": Match.object_like({"DestinationArn": Match.any_value()}),
            "TracingEnabled": True,
        },
    )
    regional_template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::LoadBalancer",
        {
            "LoadBalancerAttributes": Match.array_with(
                [{"Key": "idle_timeout.timeout_seconds", "Value": str(GENERATION_TIMEOUT_S)}]
            )
        },
    )
    regional_template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::LoadBalancer", {"Scheme": "internal", "Type": "application"}
    )
    regional_template.has_resource_properties(
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        {"TargetType": "ip", "Protocol": "HTTPS", "Port": 8443, "HealthCheckPath": "/healthz"},
    )
    regional_template.has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {
            "PolicyDocument": {
                "Statement": [Match.object_like({"Action": "execute-api:Invoke", "Sid": "InvokeInference"})]
            }
        },
    )


def test_each_region_outputs_its_invoke_url(synthesized: Synthesized) -> None:
    for region in synthesized.gco.regional:
        outputs = synthesized.template_json(f"gco-regional-{region}")["Outputs"]
        url = outputs["InvokeUrl"]
        assert url["Export"]["Name"] == f"gco-inference-{region}-invoke-url"
        parts = url["Value"]["Fn::Join"][1]
        assert parts[0] == "https://" and parts[1]["Ref"].startswith("FrontDoorApi")
        stage = [p["Ref"] for p in parts if isinstance(p, dict) and "Ref" in p][-1]
        assert stage.startswith(f"FrontDoorApiDeploymentStage{STAGE}") and parts[-1] == "/inference"
        assert "InvokePolicyArn" in outputs


def test_alb_admits_only_the_vpc_link(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "IpProtocol": "tcp",
            "FromPort": 80,
            "ToPort": 80,
            "SourceSecurityGroupId": {
                "Fn::GetAtt": [Match.string_like_regexp("^FrontDoorVpcLinkSecurityGroup"), "GroupId"]
            },
        },
    )
