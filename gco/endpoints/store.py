"""The fenced endpoint store (SPEC section 2): every write is one conditional DynamoDB request.

A write that loses its condition returns None (False for purge) and logs; when the failure is
a definite fact about the current record (missing, deleted, wrong state) it raises instead.
The diagnosis uses the item DynamoDB returns with the failed condition: no extra read.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gco import aws
from gco.endpoints import names
from gco.endpoints.codec import from_item, to_item
from gco.endpoints.dynamo import ConditionLost, RecordTable
from gco.endpoints.errors import (
    EndpointExistsError,
    EndpointNotFoundError,
    InvalidSpecError,
    InvalidTransitionError,
)
from gco.endpoints.expressions import Expression
from gco.endpoints.lifecycle import plan_backfill, plan_target_regions
from gco.endpoints.record import (
    DEFAULT_NAMESPACE,
    LIVE_STATES,
    EndpointRecord,
    check_desired_state,
    check_region_state,
    ingress_path_for,
    parse_record,
)
from gco.endpoints.spec import EndpointSpec, parse_spec
from gco.endpoints.tokens import MonotonicClock, is_token, new_token
from gco.env import DEFAULT_TABLE, TABLE_ENV

log = logging.getLogger(__name__)


def default_table_name() -> str:
    return os.environ.get(TABLE_ENV) or DEFAULT_TABLE


def _require_token(value: str | None, field: str) -> str:
    if not is_token(value):
        raise InvalidSpecError(field, "must be a 64-character lowercase hex token")
    return value  # type: ignore[return-value]


class EndpointStore(RecordTable):
    """Conditional reads and writes of endpoint records in the home Region's table."""

    def __init__(
        self,
        client: Any,
        table_name: str = DEFAULT_TABLE,
        *,
        clock: MonotonicClock | None = None,
        token: Callable[[], str] = new_token,
    ) -> None:
        super().__init__(client, table_name)
        self.clock = clock or MonotonicClock()
        self.token = token

    @classmethod
    def connect(cls, *, endpoint_url: str | None = None, table_name: str | None = None) -> EndpointStore:
        """A store on the home Region's table (env `INFERENCE_ENDPOINTS_TABLE_NAME`, `DYNAMODB_REGION`)."""
        return cls(aws.client("dynamodb", endpoint_url=endpoint_url), table_name or default_table_name())

    # -- reads ---------------------------------------------------------------------------------

    def list(
        self,
        desired_state: str | None = None,
        target_region: str | None = None,
        *,
        consistent_read: bool = False,
    ) -> list[EndpointRecord]:
        """Every record (all pages), newest first, optionally filtered."""
        expression = Expression()
        if desired_state is not None:
            expression.equals(check_desired_state(desired_state), "desired_state")
        if target_region is not None:
            names.region(target_region, "target_region")
            expression.require(
                f"contains({expression.path('target_regions')}, {expression.value(target_region)})"
            )
        arguments: dict[str, Any] = {"ConsistentRead": consistent_read}
        request = expression.request()
        if "ConditionExpression" in request:
            arguments["FilterExpression"] = request.pop("ConditionExpression")
            arguments.update(request)
        records: list[EndpointRecord] = []
        while True:
            page = self._call("scan", **arguments)
            records.extend(parse_record(from_item(item)) for item in page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        records.sort(key=lambda record: (record.created_at or "", record.endpoint_name), reverse=True)
        return records

    # -- lifecycle -----------------------------------------------------------------------------

    def create(
        self,
        name: str,
        spec: EndpointSpec | Mapping[str, Any],
        target_regions: Iterable[str],
        namespace: str = DEFAULT_NAMESPACE,
        labels: Mapping[str, str] | None = None,
        created_by: str | None = None,
    ) -> EndpointRecord:
        """A new lifecycle: deploying, a token per Region, cleanup = targets.

        Raises:
            InvalidSpecError: a bad name, spec, Region, namespace or label; nothing is written.
            EndpointExistsError: the name is taken (also while a deleted record awaits purge).
        """
        names.endpoint_name(name)
        parsed = parse_spec(dict(spec) if isinstance(spec, Mapping) else spec)
        regions = names.region_list(target_regions)
        names.namespace(namespace)
        label_map = names.labels(dict(labels or {}))
        now = self.clock.now()
        fields: dict[str, Any] = {
            "endpoint_name": name,
            "lifecycle_id": self.token(),
            "desired_state": "deploying",
            "target_regions": regions,
            "cleanup_regions": list(regions),
            "region_generations": {region: self.token() for region in regions},
            "namespace": namespace,
            "spec": parsed.model_dump(mode="json", exclude_none=True),
            "ingress_path": ingress_path_for(name),
            "created_at": now,
            "updated_at": now,
            "region_status": {},
            "labels": label_map,
            "created_by": created_by or "unknown",
        }
        expression = Expression()
        expression.missing("endpoint_name")
        try:
            self._write("put_item", Item=to_item(fields), **expression.request())
        except ConditionLost as lost:
            raise EndpointExistsError(name, lost.old.desired_state if lost.old else None) from None
        return parse_record(fields)

    def ensure_lifecycle_metadata(self, record: EndpointRecord) -> EndpointRecord | None:
        """Back-fill a legacy record from this strong snapshot; None if it changed meanwhile."""
        if not record.is_legacy:
            return record
        fields = plan_backfill(record, self.token, self.clock.after(record.updated_at))
        expression = Expression()
        expression.exists("endpoint_name")
        expression.missing("lifecycle_id")
        if record.updated_at is None:
            expression.missing("updated_at")
        else:
            expression.equals(record.updated_at, "updated_at")
        for field, value in fields.items():
            expression.set(value, field)
        expression.set_expression(
            f"if_not_exists({expression.path('region_status')}, {expression.value({})})", "region_status"
        )
        return self._update_or_none(record.endpoint_name, expression, "ensure_lifecycle_metadata")

    def update_desired_state(
        self,
        name: str,
        state: str,
        *,
        expected_label: tuple[str, str] | None = None,
        expected_lifecycle_id: str | None = None,
        expected_desired_state: str | None = None,
    ) -> EndpointRecord | None:
        """Move the desired state; the first move to deleted fixes the deletion generation.

        Raises:
            InvalidSpecError: bad state, or a non-delete move without `expected_lifecycle_id`.
            EndpointNotFoundError, InvalidTransitionError: the record is missing or deleted.
        """
        check_desired_state(state)
        expression = Expression()
        expression.exists("endpoint_name")
        if expected_lifecycle_id is not None:
            expression.equals(_require_token(expected_lifecycle_id, "expected_lifecycle_id"), "lifecycle_id")
        elif state != "deleted":
            raise InvalidSpecError("expected_lifecycle_id", f"is required to set desired_state {state}")
        if expected_desired_state is not None:
            expression.equals(
                check_desired_state(expected_desired_state, "expected_desired_state"), "desired_state"
            )
        if expected_label is not None:
            key, value = expected_label
            names.label_key(key, "expected_label")
            names.label_value(value, "expected_label")
            expression.equals(value, "labels", key)
        expression.require(f"{expression.path('desired_state')} <> {expression.value('deleted')}")
        expression.set(state, "desired_state")
        expression.set(self.clock.now(), "updated_at")
        if state == "deleted":
            expression.exists("lifecycle_id")
            expression.set(self.token(), "deletion_generation")
            expression.set_expression(expression.path("cleanup_regions"), "deletion_regions")
        try:
            return self._update(name, expression)
        except ConditionLost as lost:
            old = self._present(name, lost.old)
            if old.is_legacy:
                raise InvalidTransitionError(
                    name,
                    f"set desired_state {state} on",
                    old.desired_state,
                    "legacy record without lifecycle metadata: back-fill it first",
                ) from None
            if (
                old.is_deleted
                and state == "deleted"
                and self._fences_hold(old, expected_lifecycle_id, expected_desired_state, expected_label)
            ):
                return old  # delete is idempotent: the generation stays
            if old.is_deleted and state != "deleted":
                raise InvalidTransitionError(
                    name,
                    f"set desired_state {state} on",
                    "deleted",
                    "a deleted endpoint never comes back; redeploy it",
                ) from None
            log.info("stale desired_state write lost: endpoint=%s state=%s", name, state)
            return None

    def start(self, name: str, expected_lifecycle_id: str | None = None) -> EndpointRecord | None:
        """stopped -> running only."""
        expression = Expression()
        expression.exists("endpoint_name")
        expression.equals("stopped", "desired_state")
        if expected_lifecycle_id is not None:
            expression.equals(_require_token(expected_lifecycle_id, "expected_lifecycle_id"), "lifecycle_id")
        expression.set("running", "desired_state")
        expression.set(self.clock.now(), "updated_at")
        try:
            return self._update(name, expression)
        except ConditionLost as lost:
            old = self._present(name, lost.old)
            if old.is_deleted:
                raise InvalidTransitionError(
                    name, "start", "deleted", "redeploy it under a new lifecycle"
                ) from None
            if old.desired_state != "stopped":
                raise InvalidTransitionError(
                    name, "start", old.desired_state, "only a stopped endpoint can be started"
                ) from None
            log.info("stale start lost: endpoint=%s", name)
            return None

    def update_spec(
        self,
        name: str,
        spec: EndpointSpec | Mapping[str, Any],
        expected_lifecycle_id: str,
        expected_updated_at: str | None = None,
    ) -> EndpointRecord | None:
        """Replace the spec and set deploying."""
        parsed = parse_spec(dict(spec) if isinstance(spec, Mapping) else spec)
        expression = self._live_fences(expected_lifecycle_id, expected_updated_at)
        expression.set(parsed.model_dump(mode="json", exclude_none=True), "spec")
        expression.set("deploying", "desired_state")
        expression.set(self.clock.after(expected_updated_at), "updated_at")
        return self._update_fenced(name, expression, "update the spec of")

    def update_target_regions(
        self,
        name: str,
        targets: Iterable[str],
        cleanup: Iterable[str] = (),
        generations: Mapping[str, str] | None = None,
        *,
        expected_lifecycle_id: str,
        expected_updated_at: str,
    ) -> EndpointRecord | None:
        """New target Regions; cleanup only grows; a (re-)joining Region gets a new token."""
        regions = names.region_list(targets)
        extra_cleanup = names.region_list(cleanup, "cleanup_regions", allow_empty=True)
        for region, token in (generations or {}).items():
            names.region(region, "region_generations")
            _require_token(token, f"region_generations.{region}")
        snapshot = self._present(name, self.get(name))
        if snapshot.updated_at != expected_updated_at or snapshot.lifecycle_id != expected_lifecycle_id:
            if snapshot.is_deleted:
                raise InvalidTransitionError(name, "change the Regions of", "deleted")
            log.info("stale region change lost: endpoint=%s", name)
            return None
        plan = plan_target_regions(snapshot, regions, extra_cleanup, generations, self.token)
        expression = self._live_fences(expected_lifecycle_id, expected_updated_at)
        expression.set(plan.target_regions, "target_regions")
        expression.set(plan.cleanup_regions, "cleanup_regions")
        expression.set(plan.region_generations, "region_generations")
        expression.set(self.clock.after(expected_updated_at), "updated_at")
        return self._update_fenced(name, expression, "change the Regions of")

    def scale(self, name: str, replicas: int, expected_lifecycle_id: str) -> EndpointRecord | None:
        """Set spec.replicas of a live, non-mooncake, non-autoscaled endpoint."""
        if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= 1000:
            raise InvalidSpecError("replicas", "must be an integer from 0 to 1000")
        expression = Expression()
        expression.exists("endpoint_name")
        expression.equals(_require_token(expected_lifecycle_id, "expected_lifecycle_id"), "lifecycle_id")
        state = expression.path("desired_state")
        expression.require(f"{state} IN ({expression.value('deploying')}, {expression.value('running')})")
        expression.missing("spec", "mooncake")
        enabled = expression.path("spec", "autoscaling", "enabled")
        expression.require(f"attribute_not_exists({enabled}) OR {enabled} = {expression.value(False)}")
        expression.set(replicas, "spec", "replicas")
        expression.set(self.clock.now(), "updated_at")
        try:
            return self._update(name, expression)
        except ConditionLost as lost:
            old = self._present(name, lost.old)
            if old.desired_state not in LIVE_STATES:
                raise InvalidTransitionError(
                    name, "scale", old.desired_state, "only a deploying or running endpoint can be scaled"
                ) from None
            if old.spec.mooncake is not None:
                raise InvalidTransitionError(
                    name, "scale", old.desired_state, "mooncake endpoints scale per role in spec.mooncake"
                ) from None
            if old.spec.autoscaled:
                raise InvalidTransitionError(
                    name,
                    "scale",
                    old.desired_state,
                    "autoscaling is enabled; change spec.autoscaling instead",
                ) from None
            log.info("stale scale lost: endpoint=%s", name)
            return None

    # -- reconciler writes ---------------------------------------------------------------------

    def update_region_status(
        self,
        name: str,
        region: str,
        state: str,
        *,
        replicas_ready: int = 0,
        replicas_desired: int = 0,
        error: str | None = None,
        details: Mapping[str, Any] | None = None,
        expected_lifecycle_id: str | None = None,
        expected_region_generation: str | None = None,
        expected_deletion_generation: str | None = None,
    ) -> EndpointRecord | None:
        """Record one Region's observation under its fences; None (and a log line) when stale.

        An ordinary observation never lands on a deleted record. A deletion acknowledgement
        (`expected_deletion_generation`) needs desired_state deleted, that generation, the Region
        among deletion_regions, and no acknowledgement of that generation from it yet.
        """
        names.region(region)
        check_region_state(state)
        status: dict[str, Any] = {
            **dict(details or {}),
            "state": state,
            "replicas_ready": replicas_ready,
            "replicas_desired": replicas_desired,
            "last_sync": self.clock.now(),
        }
        for key, value in (
            ("lifecycle_id", expected_lifecycle_id),
            ("region_generation", expected_region_generation),
            ("deletion_generation", expected_deletion_generation),
            ("error", error),
        ):
            if value is not None:
                status[key] = value
        expression = Expression()
        expression.exists("endpoint_name")
        if expected_lifecycle_id is not None:
            expression.equals(_require_token(expected_lifecycle_id, "expected_lifecycle_id"), "lifecycle_id")
        if expected_region_generation is not None:
            token = _require_token(expected_region_generation, "expected_region_generation")
            expression.equals(token, "region_generations", region)
        if expected_deletion_generation is None:
            expression.require(f"{expression.path('desired_state')} <> {expression.value('deleted')}")
            expression.require(f"contains({expression.path('cleanup_regions')}, {expression.value(region)})")
        else:
            if state != "deleted":
                raise InvalidSpecError("state", "a deletion acknowledgement must have state deleted")
            generation = _require_token(expected_deletion_generation, "expected_deletion_generation")
            expression.equals("deleted", "desired_state")
            expression.equals(generation, "deletion_generation")
            expression.require(f"contains({expression.path('deletion_regions')}, {expression.value(region)})")
            acked = expression.path("region_status", region, "deletion_generation")
            expression.require(f"attribute_not_exists({acked}) OR {acked} <> {expression.value(generation)}")
        expression.set(status, "region_status", region)
        expression.set(self.clock.now(), "updated_at")
        try:
            return self._update(name, expression)
        except ConditionLost:
            log.info("stale region status ignored: endpoint=%s region=%s state=%s", name, region, state)
            return None

    def purge(
        self,
        name: str,
        *,
        expected_updated_at: str | None = None,
        expected_lifecycle_id: str | None = None,
        expected_deletion_generation: str | None = None,
    ) -> bool:
        """Remove a deleted record once every deletion Region acknowledged its generation.

        Returns True when the record is gone (also when it already was), False otherwise.
        """
        snapshot = self.get(name)
        if snapshot is None:
            return True
        generation = expected_deletion_generation or snapshot.deletion_generation
        pending = snapshot.pending_deletion_regions()
        if not snapshot.is_deleted or generation != snapshot.deletion_generation or pending:
            log.info("purge refused: endpoint=%s state=%s pending=%s", name, snapshot.desired_state, pending)
            return False
        expression = Expression()
        expression.equals("deleted", "desired_state")
        expression.equals(generation, "deletion_generation")
        expression.equals(snapshot.deletion_regions or [], "deletion_regions")
        for region in snapshot.deletion_regions or []:
            expression.equals(generation, "region_status", region, "deletion_generation")
        if expected_updated_at is not None:
            expression.equals(expected_updated_at, "updated_at")
        if expected_lifecycle_id is not None:
            expression.equals(expected_lifecycle_id, "lifecycle_id")
        try:
            self._write("delete_item", Key=self._key(name), **expression.request())
        except ConditionLost:
            log.info("purge lost a race: endpoint=%s", name)
            return False
        return True

    # -- plumbing ------------------------------------------------------------------------------

    def _live_fences(self, lifecycle_id: str, updated_at: str | None) -> Expression:
        expression = Expression()
        expression.exists("endpoint_name")
        expression.equals(_require_token(lifecycle_id, "expected_lifecycle_id"), "lifecycle_id")
        expression.require(f"{expression.path('desired_state')} <> {expression.value('deleted')}")
        if updated_at is not None:
            expression.equals(updated_at, "updated_at")
        return expression

    def _update_fenced(self, name: str, expression: Expression, operation: str) -> EndpointRecord | None:
        try:
            return self._update(name, expression)
        except ConditionLost as lost:
            old = self._present(name, lost.old)
            if old.is_deleted:
                raise InvalidTransitionError(name, operation, "deleted", "redeploy it") from None
            log.info("stale write lost: endpoint=%s operation=%s", name, operation)
            return None

    def _update_or_none(self, name: str, expression: Expression, operation: str) -> EndpointRecord | None:
        try:
            return self._update(name, expression)
        except ConditionLost:
            log.info("conditional write lost: endpoint=%s operation=%s", name, operation)
            return None

    @staticmethod
    def _fences_hold(
        old: EndpointRecord,
        lifecycle_id: str | None,
        desired_state: str | None,
        label: tuple[str, str] | None,
    ) -> bool:
        return (
            (lifecycle_id is None or old.lifecycle_id == lifecycle_id)
            and (desired_state is None or old.desired_state == desired_state)
            and (label is None or old.labels.get(label[0]) == label[1])
        )

    @staticmethod
    def _present(name: str, record: EndpointRecord | None) -> EndpointRecord:
        if record is None:
            raise EndpointNotFoundError(name)
        return record
