"""The reconcilers' face of the store: one Region's status under its fences, and the purge.

An ordinary observation is fenced by the lifecycle id and the Region's membership token; a
deletion acknowledgement by the deletion generation. A stale writer gets None / False and a
log line, never an exception, and changes nothing. The operator's writes are
`gco.endpoints.store.EndpointStore`'s, which holds one of these (`EndpointStore.region_writes`) on
the same table; the reconciler writes records through it only (`gco.reconcile.record_writes`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from gco.endpoints import conditions, names
from gco.endpoints.dynamo import ConditionLost
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.expressions import Expression
from gco.endpoints.fenced import FencedTable, require_token
from gco.endpoints.record import EndpointRecord, check_region_state
from gco.endpoints.status_map import status_fields

log = logging.getLogger(__name__)


class RegionWrites:
    """Region status, acknowledgement and purge: what each Region's reconciler writes.

    Parameters:
        table: the fenced table, shared with the operator's face (one clock for both).

    Raises:
        StoreUnavailableError: from every method: DynamoDB failed after the client's retries.
        MalformedRecordError: from every method: the written or read record does not parse.
    """

    def __init__(self, table: FencedTable) -> None:
        self.table = table

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

        An ordinary observation needs `expected_lifecycle_id` and `expected_region_generation`
        and never lands on a deleted record. A deletion acknowledgement needs
        `expected_deletion_generation` (the lifecycle id is checked when given), desired_state
        deleted, the Region among deletion_regions, and no acknowledgement of that generation
        from it yet. `details` add fields to the status but never its fences.

        Raises:
            InvalidSpecError: a deletion acknowledgement whose state is not `deleted`, or an invalid state or
                detail.
        """
        names.region(region, allow_new=True)  # membership is the condition's business
        check_region_state(state)
        acknowledging = expected_deletion_generation is not None
        if acknowledging:
            if state != "deleted":
                raise InvalidSpecError("state", "a deletion acknowledgement must have state deleted")
            generation = require_token(expected_deletion_generation, "expected_deletion_generation")
            if expected_lifecycle_id is not None:
                require_token(expected_lifecycle_id, "expected_lifecycle_id")
        else:
            lifecycle = require_token(expected_lifecycle_id, "expected_lifecycle_id")
            token = require_token(expected_region_generation, "expected_region_generation")
        fences = {
            "lifecycle_id": expected_lifecycle_id,
            "region_generation": None if acknowledging else expected_region_generation,
            "deletion_generation": expected_deletion_generation,
        }

        def build(now: str) -> Expression:
            expression = Expression()
            if acknowledging:
                conditions.acknowledgement(expression, region, generation, expected_lifecycle_id)
            else:
                conditions.observation(expression, region, lifecycle, token)
            status = status_fields(state, replicas_ready, replicas_desired, now, error, details, fences)
            expression.set(status, "region_status", region)
            return expression

        try:
            return self.table.advance(name, build)
        except ConditionLost:
            log.info("stale region status ignored: endpoint=%s region=%s state=%s", name, region, state)
            return None

    def forget_region(
        self,
        name: str,
        region: str,
        *,
        expected_deletion_generation: str,
        expected_last_sync: str | None,
        details: Mapping[str, Any],
    ) -> EndpointRecord | None:
        """Acknowledge a deleted record's Region on behalf of a reconciler that is gone.

        Conditioned as the Region's own acknowledgement is (`conditions.acknowledgement`): on a
        deleted record the only write a Region's reconciler can make is that acknowledgement (an
        ordinary observation never lands on a deleted record), so a reconciler that acknowledges
        meanwhile makes this lose (`ack.once`: None). `details` record who forgot the Region,
        when and after how long a silence; the status keeps the Region's last write time
        (`expected_last_sync`, as the caller read it).

        Raises:
            InvalidSpecError: a bad Region, deletion generation or detail.
        """
        names.region(region, allow_new=True)
        generation = require_token(expected_deletion_generation, "expected_deletion_generation")

        def build(now: str) -> Expression:
            expression = Expression()
            conditions.acknowledgement(expression, region, generation, None)
            fences = {"deletion_generation": generation}
            status = status_fields("deleted", 0, 0, expected_last_sync or now, None, details, fences)
            expression.set(status, "region_status", region)
            return expression

        try:
            return self.table.advance(name, build)
        except ConditionLost:
            log.info("forget lost a race: endpoint=%s region=%s", name, region)
            return None

    def purge(
        self,
        name: str,
        *,
        expected_deletion_generation: str,
        expected_updated_at: str | None = None,
        expected_lifecycle_id: str | None = None,
    ) -> bool:
        """Remove a deleted record once every deletion Region acknowledged its generation.

        Returns:
            True when the record is gone (also when it already was), False otherwise.

        Raises:
            InvalidSpecError: a fence that is not a token.
        """
        generation = require_token(expected_deletion_generation, "expected_deletion_generation")
        if expected_lifecycle_id is not None:
            require_token(expected_lifecycle_id, "expected_lifecycle_id")
        snapshot = self.table.records.get(name)
        if snapshot is None:
            return True
        pending = snapshot.pending_deletion_regions()
        if not snapshot.is_deleted or generation != snapshot.deletion_generation or pending:
            log.info("purge refused: endpoint=%s state=%s pending=%s", name, snapshot.desired_state, pending)
            return False
        expression = Expression()
        conditions.purge(
            expression,
            generation,
            snapshot.deletion_regions or [],
            expected_lifecycle_id,
            expected_updated_at,
        )
        try:
            self.table.records.delete(name, expression)
        except ConditionLost:
            log.info("purge lost a race: endpoint=%s", name)
            return False
        return True
