"""NetworkPolicies: who may open a connection to an endpoint's pods and to the shared proxy (pure).

Kubernetes semantics these rely on (kubernetes.io/docs/concepts/services-networking/network-policies/):
a pod selected by some policy with `Ingress` in its `policyTypes` is isolated for ingress and accepts
only what one of those policies' `ingress` rules allows (policies add up, none denies); a pod no
policy selects accepts everything. A `from` peer with both `namespaceSelector` and `podSelector` is
one peer (pods with those labels in namespaces with those labels); a `podSelector` alone means the
policy's own namespace. Namespaces are selected by name through `kubernetes.io/metadata.name`, which
the API server sets on every namespace. Connections from the node a pod runs on (the kubelet's
probes) are always allowed. In EKS the VPC CNI's network policy agent enforces them once the add-on's
configuration enables it (`enableNetworkPolicy: "true"`, stacks/constructs/cluster_addons.py).

What is rendered:

- `gco-default-deny` in each endpoint namespace (`default_deny`, applied with the system objects):
  every pod there is isolated for ingress, so a pod that no endpoint policy admits anything to
  accepts nothing.
- `gco-no-instance-metadata` in each endpoint namespace (`no_instance_metadata`, with the system
  objects): the one egress rule, every address but the instance metadata service's, so no endpoint
  pod reads its node's role (on any node group, whatever its IMDS hop limit).
- Per endpoint, `NetworkPolicy <name>` beside its other objects, labelled as they are (so it is
  deleted with them): its pods accept connections on their serving port (`http`, the container port
  every role names) from the shared proxy's pods in `gco-system` and from the Prometheus server that
  scrapes their /metrics; with mooncake, also from the endpoint's own pods on any port (the prefill,
  decode, store and proxy roles talk to each other).
- `inference-proxy` in `gco-system` (`proxy_policy`): the proxy's pods accept their TLS (serving)
  port only from the load balancer's own subnets (`RenderSettings.load_balancer_cidrs`), and their
  status port only from the cluster's subnets (`RenderSettings.control_plane_cidrs`).

Why those peers. A policy can name a pod, a namespace or an IP block. The front door's ALB is no pod
and has no fixed addresses: it sends to its IP targets (the proxy's pods, registered by the AWS Load
Balancer Controller's TargetGroupBinding) from its nodes' private addresses, any address of the
subnets it is placed in. An `ipBlock` "should be cluster-external IPs, since Pod IPs are ephemeral
and unpredictable" (the Kubernetes page above), yet with the VPC CNI a pod takes its address from its
node's subnet and the network policy agent matches an `ipBlock` on that address, so a block of a
subnet that also holds nodes admits every pod there. So the ALB and its VPC link live in subnets of
their own that hold no node, pod or cluster interface (`stacks/constructs/network.py`, as the EKS
User Guide's "Cluster VPC and subnet considerations" recommends: "Other resources, such as nodes and
load balancers, should be launched in separate subnets"), and those subnets' CIDRs are the serving
port's only peer: exactly the ALB's addresses and no pod's. The VPC link's interfaces share those
subnets, but their security group lets them reach only the ALB's listener
(stacks/constructs/front_door.py), not the proxy.

The status port is read by the reconciler's route probe through the API server's pod proxy
(`proxy/proxy_probe.py`), whose connections come from the EKS control plane's cross-account ENIs in
the cluster's subnets; the control plane is no pod either, and EKS offers no selector for it, so the
subnets are the peer (the VPC CNI network policy agent's maintainers, aws/aws-network-policy-agent
issue 281: "no easy way to select API Server (control plane) IPs ... allow the subnet"). Those subnets
hold nodes and pods too, so pods there can read the status port's route digests (no request passes
through it); docs/deploy.md says what would close that (cluster subnets of their own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gco.reconcile.addons import PROMETHEUS_NAMESPACE, PROMETHEUS_SERVER_LABELS
from gco.reconcile.objects import (
    COMPONENT_LABEL,
    ENDPOINT_LABEL,
    HASH_ANNOTATION,
    MANAGED_BY,
    MANAGER,
    NAMESPACE_NAME_LABEL,
    NETWORK_POLICY,
    PROXY_SERVICE,
    SYSTEM_NAMESPACE,
    content_hash,
)

DEFAULT_DENY = "gco-default-deny"
NO_INSTANCE_METADATA = "gco-no-instance-metadata"
# EC2's instance metadata service: its IPv4 address and its IPv6 address on Nitro instances (Amazon EC2
# User Guide, "Access instance metadata for an EC2 instance").
INSTANCE_METADATA_CIDRS = {"0.0.0.0/0": "169.254.169.254/32", "::/0": "fd00:ec2::254/128"}
SERVING_PORT_NAME = "http"  # the container port every pod template names (render_pods.py)
# The shared proxy's pod labels (gco.reconcile.proxy.render_proxy.proxy_labels, which imports the
# endpoint renderer and so cannot be imported by it; a unit test holds the two equal).
PROXY_POD_LABELS = {MANAGED_BY: MANAGER, COMPONENT_LABEL: PROXY_SERVICE}


def _policy(name: str, namespace: str, metadata: Mapping[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    meta = {**metadata, "name": name, "namespace": namespace}
    return {
        "apiVersion": NETWORK_POLICY.api_version,
        "kind": NETWORK_POLICY.kind,
        "metadata": meta,
        "spec": spec,
    }


def _sealed(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = content_hash(obj)
    return obj


def pods_in(namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """A `from` peer: the pods with `labels` in namespace `namespace`."""
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        "podSelector": {"matchLabels": dict(labels)},
    }


def _ports(*names: str) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": name} for name in names]


def default_deny(namespace: str) -> dict[str, Any]:
    """Every pod of `namespace` isolated for ingress, allowing nothing by itself (sealed)."""
    spec = {"podSelector": {}, "policyTypes": ["Ingress"]}
    return _sealed(_policy(DEFAULT_DENY, namespace, {"labels": {MANAGED_BY: MANAGER}}, spec))


def no_instance_metadata(namespace: str) -> dict[str, Any]:
    """Every pod of `namespace` may connect anywhere but to the instance metadata service (sealed).

    The GPU nodes' hop limit of 1 already stops a pod's IMDSv2 token (stacks/constructs/node_storage.py);
    this policy holds on every node, the system nodes that run `gpu_count: 0` endpoints included, whose
    launch template EKS generates with a hop limit of 2. The Pod Identity agent (169.254.170.23), DNS
    and every other address stay reachable: the blocks are the whole address space less IMDS's.
    """
    to = [{"ipBlock": {"cidr": block, "except": [imds]}} for block, imds in INSTANCE_METADATA_CIDRS.items()]
    spec = {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{"to": to}]}
    return _sealed(_policy(NO_INSTANCE_METADATA, namespace, {"labels": {MANAGED_BY: MANAGER}}, spec))


def endpoint_policy(
    metadata: Mapping[str, Any], name: str, namespace: str, *, internal: bool
) -> dict[str, Any]:
    """The endpoint's pods: their serving port from the proxy and the metrics scraper; with
    `internal` (mooncake's roles), any port from the endpoint's own pods. `metadata` carries the
    endpoint's labels and annotations (the renderer seals the object)."""
    ingress: list[dict[str, Any]] = [
        {"from": [pods_in(SYSTEM_NAMESPACE, PROXY_POD_LABELS)], "ports": _ports(SERVING_PORT_NAME)},
        {
            "from": [pods_in(PROMETHEUS_NAMESPACE, PROMETHEUS_SERVER_LABELS)],
            "ports": _ports(SERVING_PORT_NAME),
        },
    ]
    if internal:
        ingress.append({"from": [{"podSelector": {"matchLabels": {ENDPOINT_LABEL: name}}}]})
    spec = {
        "podSelector": {"matchLabels": {ENDPOINT_LABEL: name}},
        "policyTypes": ["Ingress"],
        "ingress": ingress,
    }
    return _policy(name, namespace, metadata, spec)


def proxy_policy(
    labels: Mapping[str, str],
    *,
    serving: Sequence[str],
    status: Sequence[str],
    load_balancer_cidrs: Sequence[str],
    control_plane_cidrs: Sequence[str],
) -> dict[str, Any]:
    """The shared proxy's pods (`labels`): the `serving` ports only from the load balancer's subnets,
    the `status` ports only from the control plane's (module docstring; sealed)."""
    spec = {
        "podSelector": {"matchLabels": dict(labels)},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [{"ipBlock": {"cidr": cidr}} for cidr in load_balancer_cidrs],
                "ports": _ports(*serving),
            },
            {"from": [{"ipBlock": {"cidr": cidr}} for cidr in control_plane_cidrs], "ports": _ports(*status)},
        ],
    }
    return _sealed(_policy(PROXY_SERVICE, SYSTEM_NAMESPACE, {"labels": {MANAGED_BY: MANAGER}}, spec))
