"""Whether NetworkPolicies admit a connection to a pod: the stand-in's model of Kubernetes' rules.

There is no CNI on these machines; the local Service network (`gco.local.region.services`) asks this
before it relays a request to an endpoint's pod, so a policy the reconciler renders is enforced
locally as the VPC CNI's network policy agent enforces it in EKS. The rules modelled, from
kubernetes.io/docs/concepts/services-networking/network-policies/:

- A pod is isolated for ingress when some policy of its namespace selects it (`spec.podSelector`, an
  empty selector selecting every pod) and has `Ingress` among its `policyTypes` (absent: `Ingress`,
  as the API server defaults it). A pod no such policy selects accepts every connection; an isolated
  one accepts only what some rule of those policies allows: policies add up, none denies, so a
  default deny (`podSelector: {}` with no rules) and an allowing policy together allow.
- A rule allows a connection when one of its `from` peers matches the source (no `from`, or an empty
  one: every source) and one of its `ports` matches the port (none: every port; a named port matches
  the container port of that name, a number the port number, `endPort` a range; protocol TCP unless
  given).
- A peer with `podSelector` only: pods of the policy's own namespace; `namespaceSelector` only: every
  pod of the selected namespaces; both: the pods so labelled in those namespaces (one peer, not two);
  `ipBlock`: source addresses in the CIDR and not in an `except`, a pod's address as well as any
  other. Kubernetes leaves that open ("These should be cluster-external IPs, since Pod IPs are
  ephemeral and unpredictable"); the VPC CNI's network policy agent matches the block on the packet's
  source address, which for a pod is an address of its node's subnet, and so does this model: a block
  that covers a node subnet admits its pods (why the proxy's policy names subnets without nodes,
  gco/reconcile/render_network.py). A namespace is selected by its labels, to which the API server
  adds `kubernetes.io/metadata.name: <name>`.
- Selectors: `matchLabels` and `matchExpressions` (In, NotIn, Exists, DoesNotExist), all of them.

What it does not model: egress (the one rendered egress rule, `gco-no-instance-metadata`, refuses
only the instance metadata service, which no local engine calls; `Egress` isolation is not
evaluated), protocols other than TCP (every local connection is TCP), the node's traffic (always
allowed in Kubernetes; local engines have no node), and time: a denied connection is refused at
once, where in a cluster its packets are dropped and the client times out.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gco.reconcile.objects import NAMESPACE_NAME_LABEL


@dataclass(frozen=True)
class Peer:
    """One end of a connection: a pod's namespace and labels (and its address, where known)."""

    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    ip: str | None = None

    @property
    def key(self) -> tuple[str, tuple[tuple[str, str], ...], str | None]:
        """A hashable identity of the peer (its labels in sorted order)."""
        return (self.namespace, tuple(sorted(self.labels.items())), self.ip)


@dataclass(frozen=True)
class Port:
    """The pod port a connection reaches: its container port name and number (either may be unknown)."""

    name: str | None = None
    number: int | None = None
    protocol: str = "TCP"


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a label selector (`matchLabels`, `matchExpressions`) selects `labels`; `{}` selects all."""
    selector = selector or {}
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _peer_matches(
    peer: Mapping[str, Any], source: Peer, policy_namespace: str, namespaces: Mapping[str, Mapping[str, str]]
) -> bool:
    if "ipBlock" in peer:
        if source.ip is None:
            return False
        address = ipaddress.ip_address(source.ip)
        block = peer["ipBlock"]
        if address not in ipaddress.ip_network(block["cidr"]):
            return False
        return not any(address in ipaddress.ip_network(item) for item in block.get("except") or [])
    if "namespaceSelector" in peer:
        labels = {**namespaces.get(source.namespace, {}), NAMESPACE_NAME_LABEL: source.namespace}
        if not selects(peer["namespaceSelector"], labels):
            return False
    elif source.namespace != policy_namespace:  # podSelector alone: the policy's own namespace
        return False
    return "podSelector" not in peer or selects(peer["podSelector"], source.labels)


def _port_matches(rule_port: Mapping[str, Any], port: Port) -> bool:
    if rule_port.get("protocol", "TCP") != port.protocol:
        return False
    wanted = rule_port.get("port")
    if wanted is None:
        return True
    if isinstance(wanted, str):
        return wanted == port.name
    if port.number is None:
        return False
    return int(wanted) <= port.number <= int(rule_port.get("endPort", wanted))


def _isolates(policy: Mapping[str, Any], target: Peer) -> bool:
    spec = policy.get("spec") or {}
    types = spec.get("policyTypes") or ["Ingress"]
    return "Ingress" in types and selects(spec.get("podSelector"), target.labels)


def admits(
    policies: Sequence[Mapping[str, Any]],
    namespaces: Mapping[str, Mapping[str, str]],
    target: Peer,
    port: Port,
    source: Peer,
) -> bool:
    """Whether a connection from `source` to `port` of the pod `target` is allowed.

    Parameters:
        policies: the NetworkPolicies of the target's namespace (others are ignored).
        namespaces: each namespace's labels (without the name label the API server adds; added here).
    """
    selecting = [
        policy
        for policy in policies
        if (policy.get("metadata") or {}).get("namespace") == target.namespace and _isolates(policy, target)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in (policy.get("spec") or {}).get("ingress") or []:
            peers = rule.get("from") or []
            ports = rule.get("ports") or []
            if peers and not any(_peer_matches(peer, source, target.namespace, namespaces) for peer in peers):
                continue
            if ports and not any(_port_matches(item, port) for item in ports):
                continue
            return True
    return False
