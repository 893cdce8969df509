"""Acting on a plan: its deletes, then its applies, against one Region's cluster.

Every object of a plan is independent: its namespace exists (`Reconciler.ensure_system`), and no
object's admission depends on another (a Service or autoscaler may name a Deployment that does not
exist yet), so the applies go out concurrently, one round trip rather than one per object. An
object the endpoint's list did not show as its own is applied only once `ownership.claim` found its
name free or the endpoint's, in what the batch's lists saw or by reading it (a server-side apply with
`force` would take over whatever holds the name, and Kubernetes has no create-only apply:
kubernetes/kubernetes#116156).

What the deletes and applies did to the Region's routes goes into the reconcile's `Tally.routes`
(`route_keeper.note_deleted`, `note_applied`), for the route keeper to merge as the batch ends.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from gco.reconcile.batches import each_leaf
from gco.reconcile.errors import ClusterRejectedError, KindNotServedError
from gco.reconcile.objects import ObjectRef
from gco.reconcile.observation import ActResult, Observation
from gco.reconcile.ownership import claim
from gco.reconcile.planner import Plan
from gco.reconcile.port import Cluster
from gco.reconcile.proxy.route_keeper import is_route_key, note_applied, note_deleted
from gco.reconcile.record_writes import Tally

log = logging.getLogger(__name__)
MAX_APPLIES = 8  # applies of one plan in flight at once (a plan has at most a dozen objects)


def act(cluster: Cluster, region: str, name: str, seen: Observation, step: Plan, tally: Tally) -> ActResult:
    """Delete, then apply, what `step` says; counts and route changes go into `tally`.

    Returns the API server's answers to the applies, and the first apply it rejected (a refusal, an
    object held under its name by another owner, a kind it does not serve) as a terminal reason.

    Raises:
        ClusterError: the API server was unavailable or refused the credentials (retried later);
            a delete failed (its route effect is then unknown: `tally.routes.rebuild` is set).
    """
    if step.delete:
        try:
            cluster.delete(step.delete)
        except Exception:  # the deletes may or may not have been made
            if any(is_route_key(ref.kind, ref.namespace) for ref in step.delete):
                tally.routes.rebuild = True
            raise
        note_deleted(tally.routes, name, step.delete)
        tally.deleted += len(step.delete)
        log.info("deleted %d object(s): endpoint=%s region=%s", len(step.delete), name, region)
    owned = {ObjectRef.of(obj).key for obj in seen.objects}
    results = _apply_all(cluster, name, seen, step.apply, owned)
    note_applied(tally.routes, name, step.apply, results)
    answers = tuple(result for result in results if isinstance(result, dict))
    tally.applied += len(answers)
    for error in results:
        if isinstance(error, ClusterRejectedError):
            log.warning("rejected: endpoint=%s region=%s: %s", name, region, error)
            if isinstance(error, KindNotServedError):
                return ActResult(answers, f"{error.kind.kind} needs {error.needs} in {region}")
            return ActResult(answers, str(error))
        if isinstance(error, Exception):
            raise error
    return ActResult(answers)


def _apply_all(
    cluster: Cluster,
    name: str,
    seen: Observation,
    objects: Sequence[dict[str, Any]],
    owned: set[tuple[str, str, str]],
) -> list[dict[str, Any] | Exception]:
    """Each object applied (after `claim` for one not among `owned`, against what `seen` holds of
    the batch's lists when it has them), concurrently, results in plan order: the API server's
    answer or the error it raised."""

    def one(obj: dict[str, Any]) -> dict[str, Any] | Exception:
        try:
            if ObjectRef.of(obj).key not in owned:
                claim(cluster, name, seen.record, obj, seen.holders)
            return cluster.apply(obj)
        except Exception as error:  # returned in plan order; `act` decides
            return error

    return each_leaf(one, objects, MAX_APPLIES)
