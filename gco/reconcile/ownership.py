"""Whose object a name holds: what the reconciler checks before it applies an object it did not list.

The endpoint's list (by its label) shows the objects it owns; a rendered object missing from that list
may still exist under its name, held by another endpoint, another lifecycle of this one, or someone
other than gco. A server-side apply with `force` would take it over, so `claim` reads it first.
"""

from __future__ import annotations

from typing import Any

from gco.endpoints.record import EndpointRecord
from gco.reconcile.errors import ObjectOwnedElsewhereError
from gco.reconcile.objects import (
    ENDPOINT_LABEL,
    LIFECYCLE_ANNOTATION,
    MANAGED_BY,
    MANAGER,
    ObjectRef,
    annotations_of,
    kind_of,
    labels_of,
)
from gco.reconcile.port import Cluster


def claim(cluster: Cluster, name: str, record: EndpointRecord | None, obj: dict[str, Any]) -> None:
    """Check that applying `obj` creates it or updates the endpoint's own object of this lifecycle.

    A server-side apply with `force` takes over whatever holds the name, so an object the
    endpoint's list did not show is read first. What it finds and does not own is left alone.

    Raises:
        ObjectOwnedElsewhereError: the name is held by another endpoint's object, another
            lifecycle's, or one gco did not make.
    """
    ref = ObjectRef.of(obj)
    stored = cluster.get(kind_of(obj), ref.namespace, ref.name)
    if stored is None:
        return
    labels = labels_of(stored)
    holder = labels.get(ENDPOINT_LABEL)
    lifecycle = annotations_of(stored).get(LIFECYCLE_ANNOTATION)
    if labels.get(MANAGED_BY) != MANAGER or not holder:
        whose = "an object gco did not make"
    elif holder != name:
        whose = f"endpoint {holder}"
    elif record is None or lifecycle != record.lifecycle_id:
        whose = f"another lifecycle of {name} ({(lifecycle or 'none')[:12]})"
    else:
        return
    raise ObjectOwnedElsewhereError(f"{ref} is held by {whose}: not applied over")
