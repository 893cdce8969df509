"""Canary actions over the fenced store: add or change a canary, promote it, roll it back.

- `set_canary`: the spec gains (or changes) `canary {image, weight, replicas}`, optionally limited
  to some target Regions (`regions`) and taking every request in some of them (`promoted_regions`,
  a rollout's waves); the reconciler renders the canary Deployment and Service and the route's
  weight where it runs;
- `promote`: the canary becomes the spec (its image replaces the spec's image) and the canary is
  removed, so one version answers;
- `rollback`: the canary is removed and the spec's own version answers.

Each is one fenced `update_spec` built from a fresh strongly consistent read (lifecycle id and
`updated_at` as fences), retried a few times when a concurrent change wins, never overwriting it.
On a stopped endpoint each changes what it will run when started, and nothing runs meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from gco.endpoints.admissions import CANARY, PRIMARY, Admissions
from gco.endpoints.errors import InvalidTransitionError, LostRaceError, NoCanaryError
from gco.endpoints.operations import ATTEMPTS, AdmissionHook, fresh
from gco.endpoints.record import EndpointRecord
from gco.endpoints.spec import parse_spec
from gco.endpoints.store import EndpointStore


def _rewrite(
    store: EndpointStore,
    name: str,
    operation: str,
    change: Callable[[dict[str, Any]], dict[str, Any]],
    admit: AdmissionHook | None = None,
) -> EndpointRecord:
    for _ in range(ATTEMPTS):
        record = fresh(store, name)
        if record.is_deleted:
            raise InvalidTransitionError(name, operation, "deleted")
        spec = parse_spec(change(record.spec.model_dump(mode="json", exclude_none=True)))
        if spec == record.spec:
            return record  # already so: no write, no rollout
        written = store.update_spec(
            name,
            spec,
            expected_lifecycle_id=record.lifecycle_id or "",
            expected_updated_at=record.updated_at,
            stopped=record.desired_state == "stopped",  # a stopped endpoint's canary waits for start
            admissions=admit(record, spec, record.target_regions) if admit else None,
        )
        if written is not None:
            return written
    raise LostRaceError(name, operation)


def set_canary(
    store: EndpointStore,
    name: str,
    image: str,
    weight: int,
    replicas: int | None = None,
    *,
    admit: AdmissionHook | None = None,
    regions: Sequence[str] | None = None,
    promoted_regions: Sequence[str] = (),
) -> EndpointRecord:
    """Give `name` a canary of `image` taking `weight`% of requests (replicas: kept, else 1); `admit`
    gives the admissions written with it (`gco.admission`).

    Parameters:
        regions: the Regions the canary runs in (None: every target Region).
        promoted_regions: of those, the Regions where it takes every request.

    Raises:
        InvalidSpecError: a bad image, weight (0-100), replica count or Region, a promoted Region
            outside `regions`, or a mooncake endpoint.
        InvalidTransitionError: the endpoint is deleted.
        EndpointNotFoundError: no record has that name.
        LostRaceError: other writers won every attempt.
    """

    def change(spec: dict[str, Any]) -> dict[str, Any]:
        previous = spec.get("canary") or {}
        canary: dict[str, Any] = {
            "image": image,
            "weight": weight,
            "replicas": replicas or previous.get("replicas", 1),
        }
        if regions is not None:
            canary["regions"] = list(regions)
        if promoted_regions:
            canary["promoted_regions"] = list(promoted_regions)
        return {**spec, "canary": canary}

    return _rewrite(store, name, "canary", change, admit)


def promote(store: EndpointStore, name: str) -> EndpointRecord:
    """The canary's image becomes the endpoint's; the canary goes.

    Raises:
        NoCanaryError: the endpoint has no canary.
        InvalidTransitionError: the endpoint is deleted.
        EndpointNotFoundError: no record has that name.
        LostRaceError: other writers won every attempt.
    """

    def change(spec: dict[str, Any]) -> dict[str, Any]:
        canary = spec.pop("canary", None)
        if canary is None:
            raise NoCanaryError(name, "promote")
        return {**spec, "image": canary["image"]}

    return _rewrite(store, name, "promote", change, _carried(promoted=True))


def rollback(store: EndpointStore, name: str) -> EndpointRecord:
    """The canary goes; the endpoint's own image answers every request.

    Raises:
        NoCanaryError: the endpoint has no canary.
        InvalidTransitionError: the endpoint is deleted.
        EndpointNotFoundError: no record has that name.
        LostRaceError: other writers won every attempt.
    """

    def change(spec: dict[str, Any]) -> dict[str, Any]:
        if spec.pop("canary", None) is None:
            raise NoCanaryError(name, "roll back")
        return spec

    return _rewrite(store, name, "rollback", change, _carried(promoted=False))


def _carried(*, promoted: bool) -> AdmissionHook:
    """Promote: each Region's canary admission becomes its primary's (the image it admitted is now the
    primary's); rollback: the canary's goes. A record with no admissions is left so."""

    def hook(record: EndpointRecord | None, spec: object, targets: list[str]) -> Admissions | None:
        if record is None or not record.admissions:
            return None
        carried: Admissions = {}
        for region, roles in record.admissions.items():
            # The primary's entry after the write: the canary's (promote) or its own (rollback).
            role = CANARY if promoted else PRIMARY
            kept = {PRIMARY: roles[role]} if role in roles else {}
            if kept:
                carried[region] = kept
        return carried

    return hook
