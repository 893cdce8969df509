"""Operator actions over the fenced store: fresh read, back-fill, fenced write, bounded retry.

What the CLI and automation call. When the caller pins a fence (an expected lifecycle id or
owner label) a lost race is final; otherwise the action re-reads and tries again, a few times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gco.endpoints import names
from gco.endpoints.admissions import Admissions
from gco.endpoints.errors import (
    EndpointNotFoundError,
    InvalidSpecError,
    InvalidTransitionError,
    LostRaceError,
)
from gco.endpoints.fenced import require_token
from gco.endpoints.limits import checked_spec
from gco.endpoints.namespaces import DEFAULT_NAMESPACE
from gco.endpoints.record import EndpointRecord
from gco.endpoints.spec import EndpointSpec, check_residency, parse_spec
from gco.endpoints.states import LIVE_STATES
from gco.endpoints.store import EndpointStore

ATTEMPTS = 5
# What a write asks before it is sent: given the record it is planned from (None for a create), the
# spec and the targets it writes, the admissions to write with it (None: the field as it is). It may
# raise (an unvalidated image under `enforce`): nothing is written then. `gco.admission` makes them.
AdmissionHook = Callable[[EndpointRecord | None, EndpointSpec, list[str]], Admissions | None]


def fresh(store: EndpointStore, name: str) -> EndpointRecord:
    """A strongly consistent read, back-filling a legacy record first.

    Raises:
        InvalidSpecError: `name` is not an endpoint name (never "not found" for a bad name).
        EndpointNotFoundError: no record has that name.
        LostRaceError: the back-fill lost to other writers `ATTEMPTS` times.
    """
    names.endpoint_name(name)
    for _ in range(ATTEMPTS):
        record = store.get(name, consistent_read=True)
        if record is None:
            raise EndpointNotFoundError(name)
        if not record.is_legacy:
            return record
        filled = store.ensure_lifecycle_metadata(record)
        if filled is not None:
            return filled
    raise LostRaceError(name, "back-fill lifecycle metadata of")


def _retry(
    store: EndpointStore,
    name: str,
    operation: str,
    write: Callable[[EndpointRecord], EndpointRecord | None],
    *,
    pinned: bool = False,
) -> EndpointRecord:
    for _ in range(1 if pinned else ATTEMPTS):
        record = fresh(store, name)
        result = write(record)
        if result is not None:
            return result
    raise LostRaceError(name, operation)


def create(
    store: EndpointStore,
    name: str,
    spec: EndpointSpec | Mapping[str, Any],
    target_regions: Iterable[str],
    *,
    namespace: str = DEFAULT_NAMESPACE,
    labels: Mapping[str, str] | None = None,
    created_by: str | None = None,
    admit: AdmissionHook | None = None,
) -> EndpointRecord:
    """A new endpoint in `target_regions` (`EndpointStore.create`). The spec and the Regions are
    checked before `admit` is asked for the admissions written with the record, so bad input is refused
    before any policy is read; what `admit` raises passes through, nothing written. One conditional
    write, not retried: a taken name stays taken.

    Raises:
        InvalidSpecError: a bad name, spec, Region, namespace or label; nothing is written.
        EndpointExistsError: the name is taken (also while a deleted record awaits purge).
    """
    names.endpoint_name(name)
    parsed = checked_spec(spec)
    targets = names.region_list(target_regions, allow_new=store.allow_new_regions)
    return store.create(
        name,
        parsed,
        targets,
        namespace=namespace,
        labels=labels,
        created_by=created_by,
        admissions=admit(None, parsed, targets) if admit else None,
    )


def stop(store: EndpointStore, name: str) -> EndpointRecord:
    """live -> stopped; a stopped endpoint is returned unchanged, nothing written (not even
    `updated_at`: docs/cli.md, "A stopped endpoint"); a deleted one is refused.

    Raises:
        InvalidSpecError: `name` is not an endpoint name.
        InvalidTransitionError: the endpoint is deleted.
        EndpointNotFoundError: no record has that name.
        LostRaceError: other writers won every attempt (`ATTEMPTS` fresh reads).
    """

    def write(record: EndpointRecord) -> EndpointRecord | None:
        if record.is_deleted:
            raise InvalidTransitionError(name, "stop", "deleted")
        if record.desired_state == "stopped":
            return record  # already stopped: no write
        return store.update_desired_state(name, "stopped", expected_lifecycle_id=record.lifecycle_id)

    return _retry(store, name, "stop", write)


def start(store: EndpointStore, name: str) -> EndpointRecord:
    """stopped -> running; an endpoint already deploying or running is returned unchanged (as `stop`
    of a stopped one is: either command run twice succeeds); a deleted one says "redeploy".

    Raises:
        InvalidSpecError: `name` is not an endpoint name.
        InvalidTransitionError: the endpoint is deleted.
        EndpointNotFoundError: no record has that name.
        LostRaceError: other writers won every attempt (`ATTEMPTS` fresh reads).
    """

    def write(record: EndpointRecord) -> EndpointRecord | None:
        if record.desired_state in LIVE_STATES:
            return record  # already started: no write
        return store.start(name, expected_lifecycle_id=record.lifecycle_id or "")

    return _retry(store, name, "start", write)


def scale(store: EndpointStore, name: str, replicas: int) -> EndpointRecord:
    """Set the replicas of a live endpoint, retrying a lost race on a fresh read.

    Raises:
        InvalidSpecError: an invalid name, or `replicas` not an integer from 0 to 1000.
        InvalidTransitionError: the endpoint cannot be scaled (deleted, autoscaled or disaggregated).
        EndpointNotFoundError: no record has that name.
        LostRaceError: other writers won every attempt (`ATTEMPTS` fresh reads).
    """
    names.endpoint_name(name)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= 1000:
        raise InvalidSpecError("replicas", "must be an integer from 0 to 1000")
    return _retry(
        store,
        name,
        "scale",
        lambda record: store.scale(name, replicas, expected_lifecycle_id=record.lifecycle_id or ""),
    )


def update_spec(
    store: EndpointStore,
    name: str,
    changes: Mapping[str, Any],
    *,
    replace: Mapping[str, Any] | None = None,
    admit: AdmissionHook | None = None,
) -> EndpointRecord:
    """Apply `changes` over `replace` (a whole new spec) or over the current spec; a live endpoint
    becomes deploying, a stopped one stays stopped (`EndpointStore.update_spec`). `admit` is asked,
    on each fresh read, for the admissions written in the same fenced update.

    Raises:
        InvalidSpecError: a bad name, or the new spec is invalid or not resident in the targets.
        InvalidTransitionError: the endpoint is deleted.
        EndpointNotFoundError: no record has that name.
        LostRaceError: other writers won every attempt (`ATTEMPTS` fresh reads).
    """

    def write(record: EndpointRecord) -> EndpointRecord | None:
        base = (
            dict(replace) if replace is not None else record.spec.model_dump(mode="json", exclude_none=True)
        )
        spec = parse_spec({**base, **changes})
        check_residency(spec, record.target_regions)
        if spec == record.spec:
            return record  # nothing to change: no write, no new rollout
        return store.update_spec(
            name,
            spec,
            expected_lifecycle_id=record.lifecycle_id or "",
            expected_updated_at=record.updated_at,
            stopped=record.desired_state == "stopped",
            admissions=admit(record, spec, record.target_regions) if admit else None,
        )

    return _retry(store, name, "update", write)


def change_regions(
    store: EndpointStore,
    name: str,
    *,
    add: Iterable[str] = (),
    remove: Iterable[str] = (),
    replace: Iterable[str] | None = None,
    admit: AdmissionHook | None = None,
) -> EndpointRecord:
    """New target Regions: `replace` them, or `add` and `remove` some; `admit` as for `update_spec`.

    Raises:
        InvalidSpecError: a bad name or Region, no Region left, or the spec's residency outside them.
        InvalidTransitionError: the endpoint is deleted.
        EndpointNotFoundError: no record has that name.
        LostRaceError: other writers won every attempt (`ATTEMPTS` fresh reads).
    """
    names.endpoint_name(name)
    allow = store.allow_new_regions
    additions = names.region_list(add, "--add", allow_empty=True, allow_new=allow)
    removals = names.region_list(remove, "--remove", allow_empty=True, allow_new=True)
    replacement = None if replace is None else names.region_list(replace, "--set", allow_new=allow)

    def write(record: EndpointRecord) -> EndpointRecord | None:
        base = replacement if replacement is not None else record.target_regions
        targets = [region for region in [*base, *additions] if region not in removals]
        targets = names.region_list(targets, "target_regions", allow_new=True)
        check_residency(record.spec, targets)
        if targets == record.target_regions:
            return record
        return store.update_target_regions(
            name,
            targets,
            expected_lifecycle_id=record.lifecycle_id or "",
            expected_updated_at=record.updated_at or "",
            admissions=admit(record, record.spec, targets) if admit else None,
        )

    return _retry(store, name, "change the Regions of", write)


def delete(
    store: EndpointStore,
    name: str,
    *,
    expected_lifecycle_id: str | None = None,
    expected_owner_label: tuple[str, str] | None = None,
) -> EndpointRecord:
    """Mark deleted (idempotent); with a pinned lifecycle or owner label, only that record.

    Raises:
        InvalidSpecError: a bad name, lifecycle id or label.
        EndpointNotFoundError: no record has that name.
        LostRaceError: the record is not the pinned lifecycle, or lacks the pinned owner label; or,
            unpinned, other writers won every attempt.
    """
    names.endpoint_name(name)
    if expected_lifecycle_id is not None:
        require_token(expected_lifecycle_id, "expected_lifecycle_id")
    if expected_owner_label is not None:
        names.label_key(expected_owner_label[0], "expected_label")
        names.label_value(expected_owner_label[1], "expected_label")
    pinned = expected_lifecycle_id is not None or expected_owner_label is not None

    def write(record: EndpointRecord) -> EndpointRecord | None:
        return store.update_desired_state(
            name, "deleted", expected_lifecycle_id=expected_lifecycle_id, expected_label=expected_owner_label
        )

    try:
        return _retry(store, name, "delete", write, pinned=pinned)
    except LostRaceError:
        current = store.get(name)
        if current is not None and expected_lifecycle_id and current.lifecycle_id != expected_lifecycle_id:
            raise LostRaceError(
                name, "delete", f"its lifecycle is {current.lifecycle_id}, not the expected one"
            ) from None
        if current is not None and expected_owner_label:
            key, value = expected_owner_label
            if current.labels.get(key) != value:
                raise LostRaceError(
                    name, "delete", f"its label {key} is {current.labels.get(key)!r}, not {value!r}"
                ) from None
        raise
