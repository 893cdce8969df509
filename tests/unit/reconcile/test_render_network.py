"""NetworkPolicies: rendered beside each endpoint's objects and with the system objects, granted to the
reconciler, and admitting exactly the proxy and the metrics scraper (checked with the stand-in's model
of the Kubernetes rules)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from gco.endpoints.errors import InvalidSpecError
from gco.local.standin.network_policy import Peer, Port, admits
from gco.reconcile.access import RECONCILER_GRANT, RUNNER_GRANT
from gco.reconcile.addons import PROMETHEUS_NAMESPACE, PROMETHEUS_SERVER_LABELS
from gco.reconcile.environment import (
    CONTROL_PLANE_CIDRS_ENV,
    LOAD_BALANCER_CIDRS_ENV,
    ReconcilerEnvironment,
)
from gco.reconcile.objects import (
    ENDPOINT_LABEL,
    HASH_ANNOTATION,
    NETWORK_POLICY,
    ROLE_LABEL,
    SYSTEM_NAMESPACE,
    content_hash,
)
from gco.reconcile.proxy.render_proxy import proxy_labels
from gco.reconcile.render import render
from gco.reconcile.render_network import (
    DEFAULT_DENY,
    NO_INSTANCE_METADATA,
    PROXY_POD_LABELS,
    SERVING_PORT_NAME,
)
from gco.reconcile.settings import RenderSettings
from gco.reconcile.system import network_objects
from tests.unit.reconcile.records import EAST, make_record

NAMESPACE = "gco-inference"
MOONCAKE = {"mooncake": {"mode": "disaggregated", "proxy_image": "ghcr.io/kvcache-ai/mooncake-proxy:0.3"}}
PROXY = Peer(SYSTEM_NAMESPACE, proxy_labels())
SCRAPER = Peer(PROMETHEUS_NAMESPACE, PROMETHEUS_SERVER_LABELS)
HTTP = Port(name=SERVING_PORT_NAME)


def policies_of(spec: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    objects = render(make_record(spec), EAST)
    return [o for o in objects if o["kind"] == NETWORK_POLICY.kind]


def server_labels(spec: dict[str, Any] | None = None) -> dict[str, str]:
    deployment = next(o for o in render(make_record(spec), EAST) if o["kind"] == "Deployment")
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def test_each_endpoint_gets_one_policy_labelled_and_sealed_as_its_other_objects() -> None:
    objects = render(make_record(), EAST)
    (policy,) = policies_of()
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    assert policy["metadata"]["name"] == "llama" and policy["metadata"]["namespace"] == NAMESPACE
    labels = policy["metadata"]["labels"]
    assert {k: v for k, v in labels.items() if k != ROLE_LABEL} == {
        k: v for k, v in deployment["metadata"]["labels"].items() if k != ROLE_LABEL
    }
    sealed = policy["metadata"]["annotations"].pop(HASH_ANNOTATION)
    assert sealed == content_hash(policy)
    assert policy["spec"]["podSelector"] == {"matchLabels": {ENDPOINT_LABEL: "llama"}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]


def test_the_endpoint_pods_admit_the_proxy_and_the_scraper_on_their_serving_port_only() -> None:
    policies = [*policies_of(), *network_objects(RenderSettings(), RECONCILER_GRANT)]
    pod = Peer(NAMESPACE, server_labels())
    assert admits(policies, {}, pod, HTTP, PROXY)
    assert admits(policies, {}, pod, HTTP, SCRAPER)
    assert not admits(policies, {}, pod, Port(name="metrics-other"), PROXY)
    # Any other pod, anywhere (another endpoint's, a pod of default, a pod labelled as the proxy but
    # outside gco-system), is refused: the namespace's default deny holds.
    assert not admits(policies, {}, pod, HTTP, Peer("default", {"app": "curl"}))
    assert not admits(policies, {}, pod, HTTP, Peer("default", proxy_labels()))
    assert not admits(policies, {}, pod, HTTP, Peer(NAMESPACE, {ENDPOINT_LABEL: "other"}))
    assert not admits(policies, {}, pod, HTTP, Peer(SYSTEM_NAMESPACE, {"app": "keda"}))
    # Without its own policy, only the default deny selects the pod: nothing is admitted.
    deny_only = network_objects(RenderSettings(), RECONCILER_GRANT)
    assert not admits(deny_only, {}, pod, HTTP, PROXY)


def test_mooncake_roles_admit_each_other_on_any_port() -> None:
    policies = [*policies_of(MOONCAKE), *network_objects(RenderSettings(), RECONCILER_GRANT)]
    decode = Peer(NAMESPACE, {ENDPOINT_LABEL: "llama", ROLE_LABEL: "decode"})
    prefill = Peer(NAMESPACE, {ENDPOINT_LABEL: "llama", ROLE_LABEL: "prefill"})
    assert admits(policies, {}, decode, Port(number=17000), prefill)
    assert not admits(policies, {}, decode, Port(number=17000), Peer(NAMESPACE, {ENDPOINT_LABEL: "other"}))
    assert len(policies_of({})[0]["spec"]["ingress"]) == 2  # a plain endpoint: no such rule


LB_SUBNETS = ("10.64.96.0/26", "10.64.96.64/26")  # the load balancer's own (stacks/constructs/network.py)
NODE_SUBNETS = ("10.64.32.0/19", "10.64.64.0/19")  # nodes, pods and the cluster's interfaces


def test_the_system_objects_deny_by_default_and_isolate_the_proxy_where_the_subnets_are_known() -> None:
    unknown = network_objects(RenderSettings(), RECONCILER_GRANT)
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in unknown] == [
        (NAMESPACE, DEFAULT_DENY),
        (NAMESPACE, NO_INSTANCE_METADATA),
    ]
    assert unknown[0]["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    half = RenderSettings(load_balancer_cidrs=LB_SUBNETS)  # without the control plane's: no probe path
    assert len(network_objects(half, RECONCILER_GRANT)) == 2
    settings = RenderSettings(load_balancer_cidrs=LB_SUBNETS, control_plane_cidrs=NODE_SUBNETS)
    known = network_objects(settings, RECONCILER_GRANT)
    proxy_policy = known[-1]
    assert proxy_policy["metadata"]["namespace"] == SYSTEM_NAMESPACE
    assert proxy_labels() == PROXY_POD_LABELS  # the endpoint renderer's copy holds


def test_the_proxy_serves_only_the_load_balancer_and_answers_its_status_only_to_the_cluster_subnets() -> None:
    """The ALB's nodes take addresses of its own subnets; a pod takes one of its node's subnet, and the
    VPC CNI's agent matches an ipBlock on it (the stand-in models that): so a pod, even one whose
    address lies in the cluster's subnets, never reaches the serving port."""
    settings = RenderSettings(load_balancer_cidrs=LB_SUBNETS, control_plane_cidrs=NODE_SUBNETS)
    known = network_objects(settings, RECONCILER_GRANT)
    proxy_pod = Peer(SYSTEM_NAMESPACE, proxy_labels())
    https, status = Port(name="https"), Port(name="status")
    alb = Peer("", ip="10.64.96.70")
    api_server = Peer("", ip="10.64.33.4")  # the control plane's ENI in a cluster subnet
    pod = Peer("default", {"app": "curl"}, ip="10.64.40.7")  # a pod of a node in a private subnet
    assert admits(known, {}, proxy_pod, https, alb)
    assert not admits(known, {}, proxy_pod, status, alb)
    assert admits(known, {}, proxy_pod, status, api_server)
    assert not admits(known, {}, proxy_pod, https, api_server)
    assert not admits(known, {}, proxy_pod, https, pod)  # the gap the old subnets-shared rule left
    assert admits(known, {}, proxy_pod, status, pod)  # route digests only: docs/deploy.md says so
    assert not admits(known, {}, proxy_pod, https, Peer("", ip="10.64.0.9"))  # the NAT's subnet


