"""The operator's face of the fenced endpoint store: every write is one conditional DynamoDB request.

A write that loses its condition returns None and logs; when the failure is a definite fact about
the current record (missing, deleted, wrong state) it raises instead. The diagnosis uses the item
DynamoDB returns with the failed condition: no extra read. The conditions themselves are in
`conditions.py`; docs/fencing.md explains each clause.

Every token is minted by the table (`FencedTable.mint`), from the CSPRNG, never proposed by a
caller. Every write moves `updated_at` strictly forward, even when this host's clock is behind the
last writer's (`FencedTable.advance`). The reconcilers' writes (Region status, acknowledgement,
purge) are the other face, `region_writes` (`gco.endpoints.region_writes.RegionWrites`), on the
same table.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gco import aws
from gco.endpoints import conditions, names
from gco.endpoints.admissions import Admissions, admissions_data
from gco.endpoints.dynamo import ConditionLost, Listing, RecordTable
from gco.endpoints.errors import (
    EndpointExistsError,
    EndpointNotFoundError,
    InvalidSpecError,
    InvalidTransitionError,
)
from gco.endpoints.expressions import Expression
from gco.endpoints.fenced import FencedTable, require_token
from gco.endpoints.lifecycle import plan_create, plan_target_regions
from gco.endpoints.limits import check_item_size, checked_spec
from gco.endpoints.record import (
    DEFAULT_NAMESPACE,
    EndpointRecord,
    check_desired_state,
    parse_record,
)
from gco.endpoints.region_writes import RegionWrites
from gco.endpoints.spec import EndpointSpec, check_residency
from gco.endpoints.states import LIVE_STATES
from gco.endpoints.tokens import MonotonicClock, new_token
from gco.env import DEFAULT_TABLE, TABLE_ENV

__all__ = ["EndpointStore", "Listing", "default_table_name"]
log = logging.getLogger(__name__)
EVIDENCE_ID = re.compile(r"[0-9a-f]{64}")  # an evidence record's id: the sha256 of its content


def default_table_name() -> str:
    """The table named by `INFERENCE_ENDPOINTS_TABLE_NAME`, else the default."""
    return os.environ.get(TABLE_ENV) or DEFAULT_TABLE


class EndpointStore:
    """Conditional reads and the operator's writes of endpoint records in the home Region's table.

    Parameters:
        client: a DynamoDB client; table_name: the table.
        clock, token: the table's clock and token source (`FencedTable`), injected in tests.
        allow_new_regions: accept a Region botocore's table does not list yet (`names.region`).

    Raises:
        StoreUnavailableError: from every method: DynamoDB failed after the client's retries.
        MalformedRecordError: from every method that returns a record: the stored item does not
            parse (`list` and `scan` leave such items out instead).
        EndpointError: from every method that mints a token: the token source repeats tokens (an
            injected one; the CSPRNG does not).
    """

    def __init__(
        self,
        client: Any,
        table_name: str = DEFAULT_TABLE,
        *,
        clock: MonotonicClock | None = None,
        token: Callable[[], str] = new_token,
        allow_new_regions: bool | None = None,
    ) -> None:
        self.table = FencedTable(RecordTable(client, table_name), clock=clock, token=token)
        self.allow_new_regions = allow_new_regions
        self.region_writes = RegionWrites(self.table)  # the reconcilers' face, on the same table

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

    @property
    def client(self) -> Any:
        """The DynamoDB client (a test or benchmark may wrap it: both faces then use the wrapper)."""
        return self.table.records.client

    @client.setter
    def client(self, client: Any) -> None:
        self.table.records.client = client

    @property
    def table_name(self) -> str:
        return self.table.records.table_name

    @property
    def clock(self) -> MonotonicClock:
        return self.table.clock

    def get(self, name: str, consistent_read: bool = True) -> EndpointRecord | None:
        """The record of `name`, or None (strongly consistent unless asked otherwise)."""
        return self.table.records.get(name, consistent_read)

    def get_many(
        self, names: Sequence[str], consistent_read: bool = True
    ) -> dict[str, EndpointRecord | None]:
        """The records of `names` in as few calls as DynamoDB allows (BatchGetItem), None for a name
        with no record; a name is left out when it could not be read so (its key unprocessed after
        retries, or its item unparseable): read it with `get`."""
        return self.table.records.get_many(names, consistent_read)

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
        """
        where = Expression()
        if desired_state is not None:
            where.equals("list.state", check_desired_state(desired_state), "desired_state")
        if target_region is not None:
            names.region(target_region, "target_region", allow_new=self.allow_new_regions)
            where.contains("list.region", target_region, "target_regions")
        return self.table.records.scan(where, consistent_read=consistent_read)

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
        fields = plan_create(
            name,
            parsed.model_dump(mode="json", exclude_none=True),
            regions,
            self.table.mint,
            self.clock.now(),
            namespace=namespace,
            labels=label_map,
            created_by=creator,
        )
        if admissions:
            fields["admissions"] = admissions_data(admissions)
        check_item_size(fields)
        expression = Expression()
        conditions.create(expression)
        try:
            self.table.records.put(fields, expression)
        except ConditionLost as lost:
            raise EndpointExistsError(name, lost.old.desired_state if lost.old else None) from None
        return parse_record(fields)

    def ensure_lifecycle_metadata(self, record: EndpointRecord) -> EndpointRecord | None:
        """Back-fill a legacy record from this strong snapshot; None if it changed meanwhile
        (`FencedTable.backfill`)."""
        return self.table.backfill(record)

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
                expression.set(self.table.mint(), "deletion_generation")
                expression.set_expression(expression.path("cleanup_regions"), "deletion_regions")
                expression.set(now, "deleted_at")  # from when a Region's silence counts (`forget`)
            return expression

        try:
            return self.table.advance(name, build)
        except ConditionLost as lost:
            old = _present(name, lost.old)
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
                and _fences_hold(old, expected_lifecycle_id, expected_desired_state, expected_label)
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
            InvalidSpecError: `expected_lifecycle_id` is not a token.
            EndpointNotFoundError: there is no record.
            InvalidTransitionError: the record is not stopped, or is deleted.
        """
        lifecycle = require_token(expected_lifecycle_id, "expected_lifecycle_id")

        def build(now: str) -> Expression:
            expression = Expression()
            conditions.start(expression, lifecycle)
            expression.set("running", "desired_state")
            return expression

        try:
            return self.table.advance(name, build)
        except ConditionLost as lost:
            old = _present(name, lost.old)
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

        Raises:
            InvalidSpecError: an invalid spec, or `expected_lifecycle_id` is not a token.
            EndpointNotFoundError: there is no record.
            InvalidTransitionError: the record is deleted.
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
            InvalidSpecError: a bad Region, or `expected_lifecycle_id` is not a token.
            EndpointNotFoundError: there is no record.
            InvalidTransitionError: the record is deleted.
        """
        regions = names.region_list(targets, allow_new=self.allow_new_regions)
        extra_cleanup = names.region_list(
            cleanup, "cleanup_regions", allow_empty=True, allow_new=self.allow_new_regions
        )
        lifecycle = require_token(expected_lifecycle_id, "expected_lifecycle_id")
        snapshot = _present(name, self.get(name))
        if snapshot.updated_at != expected_updated_at or snapshot.lifecycle_id != lifecycle:
            if snapshot.is_deleted:
                raise InvalidTransitionError(name, "change the Regions of", "deleted")
            log.info("stale region change lost: endpoint=%s", name)
            return None
        plan = plan_target_regions(snapshot, regions, extra_cleanup, self.table.mint)

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
            EndpointNotFoundError: there is no record.
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
            EndpointNotFoundError: there is no record.
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
            return self.table.advance(name, build)
        except ConditionLost as lost:
            old = _present(name, lost.old)
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

    def _fenced(
        self, name: str, build: Callable[[str], Expression], updated_at: str | None, operation: str
    ) -> EndpointRecord | None:
        """A write fenced by lifecycle (and by the `updated_at` snapshot, when given): None when it
        lost to a newer write of the same lifecycle.

        Raises:
            EndpointNotFoundError: there is no record.
            InvalidTransitionError: the record is deleted.
        """
        try:
            return self.table.advance(name, build, pinned=updated_at)
        except ConditionLost as lost:
            old = _present(name, lost.old)
            if old.is_deleted:
                raise InvalidTransitionError(name, operation, "deleted", "redeploy it") from None
            log.info("stale write lost: endpoint=%s operation=%s", name, operation)
            return None


def _present(name: str, record: EndpointRecord | None) -> EndpointRecord:
    """The record a lost condition returned, or `EndpointNotFoundError` when there was none."""
    if record is None:
        raise EndpointNotFoundError(name)
    return record


def _fences_hold(
    old: EndpointRecord,
    lifecycle_id: str | None,
    desired_state: str | None,
    label: tuple[str, str] | None,
) -> bool:
    """Whether `old` still matches every fence the caller gave (None: not fenced by it)."""
    return (
        (lifecycle_id is None or old.lifecycle_id == lifecycle_id)
        and (desired_state is None or old.desired_state == desired_state)
        and (label is None or old.labels.get(label[0]) == label[1])
    )
