"""The fenced endpoint store: every write is one conditional DynamoDB request.

A write that loses its condition returns None (False for purge) and logs; when the failure is
a definite fact about the current record (missing, deleted, wrong state) it raises instead.
The diagnosis uses the item DynamoDB returns with the failed condition: no extra read.
The conditions themselves are in `conditions.py`; docs/fencing.md explains each clause.

Every token is minted here, from the CSPRNG, never proposed by a caller. Every write moves
`updated_at` strictly forward, even when this host's clock is behind the last writer's.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gco import aws
from gco.endpoints import conditions, names
from gco.endpoints.admissions import Admissions, admissions_data
from gco.endpoints.codec import from_item
from gco.endpoints.dynamo import ConditionLost
from gco.endpoints.errors import (
    EndpointExistsError,
    InvalidSpecError,
    InvalidTransitionError,
    MalformedRecordError,
)
from gco.endpoints.expressions import Expression
from gco.endpoints.fenced import require_token
from gco.endpoints.lifecycle import plan_backfill, plan_target_regions, tokens_of
from gco.endpoints.limits import check_item_size, checked_spec
from gco.endpoints.observations import ObservationWrites
from gco.endpoints.record import (
    DEFAULT_NAMESPACE,
    LIVE_STATES,
    EndpointRecord,
    check_desired_state,
    ingress_path_for,
    parse_record,
)
from gco.endpoints.spec import EndpointSpec, check_residency
from gco.endpoints.tokens import MonotonicClock, new_token
from gco.env import DEFAULT_TABLE, TABLE_ENV

log = logging.getLogger(__name__)


# A scan page holds up to 1 MB, so this bounds a listing at about 100 GB of records: never reached,
# but every loop is bounded.
MAX_SCAN_PAGES = 100_000
EVIDENCE_ID = re.compile(r"[0-9a-f]{64}")  # an evidence record's id: the sha256 of its content


@dataclass(frozen=True)
class Listing:
    """A scan's outcome: the readable records, newest first, and one error per unreadable item."""

    records: list[EndpointRecord]
    unreadable: list[MalformedRecordError]


def default_table_name() -> str:
    return os.environ.get(TABLE_ENV) or DEFAULT_TABLE


