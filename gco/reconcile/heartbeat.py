"""The reconciler's heartbeat: each scheduled sweep that could read its Region says so in an SSM
parameter of that Region, so that `deploy --wait` can tell a Region whose reconciler runs from one
where none does.

The heartbeat is not in the endpoint table: a sweep over endpoints already as desired writes nothing
there (docs/reconciler.md). It is one String parameter per table and Region, overwritten by each
sweep: `/gco/<table>/reconciler/<region>/heartbeat`, holding `{"at": "<UTC time>Z", "every_s":
<the sweep's interval>}`, so a reader judges its age by the interval of the reconciler that wrote
it. Parameter Store keeps the 100 latest versions of a parameter and deletes the oldest one on each
overwrite (unless it carries a label), so the history does not grow (SSM API reference,
PutParameter and ParameterMaxVersionLimitExceeded).

A failed heartbeat write is logged and never fails the sweep: the endpoints were reconciled all the
same; only the next `deploy --wait` hears of it, as an older heartbeat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from gco.reconcile.errors import HeartbeatError

log = logging.getLogger(__name__)
PARAMETER = "/gco/{table}/reconciler/{region}/heartbeat"
# A heartbeat older than this many sweep intervals is not live: one sweep late is a slow sweep or a
# retried invocation (the schedule retries twice), three is a reconciler that no longer runs.
STALE_SWEEPS = 3
# ...and never less than this: a sweep every fraction of a second (tests) is late by seconds on a
# loaded machine without its reconciler being gone.
STALE_FLOOR_S = 10.0


def parameter_name(table: str, region: str) -> str:
    """The heartbeat parameter of the reconciler serving `table` in `region`."""
    return PARAMETER.format(table=table, region=region)


def parameter_arn(*, partition: str, region: str, account: str, table: str) -> str:
    """The parameter's ARN, as IAM policies name it (the name's leading slash is not repeated)."""
    name = parameter_name(table, region).lstrip("/")
    return f"arn:{partition}:ssm:{region}:{account}:parameter/{name}"


class Heartbeat(BaseModel):
    """One heartbeat: when the sweep that wrote it finished, and how often that reconciler sweeps."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    at: AwareDatetime
    every_s: float = Field(gt=0)

    def to_value(self) -> str:
        return self.model_dump_json()


class Parameters(Protocol):
    """The two Parameter Store calls the heartbeat needs (one Region's)."""

    def put(self, name: str, value: str) -> None:
        """Create or overwrite the String parameter `name`."""

    def get(self, name: str) -> str | None:
        """The parameter's value, or None where it does not exist."""


