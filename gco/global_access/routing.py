"""Which Regions may answer a request for an endpoint, best first: the global way in's one decision.

Both global ways in ask this function with a fresh read of the endpoint's record's serving fields
(`gco.endpoints.serving.ServingRecord`): the AWS authorizer (its answer goes to the Regional proxy
as `X-Gco-Serve-Region`) and the local global address (`gco.local.front`). A Region qualifies when:

- it is a target of a live record (desired `deploying` or `running`; a stopped or deleted endpoint
  is served nowhere, and a Region only being cleaned is no target);
- its observed status is of the record's lifecycle and `running`, or `updating` with a ready replica:
  a rollout keeps the old replicas until new ones are ready (`maxUnavailable: 0`, docs/reconciler.md),
  so an updating Region with `replicas_ready >= 1` still answers; `replicas_ready >= 1` in both;
- its status is fresh: `last_sync` at most `stale_after_s` seconds before `now` (`math.inf` turns the
  bound off: the reconciler writes the status when it changes, not on every sweep, so a record in a
  steady state keeps an old `last_sync`; whether a Region answers at all is the health checks' part);
- residency (`spec.residency`) allows it: a resident endpoint is served only from its allowed Regions,
  even when none of them qualifies (then nobody serves: the caller gets a 503, never another Region).

The order: `here` (the Region the request arrived in) first when it qualifies, then the
deployment's nearest-first `order`, then any other qualifying Region in the record's target order.
An empty answer means nobody can serve; `refusals` says why for each Region, for the 503's message.
Pure: the clock is a parameter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from gco.endpoints.serving import ServingRecord
from gco.endpoints.states import LIVE_STATES
from gco.endpoints.tokens import parse_timestamp

SERVING_STATES = frozenset({"running", "updating"})
# The header naming the Region that answered (added for the caller). The Region the authorizer chose
# and the mark of a forwarded request are `gco.front_door`'s (SERVE_REGION_HEADER, HOP_HEADER): the
# Regional proxy's renderer reads them too, and gco.reconcile may not import this package.
REGION_HEADER = "X-Gco-Region"


def allowed_regions(record: ServingRecord) -> list[str]:
    """The Regions the endpoint may be served from: its targets, narrowed by residency."""
    if record.residency is None:
        return list(record.target_regions)
    return record.residency.allowed(list(record.target_regions))


def resident(record: ServingRecord) -> bool:
    """Whether the endpoint's requests must stay in its allowed Regions."""
    return record.residency is not None and record.residency.enabled


def refusal(record: ServingRecord, region: str, now: datetime, stale_after_s: float) -> str | None:
    """Why `region` cannot serve the endpoint now (None: it can)."""
    if record.desired_state not in LIVE_STATES:
        return f"the endpoint is {record.desired_state}"
    if region not in record.target_regions:
        return "not a target Region"
    if region not in allowed_regions(record):
        return "outside the endpoint's residency"
    status = record.region_status.get(region)
    if status is None:
        return "no status yet"
    if record.lifecycle_id is not None and status.lifecycle_id != record.lifecycle_id:
        return "its status is of an earlier lifecycle"
    if status.state not in SERVING_STATES:
        return f"its state is {status.state}"
    if status.replicas_ready < 1:
        return f"{status.state} with no ready replica"
    if not math.isinf(stale_after_s):
        if status.last_sync is None:
            return "its status has no sync time"
        try:
            age = (now - parse_timestamp(status.last_sync)).total_seconds()
        except ValueError:
            return f"its sync time {status.last_sync[:40]!r} is not a timestamp"
        if age > stale_after_s:
            return f"its status is {age:.0f} s old (bound {stale_after_s:.0f} s)"
    return None


def choose_regions(
    record: ServingRecord,
    here: str | None,
    order: Sequence[str],
    now: datetime,
    stale_after_s: float,
) -> list[str]:
    """The Regions that may serve the endpoint, best first (see the module's docstring).

    Parameters:
        record: a fresh read of the endpoint's record.
        here: the Region the request arrived in (None: no Region, as at the local global address).
        order: the deployment's Regions, nearest first; Regions missing from it come after.
        now: the decision's time, for the staleness bound.
        stale_after_s: the oldest status that still counts, in seconds (`math.inf`: no bound).

    Returns:
        Qualifying Regions, no duplicates; empty when nobody can serve (answer 503 with `refusals`).
    """
    ranked = [*([here] if here else []), *order, *record.target_regions]
    chosen: list[str] = []
    for region in ranked:
        if region not in chosen and refusal(record, region, now, stale_after_s) is None:
            chosen.append(region)
    return chosen


def refusals(record: ServingRecord, now: datetime, stale_after_s: float) -> dict[str, str]:
    """Each allowed Region that cannot serve, with why (the 503's detail)."""
    found: dict[str, str] = {}
    for region in allowed_regions(record) or record.target_regions:
        reason = refusal(record, region, now, stale_after_s)
        if reason is not None:
            found[region] = reason
    return found


def unavailable_message(record: ServingRecord, now: datetime, stale_after_s: float) -> str:
    """The 503's message when `choose_regions` is empty: every allowed Region and why it cannot serve."""
    name = record.endpoint_name
    if record.desired_state not in LIVE_STATES:
        return f"endpoint {name!r} is {record.desired_state}"
    reasons = refusals(record, now, stale_after_s)
    if not reasons:
        return f"endpoint {name!r} has no target Region"
    detail = "; ".join(f"{region}: {reason}" for region, reason in reasons.items())
    where = "its resident Regions" if resident(record) else "its Regions"
    return f"endpoint {name!r} is not served in any of {where} ({detail})"
