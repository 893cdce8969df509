"""The stand-in's model of NetworkPolicy semantics, rule by rule (kubernetes.io/docs/concepts/
services-networking/network-policies/)."""

from __future__ import annotations

from typing import Any

from gco.local.standin.network_policy import Peer, Port, admits, selects

TARGET = Peer("apps", {"app": "db", "tier": "data"})
TCP_5432 = Port(name="pg", number=5432)


def policy(spec: dict[str, Any], namespace: str = "apps") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": namespace}, "spec": spec}


def test_a_pod_no_policy_selects_accepts_everything() -> None:
    other = policy({"podSelector": {"matchLabels": {"app": "web"}}, "policyTypes": ["Ingress"]})
    elsewhere = policy({"podSelector": {}, "policyTypes": ["Ingress"]}, namespace="other")
    egress_only = policy({"podSelector": {}, "policyTypes": ["Egress"]})
    assert admits([other, elsewhere, egress_only], {}, TARGET, TCP_5432, Peer("x"))


def test_a_default_deny_refuses_and_an_allowing_policy_adds_to_it() -> None:
    deny = policy({"podSelector": {}})  # policyTypes defaults to Ingress
    assert not admits([deny], {}, TARGET, TCP_5432, Peer("apps", {"app": "web"}))
    allow = policy(
        {"podSelector": {"matchLabels": {"app": "db"}}, "ingress": [{"from": [{"podSelector": {}}]}]}
    )
    assert admits([deny, allow], {}, TARGET, TCP_5432, Peer("apps", {"app": "web"}))
    assert not admits(
        [deny, allow], {}, TARGET, TCP_5432, Peer("other", {"app": "web"})
    )  # own namespace only
    everyone = policy({"podSelector": {}, "ingress": [{}]})
    assert admits([deny, everyone], {}, TARGET, TCP_5432, Peer("anywhere"))


def test_namespace_and_pod_selectors_in_one_peer_are_and_in_two_peers_are_or() -> None:
    namespaces = {"team": {"env": "prod"}}
    both = {
        "namespaceSelector": {"matchLabels": {"env": "prod"}},
        "podSelector": {"matchLabels": {"app": "web"}},
    }
    one = policy({"podSelector": {}, "ingress": [{"from": [both]}]})
    assert admits([one], namespaces, TARGET, TCP_5432, Peer("team", {"app": "web"}))
    assert not admits([one], namespaces, TARGET, TCP_5432, Peer("team", {"app": "batch"}))
    assert not admits([one], namespaces, TARGET, TCP_5432, Peer("apps", {"app": "web"}))
    split = [
        {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
        {"podSelector": {"matchLabels": {"app": "web"}}},
    ]
    two = policy({"podSelector": {}, "ingress": [{"from": split}]})
    assert admits([two], namespaces, TARGET, TCP_5432, Peer("team", {"app": "batch"}))
    assert admits([two], namespaces, TARGET, TCP_5432, Peer("apps", {"app": "web"}))
    by_name = policy(
        {
            "podSelector": {},
            "ingress": [
                {"from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team"}}}]}
            ],
        }
    )
    assert admits([by_name], {}, TARGET, TCP_5432, Peer("team"))  # the API server's name label


def test_ports_by_name_number_range_and_protocol_and_ip_blocks_with_exceptions() -> None:
    def allowing(ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [policy({"podSelector": {}, "ingress": [{"ports": ports}]})]

    assert admits(allowing([{"port": "pg"}]), {}, TARGET, TCP_5432, Peer("x"))
    assert admits(allowing([{"port": 5000, "endPort": 6000}]), {}, TARGET, TCP_5432, Peer("x"))
    assert not admits(allowing([{"port": 5433}]), {}, TARGET, TCP_5432, Peer("x"))
    assert not admits(allowing([{"port": "pg", "protocol": "UDP"}]), {}, TARGET, TCP_5432, Peer("x"))
    block = [
        policy(
            {
                "podSelector": {},
                "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/16", "except": ["10.0.9.0/24"]}}]}],
            }
        )
    ]
    assert admits(block, {}, TARGET, TCP_5432, Peer("", ip="10.0.1.2"))
    assert not admits(block, {}, TARGET, TCP_5432, Peer("", ip="10.0.9.2"))
    assert not admits(block, {}, TARGET, TCP_5432, Peer("apps", {"app": "web"}))  # no address known


def test_label_selector_expressions() -> None:
    labels = {"app": "db", "tier": "data"}
    assert selects({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["data"]}]}, labels)
    assert not selects(
        {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["data"]}]}, labels
    )
    assert selects({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, labels)
    assert not selects({"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}, labels)
    assert selects({}, labels) and selects(None, {})


def test_an_ip_block_matches_a_pods_address_as_the_vpc_cni_agent_does() -> None:
    """With the VPC CNI a pod's address is one of its node's subnet and the agent matches `ipBlock`s on
    it, so a block admits the pods inside it: why the proxy admits only subnets that hold no node."""
    block = policy(
        {
            "podSelector": {},
            "ingress": [{"from": [{"ipBlock": {"cidr": "10.64.96.0/26"}}], "ports": [{"port": "pg"}]}],
        }
    )
    pod_in_block = Peer("other", {"app": "curl"}, ip="10.64.96.9")
    pod_outside = Peer("other", {"app": "curl"}, ip="10.64.40.9")
    assert admits([block], {}, TARGET, TCP_5432, pod_in_block)
    assert not admits([block], {}, TARGET, TCP_5432, pod_outside)
    assert not admits([block], {}, TARGET, TCP_5432, Peer("other", {"app": "curl"}))  # address unknown