class EndpointStore(ObservationWrites):
    """Conditional reads and writes of endpoint records in the home Region's table."""

    def __init__(
        self,
        client: Any,
        table_name: str = DEFAULT_TABLE,
        *,
        clock: MonotonicClock | None = None,
        token: Callable[[], str] = new_token,
        allow_new_regions: bool | None = None,
    ) -> None:
        super().__init__(client, table_name, clock=clock, token=token, allow_new_regions=allow_new_regions)

    @classmethod
    def connect(
        cls,
        *,
        endpoint_url: str | None = None,
        table_name: str | None = None,
        allow_new_regions: bool | None = None,
    ) -> EndpointStore:
        """A store on the home Region's table (env `INFERENCE_ENDPOINTS_TABLE_NAME`, `DYNAMODB_REGION`)."""
        return cls(
            aws.client("dynamodb", endpoint_url=endpoint_url),
            table_name or default_table_name(),
            allow_new_regions=allow_new_regions,
        )

    # -- reads ---------------------------------------------------------------------------------

    def list(
        self,
        desired_state: str | None = None,
        target_region: str | None = None,
        *,
        consistent_read: bool = False,
    ) -> list[EndpointRecord]:
        """Every readable record (all pages), newest first, optionally filtered.

        An item that does not parse is left out and logged with its key and field (`scan` returns
        them): one malformed item never hides the others.
        """
        listing = self.scan(desired_state, target_region, consistent_read=consistent_read)
        for problem in listing.unreadable:
            log.warning("list: %s", problem)  # names the key and the field
        return listing.records

    def scan(
        self,
        desired_state: str | None = None,
        target_region: str | None = None,
        *,
        consistent_read: bool = False,
    ) -> Listing:
        """The whole table (all pages): the readable records, newest first, and the unreadable items.

        Raises:
            InvalidSpecError: a bad filter value.
            StoreUnavailableError: DynamoDB failed after retries.
        """
        expression = Expression()
        if desired_state is not None:
            expression.equals("list.state", check_desired_state(desired_state), "desired_state")
        if target_region is not None:
            names.region(target_region, "target_region", allow_new=self.allow_new_regions)
            expression.contains("list.region", target_region, "target_regions")
        arguments: dict[str, Any] = {"ConsistentRead": consistent_read}
        request = expression.request()
        if "ConditionExpression" in request:
            arguments["FilterExpression"] = request.pop("ConditionExpression")
            arguments.update(request)
        records: list[EndpointRecord] = []
        unreadable: list[MalformedRecordError] = []
        for _ in range(MAX_SCAN_PAGES):
            page = self._call("scan", **arguments)
            for item in page.get("Items", []):
                try:
                    records.append(parse_record(from_item(item)))
                except MalformedRecordError as error:
                    unreadable.append(error)
            if "LastEvaluatedKey" not in page:
                break
            arguments["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        records.sort(key=lambda record: (record.created_at or "", record.endpoint_name), reverse=True)
        return Listing(records, unreadable)

    # -- lifecycle -----------------------------------------------------------------------------

    def create(
        self,
        name: str,
        spec: EndpointSpec | Mapping[str, Any],
        target_regions: Iterable[str],
        namespace: str = DEFAULT_NAMESPACE,
        labels: Mapping[str, str] | None = None,
        created_by: str | None = None,
        admissions: Admissions | None = None,
    ) -> EndpointRecord:
        """A new lifecycle: deploying, a token per Region, cleanup = targets; `admissions` (what
        admitted each image in each Region, `gco.admission`) are written with it when given.

        Raises:
            InvalidSpecError: a bad name, spec, Region, namespace, label or an item too large;
                nothing is written.
            EndpointExistsError: the name is taken (also while a deleted record awaits purge).
        """
        names.endpoint_name(name)
        parsed = checked_spec(spec)
        regions = names.region_list(target_regions, allow_new=self.allow_new_regions)
        check_residency(parsed, regions)
        names.namespace(namespace)
        label_map = names.labels(dict(labels or {}))
        creator = names.text(created_by or "unknown", "created_by", max_length=256)
        now = self.clock.now()
        lifecycle = self.mint()
        generations: dict[str, str] = {}
        for region in regions:
            generations[region] = self.mint({lifecycle, *generations.values()})
        fields: dict[str, Any] = {
            "endpoint_name": name,
            "lifecycle_id": lifecycle,
            "desired_state": "deploying",
            "target_regions": regions,
            "cleanup_regions": list(regions),
            "region_generations": generations,
            "namespace": namespace,
            "spec": parsed.model_dump(mode="json", exclude_none=True),
            "ingress_path": ingress_path_for(name),
            "created_at": now,
            "updated_at": now,
            "region_status": {},
            "labels": label_map,
            "created_by": creator,
        }
        if admissions:
            fields["admissions"] = admissions_data(admissions)
        check_item_size(fields)
        expression = Expression()
        conditions.create(expression)
        try:
            self._put(fields, expression)
        except ConditionLost as lost:
            raise EndpointExistsError(name, lost.old.desired_state if lost.old else None) from None
        return parse_record(fields)

    def ensure_lifecycle_metadata(self, record: EndpointRecord) -> EndpointRecord | None:
        """Back-fill a legacy record from this strong snapshot; None if it changed meanwhile."""
        if not record.is_legacy:
            return record
        taken = tokens_of(record)
        fields = plan_backfill(record, lambda: self.mint(taken), self.clock.after(record.updated_at))
        expression = Expression()
        conditions.backfill(expression, record.updated_at)
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
        if expected_lifecycle_id is not None or state != "deleted":
            require_token(expected_lifecycle_id, "expected_lifecycle_id")
        if expected_desired_state is not None:
            check_desired_state(expected_desired_state, "expected_desired_state")
        if expected_label is not None:
            names.label_key(expected_label[0], "expected_label")
            names.label_value(expected_label[1], "expected_label")

        def build(now: str) -> Expression:
            expression = Expression()
            conditions.desired_state(
                expression, state, expected_lifecycle_id, expected_desired_state, expected_label
            )
            expression.set(state, "desired_state")
            if state == "deleted":
                expression.set(self.mint(), "deletion_generation")
                expression.set_expression(expression.path("cleanup_regions"), "deletion_regions")
                expression.set(now, "deleted_at")  # from when a Region's silence counts (`forget`)
            return expression

        try:
            return self._advance(name, build)
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

    def start(self, name: str, expected_lifecycle_id: str) -> EndpointRecord | None:
        """stopped -> running only, of the lifecycle the caller read.

        Raises:
            InvalidTransitionError: the record is not stopped, or is deleted.
        """
        lifecycle = require_token(expected_lifecycle_id, "expected_lifecycle_id")

        def build(now: str) -> Expression:
            expression = Expression()
            conditions.start(expression, lifecycle)
            expression.set("running", "desired_state")
            return expression

        try:
            return self._advance(name, build)
        except ConditionLost as lost:
            old = self._present(name, lost.old)
            if old.is_deleted:
                raise InvalidTransitionError(
                    name, "start", "deleted", "redeploy it under a new lifecycle"
                ) from None
            if old.desired_state != "stopped" and old.lifecycle_id == lifecycle:
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
        *,
        stopped: bool | None = None,
        admissions: Admissions | None = None,
    ) -> EndpointRecord | None:
        """Replace the spec; a running or deploying endpoint becomes deploying, a stopped one stays
        stopped (the spec is what it will run when started: a change never restarts GPU spend).

        Parameters:
            stopped: whether the caller read the record stopped (None: read it now). The write
                lands only while that still holds (`conditions.spec_change`); None when it lost.
            admissions: the whole `admissions` map to write in the same update (None: untouched).
        """
        parsed = checked_spec(spec)
        lifecycle = require_token(expected_lifecycle_id, "expected_lifecycle_id")
        if stopped is None:
            current = self.get(name, consistent_read=True)
            stopped = current is not None and current.desired_state == "stopped"

        def build(now: str) -> Expression:
            expression = Expression()
            conditions.live(expression, lifecycle, expected_updated_at)
            conditions.spec_change(expression, stopped)
            expression.set(parsed.model_dump(mode="json", exclude_none=True), "spec")
            if admissions is not None:
                expression.set(admissions_data(admissions), "admissions")
            if not stopped:
                expression.set("deploying", "desired_state")
            return expression

        return self._fenced(name, build, expected_updated_at, "update the spec of")

    def update_target_regions(
        self,
        name: str,
        targets: Iterable[str],
        cleanup: Iterable[str] = (),
        *,
        expected_lifecycle_id: str,
        expected_updated_at: str,
        admissions: Admissions | None = None,
    ) -> EndpointRecord | None:
        """New target Regions; cleanup only grows; a (re-)joining Region gets a freshly minted token;
        `admissions`, when given, replaces the map in the same update.

        Raises:
            InvalidTransitionError: the record is deleted.
        """
        regions = names.region_list(targets, allow_new=self.allow_new_regions)
        extra_cleanup = names.region_list(
            cleanup, "cleanup_regions", allow_empty=True, allow_new=self.allow_new_regions
        )
        lifecycle = require_token(expected_lifecycle_id, "expected_lifecycle_id")
        snapshot = self._present(name, self.get(name))
        if snapshot.updated_at != expected_updated_at or snapshot.lifecycle_id != lifecycle:
            if snapshot.is_deleted:
                raise InvalidTransitionError(name, "change the Regions of", "deleted")
            log.info("stale region change lost: endpoint=%s", name)
            return None
        plan = plan_target_regions(snapshot, regions, extra_cleanup, self.mint)

        def build(now: str) -> Expression:
            expression = Expression()
            conditions.live(expression, lifecycle, expected_updated_at)
            expression.set(plan.target_regions, "target_regions")
            expression.set(plan.cleanup_regions, "cleanup_regions")
            expression.set(plan.region_generations, "region_generations")
            if admissions is not None:
                expression.set(admissions_data(admissions), "admissions")
            return expression

        return self._fenced(name, build, expected_updated_at, "change the Regions of")

    def set_rollout_evidence(
        self, name: str, evidence_id: str, expected_lifecycle_id: str
    ) -> EndpointRecord | None:
        """Name the evidence record of the endpoint's last rollout (a sha256 hex id).

        Fenced as a spec change without a snapshot (`conditions.live`): the lifecycle the rollout
        ran on, not deleted; it changes nothing a reconciler reads. None when the fence lost.

        Raises:
            InvalidSpecError: `evidence_id` is not a sha256 hex digest, or no lifecycle id is given.
            InvalidTransitionError: the record is deleted.
        """
        if not isinstance(evidence_id, str) or not EVIDENCE_ID.fullmatch(evidence_id):
            raise InvalidSpecError("rollout_evidence", "must be a sha256 hex digest")
        lifecycle = require_token(expected_lifecycle_id, "expected_lifecycle_id")

        def build(now: str) -> Expression:
            expression = Expression()
            conditions.live(expression, lifecycle, None)
            expression.set(evidence_id, "rollout_evidence")
            return expression

        return self._fenced(name, build, None, "name the rollout evidence of")

    def scale(self, name: str, replicas: int, expected_lifecycle_id: str) -> EndpointRecord | None:
        """Set spec.replicas of a live, non-mooncake, non-autoscaled endpoint.

        Raises:
            InvalidSpecError: `replicas` is not an integer from 0 to 1000.
            InvalidTransitionError: the endpoint is deleted, autoscaled or disaggregated (mooncake).
        """
        if isinstance(replicas, bool) or not isinstance(replicas, int) or not 0 <= replicas <= 1000:
            raise InvalidSpecError("replicas", "must be an integer from 0 to 1000")
        lifecycle = require_token(expected_lifecycle_id, "expected_lifecycle_id")

        def build(now: str) -> Expression:
            expression = Expression()
            conditions.scale(expression, lifecycle)
            expression.set(replicas, "spec", "replicas")
            return expression

        try:
            return self._advance(name, build)
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
