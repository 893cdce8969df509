"""What the rollout state machine's Lambdas do, as functions of their events (`lambdas/rollout.py`).

- `advance(event, ports)`: the execution's input (`{"settings", "lifecycle_id"}`, `execution.py`) begins
  the rollout, a later event (`{"state"}`) takes one step; the answer is `{"state", "done", "waiting"}`,
  what the state machine's Choice reads;
- `give_up(event, ports)`: the Catch of any failed step (`{"state"}` or the input, and `error`), or an
  EventBridge status change of an execution that ended ABORTED, TIMED_OUT or FAILED (its `detail.input`):
  the canary goes (only if it is still this rollout's image on this rollout's lifecycle, so a late event
  never removes a newer rollout's canary), and every Region serves the primary;
- `requests_from_stream(records)`: the rollouts the table's stream asks for: a record whose
  `rollout_request` (an object of the rollout's options) appeared or changed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gco.endpoints import operations
from gco.endpoints.codec import from_item
from gco.endpoints.errors import MalformedRecordError
from gco.endpoints.store import EndpointStore
from gco.rollout.errors import RolloutInputError, RolloutSupersededError
from gco.rollout.state import RolloutSettings, parse_settings, parse_state
from gco.rollout.steps import Ports, abort, begin, remove_canary_of, step

log = logging.getLogger(__name__)

REQUEST_ATTRIBUTE = "rollout_request"  # the record attribute whose write starts a rollout
# The starter's event filter (Lambda event filtering, `gco.deployment.event_filter`): records whose new
# image holds a request naming its image. Matchers apply to leaves only, so the filter names the
# request's `image` string: on the request's map (`M`) itself it would never match.
STREAM_FILTER: dict[str, Any] = {
    "dynamodb": {"NewImage": {REQUEST_ATTRIBUTE: {"M": {"image": {"S": [{"exists": True}]}}}}}
}


def _answer(state: Any) -> dict[str, Any]:
    current = state.current()
    return {
        "state": state.model_dump(mode="json"),
        "done": state.done,
        "waiting": current is not None and current.phase == "waiting",
    }


def advance(event: Mapping[str, Any], ports_for: Callable[[RolloutSettings], Ports]) -> dict[str, Any]:
    """Begin (from the execution's input) or take one step (from a state) of a rollout.

    Parameters:
        ports_for: the ports of a rollout with these settings (the traffic needs the endpoint's
            record, the admission hook the reason the image may run unvalidated).

    Raises:
        RolloutInputError: a malformed event, or an endpoint that cannot be rolled out.
        RolloutSupersededError: the endpoint is not the lifecycle the rollout was started for.
        EndpointError, EvidenceError: the store or the evidence failed (the state machine's Catch).
        GcoError: the ports' admission hook refused the canary's image in a Region it reaches (an
            `AdmissionError` of `gco.admission`, which this package does not import), or could not
            read the policy; nothing was written for that Region.
    """
    if event.get("state") is not None:
        state = parse_state(event["state"])
        return _answer(step(state, ports_for(state.settings)))
    settings = parse_settings(event.get("settings"))
    lifecycle = event.get("lifecycle_id")
    if not isinstance(lifecycle, str) or not lifecycle:
        raise RolloutInputError("lifecycle_id", "is required")
    ports = ports_for(settings)
    record = operations.fresh(ports.store, settings.endpoint)
    if record.lifecycle_id != lifecycle:
        raise RolloutSupersededError(f"endpoint {settings.endpoint!r} is not lifecycle {lifecycle[:12]}...")
    return _answer(begin(settings, ports))


def _request_of(event: Mapping[str, Any]) -> Mapping[str, Any]:
    """The execution input an event carries: its own fields, or an EventBridge detail's `input`."""
    detail = event.get("detail")
    if isinstance(detail, Mapping) and isinstance(detail.get("input"), str):
        loaded = json.loads(detail["input"])
        return loaded if isinstance(loaded, Mapping) else {}
    return event


def give_up(
    event: Mapping[str, Any], ports_for: Callable[[RolloutSettings], Ports], store: EndpointStore
) -> dict[str, Any]:
    """Leave the endpoint on the primary everywhere after a failed, aborted or timed-out execution.

    Raises:
        RolloutInputError: the event names no rollout.
        EndpointError, EvidenceError: the store or the evidence failed.
    """
    request = _request_of(event)
    reason = f"the execution failed: {json.dumps(request.get('error'))[:512]}" if request.get("error") else ""
    if request.get("state"):  # the state machine's {} before Begin answered: no state yet
        state = parse_state(request["state"])
        ended = abort(state, ports_for(state.settings), reason or "the execution ended")
        return {"state": ended.model_dump(mode="json"), "removed": True}
    settings = parse_settings(request.get("settings"))
    lifecycle = str(request.get("lifecycle_id") or "")
    removed = remove_canary_of(store, settings.endpoint, settings.image, lifecycle)
    return {"endpoint": settings.endpoint, "removed": removed}


def requests_from_stream(records: Iterable[Mapping[str, Any]]) -> list[tuple[RolloutSettings, str]]:
    """(settings, lifecycle id) of each rollout the stream's records ask for (a new or changed
    `rollout_request` on a live record); a malformed request, or an image that does not decode, is
    skipped (it would fail every retry) and logged.
    """
    found: list[tuple[RolloutSettings, str]] = []
    for record in records:
        change = record.get("dynamodb") or {}
        try:
            new = from_item(change.get("NewImage") or {})
            old = from_item(change.get("OldImage") or {})
        except MalformedRecordError as error:
            log.warning("stream record skipped: %s", error)
            continue
        request = new.get(REQUEST_ATTRIBUTE)
        if not isinstance(request, dict) or request == old.get(REQUEST_ATTRIBUTE):
            continue
        if new.get("desired_state") not in ("deploying", "running") or not new.get("lifecycle_id"):
            continue
        try:
            settings = parse_settings({**request, "endpoint": new.get("endpoint_name")})
        except RolloutInputError:
            continue
        found.append((settings, str(new["lifecycle_id"])))
    return found
