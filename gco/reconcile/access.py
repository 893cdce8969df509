"""What the reconciler may touch in a Region's cluster: the one definition of its authorization.

Both sides import this: the Regional stack renders it into the RBAC objects bound to the
reconciler's EKS access-entry group (`Grant.rbac_objects`), and the reconciler lists, applies and
deletes only where it grants (`Grant.list_scopes`; its lists of endpoint objects only where those can
be, `Grant.object_scopes`). The local stand-in API server authorizes every
request with `Grant.allows`, so a request the deployed API server would refuse is refused in tests.

The grant, and why each part:

- In each endpoint namespace (`gco-inference`): Deployments, Services, HPAs, KEDA ScaledObjects,
  PodDisruptionBudgets, NetworkPolicies (each endpoint's, and the namespace's default deny:
  `render_network.py`); verbs get, list, create, patch, delete. A server-side apply is a `PATCH`,
  authorized as `patch`; when the object does not exist yet the API server authorizes the same
  request a second time as `create` (with the object's name) before it stores it
  (k8s.io/apiserver `pkg/endpoints/handlers/patch.go`: an apply patch's create validation is wrapped
  in `withAuthorization` with verb "create"; kubernetes.io/docs/reference/using-api/server-side-apply/).
  Without `create`, the first apply of every endpoint is Forbidden.
  And `list` of Pods, nothing else on them: a Deployment whose replicas are not ready says only
  how many; the Pods' container statuses say why (restarts, `CrashLoopBackOff`, the last exit
  code), which the Region's status reports.
  And Secrets by name: `get`, `create`, `patch`, `delete` (no `list` or `watch`, which would read
  every Secret of the namespace), for the one Secret per endpoint holding its values from Secrets
  Manager (gco.secrets.endpoint_secrets; its pods read it through `secretKeyRef`).
- In `gco-system`: the routes (Ingresses) and the shared proxy's Deployment, Service, HPA,
  ConfigMaps (its configuration and the route shards) and NetworkPolicy, with the same verbs (the
  proxy is applied from nothing in a new cluster). And `list` of Pods and `get` of `pods/proxy`:
  an endpoint is reported running only once every ready proxy pod says, on its status port reached
  through the API server's pod proxy, that it serves the route (`proxy_probe.py`); and `patch` of
  those Pods, to annotate each after a route change so that its kubelet loads the route shards at once.
  The same `get` of `pods/proxy` lets the sweep ask the Prometheus server, which the Region's chart
  also runs in `gco-system`, for the endpoints' time to first token (`engine_metrics.py`).
- Cluster scope: only `get`, `create` and `patch` of the gco namespaces themselves, by name (RBAC's
  `resourceNames`), so the reconciler can create them idempotently with server-side apply (the
  create check of an apply carries the name, so a `resourceNames` rule matches it; a `POST`
  create has no name and never would). Nothing is listed cluster-wide: lists go namespace by
  namespace, and a CRD that is not installed is seen as the API server answers for a resource it
  does not serve (404), so no read of CustomResourceDefinitions is needed.

EKS access policies (`AmazonEKSEditPolicy`) are not used: they do not reach `keda.sh` objects, and a
Role written from this definition is exactly as wide as what the reconciler does.

The GPU runner's grant (`RUNNER_GRANT`, for `gco matrix run` on the runner: its checks and its final
inventory) is read-only and derived from the reconciler's: the same kinds in the same namespaces,
because the inventory must see every object the reconciler can leave behind (it lists each scope the
reconciler lists), with verbs `get` and `list` only. `get` adds nothing that `list` does not already
show in a scope it is given (a list answers whole objects); nothing cluster-scoped, no `watch`, no
Secrets (`secret_verbs` empty), no namespaces. Its RBAC is bound to its own group, which the runner
role's access entry names.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from gco.endpoints.record import DEFAULT_NAMESPACE
from gco.reconcile.objects import (
    CONFIG_MAP,
    DEPLOYMENT,
    HPA,
    INGRESS,
    MANAGED_BY,
    MANAGER,
    NAMESPACE,
    NETWORK_POLICY,
    PDB,
    POD,
    SCALED_OBJECT,
    SECRET,
    SERVICE,
    SYSTEM_NAMESPACE,
    Kind,
)

# The Kubernetes group the reconciler's EKS access entry puts its IAM role in; RBAC binds to it.
RECONCILER_GROUP = "gco:reconciler"
# The name of the Roles, ClusterRole and bindings that grant the reconciler its access.
RECONCILER_RBAC_NAME = "gco-reconciler"
# The GPU runner's group (its instance role's EKS access entry) and the name of its Roles and bindings.
RUNNER_GROUP = "gco:runner"
RUNNER_RBAC_NAME = "gco-runner-read"
# `create` beside `patch`: an apply that creates the object is authorized as both (module docstring).
OBJECT_VERBS: tuple[str, ...] = ("get", "list", "create", "patch", "delete")
READ_VERBS: tuple[str, ...] = ("get", "list")
OBSERVE_VERBS: tuple[str, ...] = ("list",)
# Kinds only read, with OBSERVE_VERBS, in each endpoint namespace.
OBSERVED_KINDS: tuple[Kind, ...] = (POD,)
NAMESPACE_VERBS: tuple[str, ...] = ("get", "create", "patch")
# Secrets by name only (module docstring): never list or watch.
SECRET_VERBS: tuple[str, ...] = ("get", "create", "patch", "delete")
ENDPOINT_KINDS: tuple[Kind, ...] = (DEPLOYMENT, SERVICE, HPA, SCALED_OBJECT, PDB, NETWORK_POLICY)
SYSTEM_NAMESPACE_KINDS: tuple[Kind, ...] = (DEPLOYMENT, SERVICE, HPA, CONFIG_MAP, INGRESS, NETWORK_POLICY)
RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
_LABELS = {MANAGED_BY: MANAGER}


@dataclass(frozen=True)
class Rule:
    """One RBAC PolicyRule: verbs on resources of API groups, optionally only the named objects."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()

    def allows(self, verb: str, group: str, resource: str, name: str | None) -> bool:
        """As RBAC's `RuleAllows` (k8s.io/kubernetes `pkg/apis/rbac/v1/evaluation_helpers.go`): the verb,
        the API group and the resource each listed, and with `resourceNames` the request's name among
        them, so such a rule never allows a request without a name (a list, a `POST` create, a
        deletecollection). A subresource request names its resource `deployments/status`, matched
        only by that exact entry (the rules here use no `*` wildcards).
        """
        if verb not in self.verbs or group not in self.api_groups or resource not in self.resources:
            return False
        return not self.resource_names or (name is not None and name in self.resource_names)

    def as_policy_rule(self) -> dict[str, Any]:
        rule: dict[str, Any] = {
            "apiGroups": list(self.api_groups),
            "resources": list(self.resources),
            "verbs": list(self.verbs),
        }
        if self.resource_names:
            rule["resourceNames"] = list(self.resource_names)
        return rule


