"""Identity of the Kubernetes objects gco manages: kinds, deterministic names, fencing labels.

Label values are at most 63 characters, so the 64-hex lifecycle id and Region generation are
carried whole in annotations and as a 32-hex prefix in labels (for selectors and humans).
Decisions (adopt or remove) always compare the full annotation value.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gco.endpoints.namespaces import SYSTEM_NAMESPACE as SYSTEM_NAMESPACE  # noqa: PLC0414 (re-exported)

MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "gco"
ENDPOINT_LABEL = "gco.dev/endpoint"
LIFECYCLE_LABEL = "gco.dev/lifecycle"
GENERATION_LABEL = "gco.dev/region-generation"
REGION_LABEL = "gco.dev/region"
ROLE_LABEL = "gco.dev/role"
LIFECYCLE_ANNOTATION = "gco.dev/lifecycle-id"
# The Region generation is both a label (selectable) and an annotation, under one key.
GENERATION_ANNOTATION = GENERATION_LABEL
HASH_ANNOTATION = "gco.dev/applied-hash"
COMPONENT_LABEL = "gco.dev/component"
# The label the API server sets on every namespace, its value the namespace's name (kubernetes.io/docs/
# reference/labels-annotations-taints/#kubernetes-io-metadata-name): how a NetworkPolicy names one.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
PROXY_SERVICE = "inference-proxy"
PROXY_PORT_NAME = "https"  # the shared proxy Service's port (`gco.reconcile.proxy.render_proxy`)
FIELD_MANAGER = "gco-reconciler"
# An endpoint's route: the Ingress the renderer writes and the proxy reads back (`gco.reconcile.render`,
# `gco.reconcile.proxy.routes`): its role label, and the annotations naming its upstream Services and
# the canary's weight. Here, below both, so that the proxy's package does not import the renderer.
ROUTE_ROLE = "route"  # the role label of a route Ingress (what the route refresh lists)
UPSTREAM_ANNOTATION = "gco.dev/upstream"
CANARY_UPSTREAM_ANNOTATION = "gco.dev/canary-upstream"
CANARY_WEIGHT_ANNOTATION = "gco.dev/canary-weight"


def route_name(endpoint: str) -> str:
    """The name of an endpoint's route Ingress (in the system namespace): `route-<name>`."""
    return f"route-{endpoint}"


@dataclass(frozen=True)
class Kind:
    """A resource kind gco applies, with where its REST collection lives.

    `provided_by` names what installs a custom resource's CRD (a Region without it cannot serve
    the kind); None for built-in kinds. `namespaced` is False for cluster-scoped kinds.
    """

    api_version: str
    kind: str
    plural: str
    provided_by: str | None = None
    namespaced: bool = True

    @property
    def group(self) -> str:
        """The API group: `""` for the core group, `apps`, `keda.sh`, ..."""
        return self.api_version.rpartition("/")[0]

    @property
    def prefix(self) -> str:
        """`/api/v1` for the core group, `/apis/<group>/<version>` otherwise."""
        return f"/api/{self.api_version}" if "/" not in self.api_version else f"/apis/{self.api_version}"

    def collection(self, namespace: str | None = None) -> str:
        if namespace is None or not self.namespaced:
            return f"{self.prefix}/{self.plural}"
        return f"{self.prefix}/namespaces/{namespace}/{self.plural}"

    def path(self, namespace: str, name: str) -> str:
        return f"{self.collection(namespace)}/{name}"


DEPLOYMENT = Kind("apps/v1", "Deployment", "deployments")
SERVICE = Kind("v1", "Service", "services")
HPA = Kind("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")
SCALED_OBJECT = Kind("keda.sh/v1alpha1", "ScaledObject", "scaledobjects", provided_by="KEDA")
PDB = Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets")
INGRESS = Kind("networking.k8s.io/v1", "Ingress", "ingresses")
NETWORK_POLICY = Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies")
KINDS: tuple[Kind, ...] = (DEPLOYMENT, SERVICE, HPA, SCALED_OBJECT, PDB, INGRESS, NETWORK_POLICY)
# Kinds of the Region's shared objects (not an endpoint's): its namespaces and the proxy's routes.
NAMESPACE = Kind("v1", "Namespace", "namespaces", namespaced=False)
CONFIG_MAP = Kind("v1", "ConfigMap", "configmaps")
SYSTEM_KINDS: tuple[Kind, ...] = (NAMESPACE, CONFIG_MAP)
# Read, never written: an endpoint's Pods, listed only to say why its replicas are not ready (the
# restarts and last exit of a crash-looping container live in the Pod's status, not the Deployment's).
POD = Kind("v1", "Pod", "pods")
# An endpoint's values from Secrets Manager (gco.secrets.endpoint_secrets): read and written by name only,
# never listed, so a list of an endpoint's objects never carries a secret's value.
SECRET = Kind("v1", "Secret", "secrets")
_BY_KEY = {(kind.api_version, kind.kind): kind for kind in (*KINDS, *SYSTEM_KINDS, SECRET)}


def kind_of(obj: Mapping[str, Any]) -> Kind:
    """The managed kind of an object.

    Raises:
        KeyError: the object is not of a kind gco manages.
    """
    return _BY_KEY[(str(obj.get("apiVersion")), str(obj.get("kind")))]


@dataclass(frozen=True, order=True)
class ObjectRef:
    """One object's key; `uid` (when known) makes a delete hit only the object that was observed."""

    kind: str
    namespace: str
    name: str
    api_version: str = ""
    uid: str | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return cls(
            kind=str(obj.get("kind")),
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            api_version=str(obj.get("apiVersion")),
            uid=meta.get("uid"),
        )

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def short(token: str | None) -> str:
    """The label form of a 64-hex token: its first 32 characters."""
    return (token or "")[:32]


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def lifecycle_of(obj: Mapping[str, Any]) -> str | None:
    return annotations_of(obj).get(LIFECYCLE_ANNOTATION)


def content_hash(obj: Mapping[str, Any]) -> str:
    """A digest of everything gco sets on an object, so an unchanged object is never re-applied."""
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def selector(labels: Mapping[str, str]) -> str:
    """A Kubernetes equality label selector, `a=b,c=d`, in sorted order."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def set_selector(key: str, values: Sequence[str]) -> str:
    """A Kubernetes set-based label selector, `key in (a,b)`, values in sorted order."""
    return f"{key} in ({','.join(sorted(set(values)))})"


def absent_selector(key: str) -> str:
    """A Kubernetes label selector of the objects without label `key` at all: `!key`."""
    return f"!{key}"
