"""Cluster add-ons where config enables them, what the reconciler is told, operators' access."""

from __future__ import annotations

import functools
import json
import tempfile
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from gco.deployment.charts import CHART_RELEASES, installed_charts
from gco.reconcile.addons import ADDONS_ENV, PROMETHEUS_ADDRESS, addons_from_env
from gco.reconcile.environment import CONTROL_PLANE_CIDRS_ENV, LOAD_BALANCER_CIDRS_ENV
from gco.reconcile.settings import DEFAULT_SETTINGS
from stacks.config import ConfigError, parse_config
from stacks.constructs.cluster_addons import CHARTS, chart_values
from tests.cdk.conftest import HOME, OTHER, Synthesized, cdk_json_config

ADMIN = "arn:aws:iam::123456789012:role/platform-admins"
VIEWER = "arn:aws:iam::123456789012:user/auditor"


@functools.cache
def variant() -> dict[str, Any]:
    """An app whose config has KEDA in the home Region only, operators, and a public allow-listed API."""
    from aws_cdk import App

    from stacks.app import build_app

    raw = {
        **cdk_json_config(),
        "keda_regions": [HOME],
        "operators": {
            "admin_principal_arns": [ADMIN],
            "viewer_principal_arns": [VIEWER],
            "api_endpoint": "public_and_private",
            "public_cidrs": ["203.0.113.0/24"],
            "private_cidrs": ["10.200.0.0/16"],
        },
    }
    gco = build_app(parse_config(raw), app=App(outdir=tempfile.mkdtemp(prefix="gco-variant-")), nag=False)
    return {region: Template.from_stack(stack).to_json() for region, stack in gco.regional.items()}


