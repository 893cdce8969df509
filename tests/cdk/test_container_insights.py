"""The Container Insights add-on as synthesized: its configuration is the one the dashboards' GPU
widgets are checked against, its agent's role is reached only through Pod Identity and holds only the
documented policy, and each dashboard's GPU widgets read that Region's cluster."""

from __future__ import annotations

import json
from typing import Any

from gco.deployment import container_insights as ci
from gco.deployment.dashboards import metric_references
from tests.cdk.synth_cache import HOME, OTHER, Synthesized
from tests.cdk.test_dashboards import body_of, of_type


def addon(template: dict[str, Any]) -> dict[str, Any]:
    (resource,) = [
        r
        for r in of_type(template, "AWS::EKS::Addon").values()
        if r["Properties"]["AddonName"] == ci.ADDON_NAME
    ]
    return resource


def any_tokens(dashboard: dict[str, Any]) -> dict[str, Any]:
    """The body with each CloudFormation token (the access log group's name) read as `TOKEN`."""
    body = dashboard["Properties"]["DashboardBody"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else []
    return body_of(
        dashboard, {json.dumps(p, sort_keys=True): "TOKEN" for p in parts if not isinstance(p, str)}
    )


def test_each_region_runs_the_add_on_with_the_rendered_configuration(synthesized: Synthesized) -> None:
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        resource = addon(template)
        properties = resource["Properties"]
        assert json.loads(properties["ConfigurationValues"]) == ci.addon_configuration()
        ((association),) = properties["PodIdentityAssociations"]
        assert association["ServiceAccount"] == ci.AGENT_SERVICE_ACCOUNT
        role_id = association["RoleArn"]["Fn::GetAtt"][0]
        role = template["Resources"][role_id]["Properties"]
        assert role["RoleName"] == f"gco-{region}-cloudwatch-agent"
        assert role["ManagedPolicyArns"] == [
            {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":iam::aws:policy/{ci.AGENT_POLICY}"]]}
        ]
        assert "Policies" not in role
        (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
        # No other policy is attached to the agent's role.
        attached = [
            p
            for p in of_type(template, "AWS::IAM::ManagedPolicy").values()
            if {"Ref": role_id} in p["Properties"].get("Roles", [])
        ]
        assert attached == []
        agent = next(
            k
            for k, r in of_type(template, "AWS::EKS::Addon").items()
            if r["Properties"]["AddonName"] == "eks-pod-identity-agent"
        )
        assert agent in resource["DependsOn"]


def test_each_dashboard_s_gpu_widgets_read_the_cluster_of_their_region(synthesized: Synthesized) -> None:
    clusters = {}
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        (cluster,) = of_type(template, "AWS::EKS::Cluster").values()
        clusters[region] = cluster["Properties"]["Name"]
        (dashboard,) = of_type(template, "AWS::CloudWatch::Dashboard").values()
        body = any_tokens(dashboard)
        gpu = [dims for ns, _, dims in metric_references(body) if ns == ci.NAMESPACE]
        assert gpu and all(dims[ci.CLUSTER_DIMENSION] == clusters[region] for dims in gpu)
    (dashboard,) = of_type(synthesized.template_json("gco-global"), "AWS::CloudWatch::Dashboard").values()
    body = body_of(dashboard, {})
    drawn = {
        (w["properties"]["region"], dims[ci.CLUSTER_DIMENSION])
        for w in body["widgets"]
        for ns, _, dims in metric_references({"widgets": [w]})
        if ns == ci.NAMESPACE
    }
    assert drawn == set(clusters.items())
