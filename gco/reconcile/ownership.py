"""Whose object a name holds: what the reconciler checks before it applies an object it did not list.

The endpoint's list (by its label) shows the objects it owns; a rendered object missing from that list
may still exist under its name, held by another endpoint, another lifecycle of this one, or someone
other than gco. A server-side apply with `force` would take it over, so `claim` looks first.

Where it looks:
- A batch's endpoints (`Reconciler._observe_batch`): in what the batch's lists found, in the same
  round as its endpoints' objects: every object labelled for one of them (`gco.dev/endpoint in
  (...)`) and every object without that label (`!gco.dev/endpoint`, what people and other tools
  make). A name neither list shows held is free, with no read of its own: five reads of a new
  endpoint become one more list per scope for the whole batch. What those lists cannot show is an
  object labelled for an endpoint outside the batch under a name rendered for this one. gco makes
  none now (rendered names are injective: no endpoint name holds `--`), but an older gco named role
  objects `<name>-<role>` (`chat-canary`, the canary of `chat`, is the name the endpoint
  `chat-canary` renders), so a name ending in `-<role>` is still read (`legacy_role_name`). Any
  other such object was made by hand with gco's labels, and labels were never a boundary against
  whoever can write them.
- Otherwise (a batch of one, a pass after a fresh observation): the name is read (`Cluster.get`).

Either way the check and the apply are two requests, and an object made between them is taken
over, as it would be by the apply of a name read free a moment earlier.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gco.endpoints.names import OBJECT_ROLES, ROLE_SEPARATOR
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

# How an older gco named an endpoint's role objects, `<name>-<role>` (now `<name>--<role>`): such an
# object carries its endpoint's label, which a batch's lists show only when that endpoint is in it.
LEGACY_ROLE_SUFFIXES = tuple(f"-{role}" for role in OBJECT_ROLES)
ROLE_SUFFIXES = tuple(f"{ROLE_SEPARATOR}{role}" for role in OBJECT_ROLES)


def legacy_role_name(name: str) -> bool:
    """Whether an older gco may have given `name` to another endpoint's role object: `<x>-<role>`,
    not today's `<x>--<role>` (an endpoint name, a DNS label, never ends in `-`)."""
    return name.endswith(LEGACY_ROLE_SUFFIXES) and not name.endswith(ROLE_SUFFIXES)


# Each object a batch's lists found (its endpoints' own, and every one without an endpoint's label),
# by `ObjectRef.key`: what holds each name those lists saw.
Holders = Mapping[tuple[str, str, str], dict[str, Any]]


def claim(
    cluster: Cluster,
    name: str,
    record: EndpointRecord | None,
    obj: dict[str, Any],
    holders: Holders | None = None,
) -> None:
    """Check that applying `obj` creates it or updates the endpoint's own object of this lifecycle.

    A server-side apply with `force` takes over whatever holds the name, so for an object the
    endpoint's list did not show, what holds the name is looked up in `holders` (the batch's
    lists) or, without them or for a name an older gco gave role objects, read. What it finds and
    does not own is left alone.

    Raises:
        ObjectOwnedElsewhereError: the name is held by another endpoint's object, another
            lifecycle's, or one gco did not make.
    """
    ref = ObjectRef.of(obj)
    if holders is not None and not legacy_role_name(ref.name):
        stored = holders.get(ref.key)
    else:
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