def charts(template: dict[str, Any]) -> set[str]:
    """The add-on charts (the load balancer controller's chart belongs to the front door)."""
    return {
        r["Properties"]["Chart"]
        for r in template["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
        and r["Properties"]["Chart"] != "aws-load-balancer-controller"
    }


def reconciler_env(template: dict[str, Any]) -> dict[str, str]:
    function = next(
        r
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and str(r["Properties"].get("FunctionName", "")).endswith("-stream")
    )
    env: dict[str, str] = function["Properties"]["Environment"]["Variables"]
    return env


def test_metrics_server_and_pod_identity_agent_are_eks_addons(synthesized: Synthesized) -> None:
    template = synthesized.template(f"gco-regional-{OTHER}")
    for name in ("metrics-server", "eks-pod-identity-agent"):
        template.has_resource_properties("AWS::EKS::Addon", {"AddonName": name})


def test_the_vpc_cni_enforces_network_policies_and_the_reconciler_knows_the_load_balancer_subnets(
    synthesized: Synthesized,
) -> None:
    """The managed VPC CNI add-on runs its network policy agent (taking over the self-managed CNI's
    fields); the proxy's NetworkPolicy admits to its serving port the subnets the front door's ALB and
    VPC link live in, which hold nothing else (isolated, no node group's), and to its status port the
    cluster's subnets (where the API server's pod proxy connects from)."""
    template = synthesized.template_json(f"gco-regional-{OTHER}")
    resources = template["Resources"]
    (cni,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EKS::Addon" and r["Properties"]["AddonName"] == "vpc-cni"
    ]
    assert json.loads(cni["ConfigurationValues"]) == {"enableNetworkPolicy": "true"}
    assert cni["ResolveConflicts"] == "OVERWRITE"
    env = reconciler_env(template)
    by_cidr = {
        r["Properties"]["CidrBlock"]: key for key, r in resources.items() if r["Type"] == "AWS::EC2::Subnet"
    }
    balancer = {by_cidr[cidr] for cidr in env[LOAD_BALANCER_CIDRS_ENV].split(",")}
    control = {by_cidr[cidr] for cidr in env[CONTROL_PLANE_CIDRS_ENV].split(",")}
    assert len(balancer) == 2 and len(control) == 2 and not balancer & control
    (alb,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::ElasticLoadBalancingV2::LoadBalancer"
    ]
    assert {ref["Ref"] for ref in alb["Subnets"]} == balancer
    (link,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::ApiGatewayV2::VpcLink"]
    assert {ref["Ref"] for ref in link["SubnetIds"]} == balancer
    for group in (r["Properties"] for r in resources.values() if r["Type"] == "AWS::EKS::Nodegroup"):
        assert not {ref["Ref"] for ref in group["Subnets"]} & balancer  # no node, so no pod, there
    routes = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::Route"]
    tables = {
        r["Properties"]["RouteTableId"]["Ref"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::SubnetRouteTableAssociation"
        and r["Properties"]["SubnetId"]["Ref"] in balancer
    }
    assert not [route for route in routes if route["RouteTableId"]["Ref"] in tables]  # isolated


def test_keda_prometheus_dcgm_in_every_region_by_default(synthesized: Synthesized) -> None:
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        assert {"keda", "prometheus", "dcgm-exporter"} <= charts(template)
        present = addons_from_env(reconciler_env(template))
        assert present is not None and {"keda", "prometheus", "dcgm-exporter", "metrics-server"} <= present


def test_keda_only_where_config_enables_it_and_the_reconciler_knows() -> None:
    home, other = variant()[HOME], variant()[OTHER]
    assert {"keda", "prometheus", "dcgm-exporter"} <= charts(home)
    assert charts(other) == {"nvidia-device-plugin", "cluster-autoscaler"}
    assert addons_from_env(reconciler_env(other)) == frozenset(
        {"metrics-server", "nvidia-device-plugin", "cluster-autoscaler"}
    )
    assert "keda" in reconciler_env(home)[ADDONS_ENV].split(",")


def test_prometheus_serves_where_keda_triggers_look() -> None:
    chart = CHARTS["prometheus"]
    assert f"http://{chart.release}-server.{chart.namespace}.svc:80" == PROMETHEUS_ADDRESS
    assert DEFAULT_SETTINGS.prometheus_address == PROMETHEUS_ADDRESS
    values = chart_values("prometheus", cluster_name="c", region=HOME, kubernetes_version="1.33")
    assert values["server"]["persistentVolume"] == {"enabled": False}
    dcgm = chart_values("dcgm-exporter", cluster_name="c", region=HOME, kubernetes_version="1.33")
    assert dcgm["service"]["annotations"]["prometheus.io/scrape"] == "true"
    with pytest.raises(KeyError):
        chart_values("nginx", cluster_name="c", region=HOME, kubernetes_version="1.33")


def access_entries(template: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return {
        json.dumps(r["Properties"]["PrincipalArn"]): r["Properties"].get("AccessPolicies", [])
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::AccessEntry"
    }


def test_operators_get_cluster_wide_access_entries() -> None:
    for template in variant().values():
        entries = access_entries(template)
        for principal, policy in ((ADMIN, "AmazonEKSClusterAdminPolicy"), (VIEWER, "AmazonEKSViewPolicy")):
            (granted,) = entries[json.dumps(principal)]
            assert granted["AccessScope"] == {"Type": "cluster"}
            assert json.dumps(granted["PolicyArn"]).endswith(f'cluster-access-policy/{policy}"]]}}')


def test_default_config_names_no_operator(synthesized: Synthesized) -> None:
    entries = access_entries(synthesized.template_json(f"gco-regional-{OTHER}"))
    assert not any("iam::123456789012" in principal for principal in entries)


def test_api_endpoint_allow_listed_and_private_networks_reach_it() -> None:
    template = Template.from_json(variant()[OTHER])
    template.has_resource_properties(
        "AWS::EKS::Cluster",
        {
            "ResourcesVpcConfig": Match.object_like(
                {
                    "EndpointPublicAccess": True,
                    "EndpointPrivateAccess": True,
                    "PublicAccessCidrs": ["203.0.113.0/24"],
                }
            )
        },
    )
    template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"CidrIp": "10.200.0.0/16", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp"},
    )


@pytest.mark.parametrize(
    ("operators", "key"),
    [
        ({"admin_principal_arns": ["alice"]}, "gco.operators.admin_principal_arns"),
        ({"admin_principal_arns": [ADMIN, ADMIN]}, "gco.operators.admin_principal_arns"),
        ({"private_cidrs": ["10.0.0.1/16"]}, "gco.operators.private_cidrs"),
        ({"api_endpoint": "public_and_private", "public_cidrs": ["0.0.0.0/0"]}, "gco.operators.public_cidrs"),
        ({"api_endpoint": "public_and_private"}, "gco.operators"),
        ({"public_cidrs": ["203.0.113.0/24"]}, "gco.operators"),
        ({"api_endpoint": "public"}, "gco.operators.api_endpoint"),
    ],
)
def test_bad_operator_settings_name_their_key(operators: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"operators": operators})
    assert str(caught.value).startswith(f"{key}:")
    assert "\n" not in str(caught.value)


def test_gpu_node_types_and_keda_regions_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"^gco.gpu_nodes: 'm7i.large' is not an x86_64 NVIDIA GPU"):
        parse_config(
            {"gpu_nodes": {"instance_types": ["m7i.large"], "min_size": 0, "max_size": 1, "desired_size": 0}}
        )
    with pytest.raises(ConfigError, match="keda_regions: 'eu-west-1' is not one of regions"):
        parse_config({"keda_regions": ["eu-west-1"]})
    config = parse_config({"regions": ["us-east-1", "us-west-2"], "keda_regions": []})
    assert not config.has_keda("us-east-1")
    assert parse_config(None).has_keda("us-east-1")


def test_every_chart_is_its_pinned_release_and_documents_the_cluster_s_version(
    synthesized: Synthesized,
) -> None:
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        [cluster] = [
            r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::EKS::Cluster"
        ]
        installed = {
            r["Properties"]["Chart"]: r["Properties"]
            for r in template["Resources"].values()
            if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
        }
        # The default config installs KEDA in every Region, so every pinned chart is here.
        assert set(installed) == set(installed_charts(scaling=True)) == set(CHART_RELEASES)
        for name, props in installed.items():
            pin = CHART_RELEASES[name]
            assert (props["Repository"], props["Version"]) == (pin.repository, pin.version)
            assert pin.supports(cluster["Version"]), (name, cluster["Version"])