def test_the_reconciler_may_write_network_policies_where_it_renders_them_and_the_runner_only_reads() -> None:
    group, plural = NETWORK_POLICY.group, NETWORK_POLICY.plural
    for namespace in (NAMESPACE, SYSTEM_NAMESPACE):
        for verb in ("get", "list", "create", "patch", "delete"):
            assert RECONCILER_GRANT.allows(verb, group, plural, namespace, "llama")
        assert RUNNER_GRANT.allows("list", group, plural, namespace, None)
        assert not RUNNER_GRANT.allows("patch", group, plural, namespace, "llama")
    assert not RECONCILER_GRANT.allows("create", group, plural, "default", "llama")


def test_the_stack_tells_the_reconciler_the_load_balancer_subnets_and_a_bad_one_names_the_variable() -> None:
    environment = ReconcilerEnvironment(
        cluster_name="c",
        region=EAST,
        load_balancer_cidrs=("10.64.32.0/19",),
        control_plane_cidrs=NODE_SUBNETS,
    )
    env = environment.to_env()
    assert env[LOAD_BALANCER_CIDRS_ENV] == "10.64.32.0/19"
    assert env[CONTROL_PLANE_CIDRS_ENV] == "10.64.32.0/19,10.64.64.0/19"
    assert ReconcilerEnvironment.from_env(env).load_balancer_cidrs == ("10.64.32.0/19",)
    assert ReconcilerEnvironment.from_env(env).control_plane_cidrs == NODE_SUBNETS
    with pytest.raises(InvalidSpecError) as raised:
        ReconcilerEnvironment.from_env({**env, CONTROL_PLANE_CIDRS_ENV: "10.64.32.0/40"})
    assert raised.value.field == CONTROL_PLANE_CIDRS_ENV
    assert ReconcilerEnvironment.from_env({**env, LOAD_BALANCER_CIDRS_ENV: ""}).load_balancer_cidrs is None
    with pytest.raises(InvalidSpecError) as raised:
        ReconcilerEnvironment.from_env({**env, LOAD_BALANCER_CIDRS_ENV: "10.64.32.0/33"})
    assert raised.value.field == LOAD_BALANCER_CIDRS_ENV


def test_no_endpoint_pod_may_connect_to_the_instance_metadata_service() -> None:
    """Every pod of an endpoint namespace is isolated for egress by one policy whose only rule allows
    every address but IMDS's (IPv4 and the Nitro IPv6 one): the Pod Identity agent, DNS and the rest
    stay reachable. Evaluated here on its rule, as the VPC CNI's agent matches an ipBlock with except."""
    (policy,) = [
        o
        for o in network_objects(RenderSettings(), RECONCILER_GRANT)
        if o["metadata"]["name"] == NO_INSTANCE_METADATA
    ]
    spec = policy["spec"]
    assert spec["podSelector"] == {} and spec["policyTypes"] == ["Egress"]
    (rule,) = spec["egress"]
    assert "ports" not in rule  # every port

    def allowed(address: str) -> bool:
        ip = ipaddress.ip_address(address)
        return any(
            ip in ipaddress.ip_network(peer["ipBlock"]["cidr"])
            and not any(ip in ipaddress.ip_network(block) for block in peer["ipBlock"]["except"])
            for peer in rule["to"]
        )

    assert not allowed("169.254.169.254") and not allowed("fd00:ec2::254")
    assert allowed("169.254.170.23")  # the EKS Pod Identity agent
    assert (
        allowed("10.100.0.10") and allowed("10.64.40.7") and allowed("52.94.0.1") and allowed("fd00:ec2::23")
    )