# In gco-system: the proxy's Pods listed, each asked through the API server's pod proxy what it
# routes (`proxy_probe.py`): `get` on the `pods/proxy` subresource; and each annotated after a route
# change (`patch`), which makes its kubelet load the route shards at once. Besides the proxy,
# gco-system holds only what the Regional stack's charts install there (the Prometheus server, which
# the sweep queries through the same `pods/proxy` for TTFT, `engine_metrics.py`, and the DCGM
# exporter), and `patch` of a proxy Pod grants nothing the
# reconciler's `patch` of the proxy's Deployment does not already (pod names are generated, so a
# `resourceNames` rule cannot narrow it further).
PROXY_POD_VERBS: tuple[str, ...] = ("list", "patch")
PROXY_POD_RULES: tuple[Rule, ...] = (
    Rule((POD.group,), (POD.plural,), PROXY_POD_VERBS),
    Rule((POD.group,), (f"{POD.plural}/proxy",), ("get",)),
)


def _rules(kinds: Sequence[Kind], verbs: tuple[str, ...]) -> tuple[Rule, ...]:
    """One rule per API group, resources in a stable order."""
    groups: dict[str, list[str]] = {}
    for kind in kinds:
        groups.setdefault(kind.group, []).append(kind.plural)
    return tuple(Rule((group,), tuple(resources), verbs) for group, resources in groups.items())