class SsmParameters:
    """`Parameters` over a boto3 SSM client; boto errors become `HeartbeatError` here.

    Stand-in: the moto server's SSM (tests/functional/reconcile/test_heartbeat.py), reached over HTTP.
    """

    def __init__(self, client: Any) -> None:
        self.client = client

    def put(self, name: str, value: str) -> None:
        """Write a parameter, overwriting it.

        Raises:
            HeartbeatError: SSM refused or could not be reached.
        """
        try:
            self.client.put_parameter(Name=name, Value=value, Type="String", Overwrite=True)
        except (ClientError, BotoCoreError) as error:
            raise HeartbeatError(f"cannot write {name}: {error}") from error

    def get(self, name: str) -> str | None:
        """A parameter's value, or None where it does not exist.

        Raises:
            HeartbeatError: SSM refused or could not be reached.
        """
        try:
            value: str = self.client.get_parameter(Name=name)["Parameter"]["Value"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ParameterNotFound":
                return None
            raise HeartbeatError(f"cannot read {name}: {error}") from error
        except BotoCoreError as error:
            raise HeartbeatError(f"cannot read {name}: {error}") from error
        return value


def utc_now() -> datetime:
    return datetime.now(UTC)


class HeartbeatWriter:
    """Writes the heartbeat of the reconciler of `table` that sweeps every `every_s` seconds.

    Parameters:
        parameters: the Parameter Store of the reconciler's own Region.
        clock: the time written (injected for tests).
    """

    def __init__(
        self,
        parameters: Parameters,
        table: str,
        every_s: float,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.parameters, self.table, self.every_s, self.clock = parameters, table, every_s, clock

    def beat(self, region: str) -> bool:
        """Write the heartbeat now; False (and a log line) where it could not be written. Never raises."""
        heartbeat = Heartbeat(at=self.clock(), every_s=self.every_s)
        try:
            self.parameters.put(parameter_name(self.table, region), heartbeat.to_value())
        except Exception as error:  # the sweep's work is done: a missed heartbeat only ages the last one
            log.warning("heartbeat of %s not written: %s", region, error)
            return False
        return True


def read_heartbeat(parameters: Parameters, table: str, region: str) -> Heartbeat | None:
    """The last heartbeat of the reconciler of `table` in `region`; None where none was ever written.

    Raises:
        HeartbeatError: the parameter cannot be read, or does not hold a heartbeat.
    """
    name = parameter_name(table, region)
    value = parameters.get(name)
    if value is None:
        return None
    try:
        return Heartbeat.model_validate_json(value)
    except ValidationError as error:
        raise HeartbeatError(f"{name} holds no heartbeat: {error.errors()[0]['msg']}") from None


@dataclass(frozen=True)
class Liveness:
    """Whether a Region's reconciler is live, judged from its last heartbeat at `now`."""

    heartbeat: Heartbeat | None
    age_s: float | None

    @property
    def live(self) -> bool:
        if self.heartbeat is None or self.age_s is None:
            return False
        return self.age_s <= stale_after(self.heartbeat)

    def describe(self) -> str:
        """`no live reconciler: ...` or `reconciler live: ...`, with the last heartbeat's time and age."""
        if self.heartbeat is None or self.age_s is None:
            return "no live reconciler: no heartbeat was ever written"
        at = self.heartbeat.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        last = f"last heartbeat {at}, {_age(self.age_s)} ago"
        return f"reconciler live: {last}" if self.live else f"no live reconciler: {last}"


def stale_after(heartbeat: Heartbeat) -> float:
    """The one staleness bound, from the sweep interval of the reconciler that wrote `heartbeat`:
    `STALE_SWEEPS` intervals (at least `STALE_FLOOR_S`). A heartbeat older is not live; an
    observation older is stale."""
    return max(STALE_SWEEPS * heartbeat.every_s, STALE_FLOOR_S)


def observation_stale(seen_at: datetime | None, heartbeat: Heartbeat | None, now: datetime) -> str | None:
    """Why a Region's observation of an endpoint, last written at `seen_at` (its status's
    `last_sync`), is stale at `now`; None while it is fresh, or where nothing says otherwise.

    A reconciler re-reads every endpoint at each sweep and writes only what changed
    (docs/reconciler.md), so its live heartbeat confirms every observation it holds: an
    observation is stale only when neither its last write nor its reconciler's last heartbeat is
    within `stale_after`. Without a heartbeat (none was ever written, an older reconciler) there
    is no bound to judge by: None.
    """
    if heartbeat is None:
        return None
    latest = max(moment for moment in (seen_at, heartbeat.at) if moment is not None)
    age = max(0.0, (now - latest).total_seconds())
    if age <= stale_after(heartbeat):
        return None
    beat = heartbeat.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"last confirmed {_age(age)} ago; its reconciler's last heartbeat {beat}"


def liveness(heartbeat: Heartbeat | None, now: datetime) -> Liveness:
    """Pure: the heartbeat's age at `now` (a clock behind the writer's counts as age 0)."""
    if heartbeat is None:
        return Liveness(None, None)
    return Liveness(heartbeat, max(0.0, (now - heartbeat.at).total_seconds()))


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"
