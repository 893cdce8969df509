"""The cluster port: the few Kubernetes operations the reconciler needs, as a `typing.Protocol`.

`gco.reconcile.kubeapi.KubeCluster` implements it over the Kubernetes REST API (EKS in AWS,
the stand-in API server locally); tests may pass any object with these methods.
What it may reach is `gco.reconcile.access.RECONCILER_GRANT`.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gco.reconcile.objects import Kind, ObjectRef


class Cluster(Protocol):
    """One Region's Kubernetes cluster, as the reconciler sees it."""

    def apply(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply `obj` with gco's field manager; returns the object as stored."""
        ...

    def list(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        """Every object whose labels match, wherever an endpoint's objects can be (`Grant.object_scopes`)."""
        ...

    def list_in(self, kind: Kind, namespace: str, labels: Mapping[str, str]) -> builtins.list[dict[str, Any]]:
        """The objects of one kind in one namespace whose labels match (one list, not one per scope)."""
        ...

    def list_any(
        self, key: str, values: Sequence[str], *, or_absent: bool = False
    ) -> builtins.list[dict[str, Any]]:
        """Every object whose label `key` is one of `values` (`key in (...)`), as `list` scopes it; with
        `or_absent`, also every object there without the label (`!key`), listed in the same round."""
        ...

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None:
        """One object by name (None: it does not exist); `namespace` is ignored for cluster-scoped kinds."""
        ...

    def delete(self, refs: Sequence[ObjectRef]) -> None:
        """Delete the objects; one already gone (or replaced: another uid) counts as deleted."""
        ...