@dataclass(frozen=True)
class Grant:
    """An identity's access: per namespace the kinds it may touch there with `verbs`, plus
    cluster-scoped rules; its RBAC objects are named `rbac_name` and bound to `group`."""

    kinds_by_namespace: tuple[tuple[str, tuple[Kind, ...]], ...]
    cluster_rules: tuple[Rule, ...]
    group: str = RECONCILER_GROUP
    verbs: tuple[str, ...] = OBJECT_VERBS
    rbac_name: str = RECONCILER_RBAC_NAME
    secret_verbs: tuple[str, ...] = SECRET_VERBS
    proxy_rules: tuple[Rule, ...] = PROXY_POD_RULES

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(namespace for namespace, _ in self.kinds_by_namespace)

    @property
    def endpoint_namespaces(self) -> tuple[str, ...]:
        """The namespaces an endpoint may live in: every granted one but the system namespace."""
        return tuple(namespace for namespace in self.namespaces if namespace != SYSTEM_NAMESPACE)

    def kinds_in(self, namespace: str) -> tuple[Kind, ...]:
        return dict(self.kinds_by_namespace).get(namespace, ())

    def namespace_rules(self, namespace: str) -> tuple[Rule, ...]:
        """The rules of the Role in `namespace`; none where the grant has no Role (`rbac_objects`)."""
        return self._rules_by_namespace.get(namespace, ())

    @functools.cached_property
    def _rules_by_namespace(self) -> dict[str, tuple[Rule, ...]]:
        """Each namespace's rules, built once: the stand-in API server asks on every request
        (`allows`), and building them was about a thirteenth of its CPU at 1,000 endpoints."""
        return {namespace: self._build_namespace_rules(namespace) for namespace in self.namespaces}

    def _build_namespace_rules(self, namespace: str) -> tuple[Rule, ...]:
        rules = _rules(self.kinds_in(namespace), self.verbs)
        if namespace == SYSTEM_NAMESPACE:
            return rules + self.proxy_rules
        rules += _rules(OBSERVED_KINDS, OBSERVE_VERBS)
        return rules + (_rules((SECRET,), self.secret_verbs) if self.secret_verbs else ())

    def list_scopes(self, kinds: Sequence[Kind]) -> Iterator[tuple[str, Kind]]:
        """(namespace, kind) of every namespaced list the reconciler may make among `kinds`."""
        for namespace, granted in self.kinds_by_namespace:
            for kind in kinds:
                if kind in granted:
                    yield namespace, kind

    def object_scopes(self, kinds: Sequence[Kind]) -> Iterator[tuple[str, Kind]]:
        """The list scopes that can hold an endpoint's objects: `list_scopes` less the system
        namespace's kinds other than the routes.

        The renderer puts nothing of an endpoint in the system namespace but its route (an
        Ingress), and no endpoint may live there (the reconciler refuses it), so the proxy's own
        Deployment, Service and autoscaler are all a list could find there: three lists of every
        batch and every sweep that can find nothing gco labels for an endpoint.
        """
        for namespace, kind in self.list_scopes(kinds):
            if namespace != SYSTEM_NAMESPACE or kind == INGRESS:
                yield namespace, kind

    def read_only(self, *, group: str, rbac_name: str) -> Grant:
        """The same scopes (kinds per namespace) with `get` and `list` only, and nothing cluster-wide."""
        return Grant(
            kinds_by_namespace=self.kinds_by_namespace,
            cluster_rules=(),
            group=group,
            verbs=READ_VERBS,
            rbac_name=rbac_name,
            secret_verbs=(),
            proxy_rules=(),
        )

    def allows(self, verb: str, group: str, resource: str, namespace: str | None, name: str | None) -> bool:
        """Whether RBAC built from this grant allows the request (a cluster-wide request has no namespace;
        a subresource request's `resource` is `plural/subresource`).

        A ClusterRole bound cluster-wide applies in every namespace too, as in Kubernetes.
        """
        rules = list(self.cluster_rules)
        if namespace is not None:
            rules += self.namespace_rules(namespace)
        return any(rule.allows(verb, group, resource, name) for rule in rules)

    def rbac_objects(self) -> list[dict[str, Any]]:
        """Per namespace a Role, and (with cluster rules) a ClusterRole, each bound to the group."""
        objects = self._cluster_role() if self.cluster_rules else []
        for namespace in self.namespaces:
            meta = {"name": self.rbac_name, "namespace": namespace, "labels": dict(_LABELS)}
            rules = [rule.as_policy_rule() for rule in self.namespace_rules(namespace)]
            objects.append({"apiVersion": RBAC_API_VERSION, "kind": "Role", "metadata": meta, "rules": rules})
            objects.append(self._binding("RoleBinding", "Role", meta))
        return objects

    def _cluster_role(self) -> list[dict[str, Any]]:
        meta = {"name": self.rbac_name, "labels": dict(_LABELS)}
        rules = [rule.as_policy_rule() for rule in self.cluster_rules]
        return [
            {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRole", "metadata": meta, "rules": rules},
            self._binding("ClusterRoleBinding", "ClusterRole", meta),
        ]

    def _binding(self, kind: str, role_kind: str, meta: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": RBAC_API_VERSION,
            "kind": kind,
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": self.rbac_name},
            "subjects": [{"kind": "Group", "name": self.group, "apiGroup": "rbac.authorization.k8s.io"}],
        }


def reconciler_grant(endpoint_namespaces: Sequence[str] = (DEFAULT_NAMESPACE,)) -> Grant:
    """The reconciler's grant for endpoints living in `endpoint_namespaces`."""
    namespaces = (*dict.fromkeys(endpoint_namespaces), SYSTEM_NAMESPACE)
    by_namespace = tuple(
        (namespace, SYSTEM_NAMESPACE_KINDS if namespace == SYSTEM_NAMESPACE else ENDPOINT_KINDS)
        for namespace in namespaces
    )
    cluster = (Rule((NAMESPACE.group,), (NAMESPACE.plural,), NAMESPACE_VERBS, namespaces),)
    return Grant(kinds_by_namespace=by_namespace, cluster_rules=cluster)


RECONCILER_GRANT = reconciler_grant()


def ungranted_namespace(namespace: str) -> str | None:
    """Why an endpoint may not live in `namespace`, or None: the reconciler is granted only
    `RECONCILER_GRANT.endpoint_namespaces` (never `kube-system`, gco's own `gco-system` or any
    other), and would refuse the record with a terminal status. The one rule of `gco inference
    deploy --namespace` and of the matrix's `namespace` setting, both refusing it before anything
    is written."""
    granted = RECONCILER_GRANT.endpoint_namespaces
    if namespace in granted:
        return None
    return f"must be a namespace the reconciler is granted: {', '.join(granted)}"


RUNNER_GRANT = RECONCILER_GRANT.read_only(group=RUNNER_GROUP, rbac_name=RUNNER_RBAC_NAME)
