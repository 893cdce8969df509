"""The fenced table: token minting, a clock that only moves updated_at forward, and the
shared diagnosis of a lost condition. The store's writes are built on it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any

from gco.endpoints import conditions
from gco.endpoints.dynamo import ConditionLost, RecordTable
from gco.endpoints.errors import (
    EndpointError,
    EndpointNotFoundError,
    InvalidSpecError,
    InvalidTransitionError,
)
from gco.endpoints.expressions import Expression
from gco.endpoints.record import EndpointRecord
from gco.endpoints.tokens import MonotonicClock, is_token, new_token

# A write retried only because the stored updated_at was ahead of this host's clock.
CLOCK_ATTEMPTS = 3
# Draws of a token that collided with one the record already holds (a CSPRNG never repeats
# in practice; an injected token source in tests does).
MINT_ATTEMPTS = 8
log = logging.getLogger(__name__)


def require_token(value: str | None, field: str) -> str:
    """A 64-character lowercase hex token, or `InvalidSpecError` naming the missing fence.

    Raises:
        InvalidSpecError: the token is missing or not 64 lowercase hex characters (field `field`).
    """
    if value is None:
        raise InvalidSpecError(field, "is required: this write is fenced by it")
    if not is_token(value):
        raise InvalidSpecError(field, "must be a 64-character lowercase hex token")
    return value


class FencedTable(RecordTable):
    """Endpoint records with minted tokens and a strictly increasing updated_at."""

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        clock: MonotonicClock | None = None,
        token: Callable[[], str] = new_token,
        allow_new_regions: bool | None = None,
    ) -> None:
        super().__init__(client, table_name)
        self.clock = clock or MonotonicClock()
        self.token = token
        self.allow_new_regions = allow_new_regions

    def mint(self, taken: Collection[str] = ()) -> str:
        """A new token that is none of `taken` (the tokens the record already holds).

        Raises:
            EndpointError: the token source repeats tokens (it is not a CSPRNG).
        """
        for _ in range(MINT_ATTEMPTS):
            token = self.token()
            if is_token(token) and token not in taken:
                return token
        raise EndpointError("the token source keeps repeating tokens: it is not a CSPRNG")

    # -- plumbing ------------------------------------------------------------------------------

    def _advance(self, name: str, build: Callable[[str], Expression]) -> EndpointRecord:
        """An update that moves updated_at strictly past the stored value.

        The condition `updated_at < now` fails when this host's clock is behind the last
        writer's; then the write is built again with a reading past the stored value (the
        other clauses are evaluated afresh each time). Raises `ConditionLost` otherwise.
        """
        now = self.clock.now()
        for attempt in range(CLOCK_ATTEMPTS):
            expression = build(now)
            conditions.advancing(expression, now)
            expression.set(now, "updated_at")
            try:
                return self._update(name, expression)
            except ConditionLost as lost:
                stored = lost.old.updated_at if lost.old is not None else None
                if stored is None or stored < now or attempt == CLOCK_ATTEMPTS - 1:
                    raise
                now = self.clock.after(stored)
        raise AssertionError("unreachable")  # pragma: no cover

    def _fenced(
        self, name: str, build: Callable[[str], Expression], updated_at: str | None, operation: str
    ) -> EndpointRecord | None:
        """A write fenced by lifecycle (and snapshot, when given); a deleted record raises."""
        try:
            if updated_at is None:
                return self._advance(name, build)
            expression = build(updated_at)
            expression.set(self.clock.after(updated_at), "updated_at")  # past the pinned value
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
