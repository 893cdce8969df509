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
- Per endpoint, `NetworkPolicy <name>` beside its other objects, labelled as they are (so it is
  deleted with them): its pods accept connections on their serving port (`http`, the container port
  every role names) from the shared proxy's pods in `gco-system` and from the Prometheus server that
  scrapes their /metrics; with mooncake, also from the endpoint's own pods on any port (the prefill,
  decode, store and proxy roles talk to each other).
- `inference-proxy` in `gco-system` (`proxy_policy`): the proxy's pods accept their TLS and status
  ports only from the load balancer's subnets (`RenderSettings.load_balancer_cidrs`). A policy can
  name a pod, a namespace or an IP block, and an ALB is no pod and has no fixed addresses (its nodes
  take any address of its subnets), so its subnets' CIDRs are the narrowest peer that admits it; the
  API server's pod proxy (the reconciler's route probe, `proxy_probe.py`) reaches the status port
  from the cluster's ENIs in the same subnets. With the VPC CNI, pods take addresses from the nodes'
  subnets too, so a pod in those subnets also matches that block: docs/deploy.md says so and what
  would close it (subnets of the load balancer's own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gco.addons import PROMETHEUS_NAMESPACE, PROMETHEUS_SERVER_LABELS
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
    labels: Mapping[str, str], ports: Sequence[str], load_balancer_cidrs: Sequence[str]
) -> dict[str, Any]:
    """The shared proxy's pods (`labels`): `ports` only from the load balancer's subnets (sealed)."""
    spec = {
        "podSelector": {"matchLabels": dict(labels)},
        "policyTypes": ["Ingress"],
        "ingress": [
            {"from": [{"ipBlock": {"cidr": cidr}} for cidr in load_balancer_cidrs], "ports": _ports(*ports)}
        ],
    }
    return _sealed(_policy(PROXY_SERVICE, SYSTEM_NAMESPACE, {"labels": {MANAGED_BY: MANAGER}}, spec))
