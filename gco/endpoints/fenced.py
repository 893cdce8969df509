"""The table as both faces of the store write it: tokens minted here, `updated_at` only forward.

`FencedTable` holds a `RecordTable` (the DynamoDB edge), the clock and the token source; the
operator's writes (`gco.endpoints.store.EndpointStore`) and the reconcilers' writes
(`gco.endpoints.region_writes.RegionWrites`) each hold the same one, so both move one record's
`updated_at` with one clock. What a lost condition means is each write's own business: this module
only raises `ConditionLost` on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from gco.endpoints import conditions
from gco.endpoints.dynamo import ConditionLost, RecordTable
from gco.endpoints.errors import EndpointError, InvalidSpecError
from gco.endpoints.expressions import Expression
from gco.endpoints.lifecycle import plan_backfill, tokens_of
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


class FencedTable:
    """Endpoint records with minted tokens and a strictly increasing `updated_at`.

    Parameters:
        records: the DynamoDB edge every read and write goes through.
        clock: the readings `updated_at` takes (injected in tests).
        token: the token source (the OS CSPRNG; a test's replays collisions).

    Raises:
        StoreUnavailableError: from every method that reads or writes: DynamoDB failed.
    """

    def __init__(
        self,
        records: RecordTable,
        *,
        clock: MonotonicClock | None = None,
        token: Callable[[], str] = new_token,
    ) -> None:
        self.records = records
        self.clock = clock or MonotonicClock()
        self.token = token

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

    def advance(
        self, name: str, build: Callable[[str], Expression], pinned: str | None = None
    ) -> EndpointRecord:
        """An update (`build(now)` gives its clauses) that moves `updated_at` strictly forward.

        With `pinned` (the `updated_at` the caller read, which `build` conditions the write on) the
        write moves past that value, once. Without, the condition `updated_at < now` is added; it
        fails when this host's clock is behind the last writer's, and then the write is built
        again with a reading past the stored value (its other clauses evaluated afresh), at most
        `CLOCK_ATTEMPTS` times. Raises `ConditionLost` (with the record as it stood) otherwise.

        Raises:
            MalformedRecordError: the written record does not parse.
        """
        if pinned is not None:
            expression = build(pinned)
            expression.set(self.clock.after(pinned), "updated_at")
            return self.records.update(name, expression)
        now = self.clock.now()
        for _ in range(CLOCK_ATTEMPTS - 1):
            try:
                return self.records.update(name, _advancing(build, now))
            except ConditionLost as lost:
                stored = lost.old.updated_at if lost.old is not None else None
                if stored is None or stored < now:
                    raise  # lost to a clause other than the clock's
                now = self.clock.after(stored)
        return self.records.update(name, _advancing(build, now))

    def backfill(self, record: EndpointRecord) -> EndpointRecord | None:
        """Give a legacy record (written before lifecycle fences) its fences, from this strong
        snapshot: a minted lifecycle id and Region generations. The record itself when it is not
        legacy; None (and a log line) when it changed meanwhile.

        Raises:
            EndpointError: the token source repeats tokens.
            MalformedRecordError: the written record does not parse.
        """
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
        try:
            return self.records.update(record.endpoint_name, expression)
        except ConditionLost:
            log.info("back-fill lost: endpoint=%s", record.endpoint_name)
            return None


def _advancing(build: Callable[[str], Expression], now: str) -> Expression:
    """The clauses `build(now)` gives, conditioned on `updated_at < now` and setting it to `now`."""
    expression = build(now)
    conditions.advancing(expression, now)
    expression.set(now, "updated_at")
    return expression
