"""Lambda: the scheduled sweep of the Region's reconciler over every endpoint record.

The sweep never raises for one endpoint (`gco.reconcile.sweep`): per-endpoint failures and
unreadable records are counted (the Regional stack alarms on `UnreadableRecords`); only a Region
that could not be listed at all fails the invocation, so the function's Errors alarm fires.
Then the matrix endpoints of this Region whose run's deadline has passed are deleted
(`gco.reconcile.expiry`): the cleanup of a run whose GPU runner never came back. A sweep that could
list its Region ends with the reconciler's heartbeat, an SSM parameter of the Region
(`gco.reconcile.heartbeat`) that `deploy --wait` reads. Each sweep also prints, as embedded metric
format records, every endpoint's replicas and, where the Region runs Prometheus, its time to first
token p50 and p99 (`gco.reconcile.engine_metrics`), which the dashboards draw.

The handler module imports only what the cold start needs; the sweep's and the reconciler's code
is imported by the first invocation (`tests/unit/lambdas/test_cold_imports.py`; docs/benchmarks.md).
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, single_metric
from aws_lambda_powertools.metrics import MetricUnit

from gco.reconcile.errors import SweepFailedError
from gco.reconcile.failures import METRICS_NAMESPACE, SWEEP_SERVICE, UNREADABLE_METRIC
from gco.reconcile.replica_metrics import (
    ENDPOINT_DIMENSION,
    NOT_READY_METRIC,
    REPLICAS_DESIRED_METRIC,
    REPLICAS_READY_METRIC,
    not_ready,
)
from gco.reconcile.runtime import LazyReconciler, heartbeat_from_env
from gco.reconcile.tracing import LazyTracer

if TYPE_CHECKING:
    from gco.reconcile.engine_metrics import TtftReading
    from gco.reconcile.sweep import SweepReport

logger = Logger(service=SWEEP_SERVICE)
tracer = LazyTracer(service=SWEEP_SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SWEEP_SERVICE)
reconciler = LazyReconciler()
heartbeat = functools.cache(heartbeat_from_env)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from gco.reconcile.expiry import destroy_expired  # on the first invocation (module docstring)
    from gco.reconcile.sweep import sweep

    report = sweep(reconciler(), heartbeat=heartbeat())
    metrics.add_metric(name="SweepEndpoints", unit=MetricUnit.Count, value=report.endpoints)
    metrics.add_metric(name="SweepFailures", unit=MetricUnit.Count, value=len(report.failed))
    metrics.add_metric(name=UNREADABLE_METRIC, unit=MetricUnit.Count, value=len(report.unreadable))
    publish_replicas(report)
    reading = read_engine_metrics()
    if reading is not None:
        publish_ttft(reading)
    expired = destroy_expired(reconciler().store, region=reconciler().region, now=time.time())
    metrics.add_metric(name="ExpiredMatrixEndpoints", unit=MetricUnit.Count, value=len(expired.destroyed))
    logger.info("sweep finished", extra={**report.as_dict(), "expired_matrix": vars(expired)})
    if report.error is not None:
        raise SweepFailedError(f"the sweep could not list the Region: {report.error}")
    return report.as_dict()


def publish_replicas(report: SweepReport) -> None:
    """Each endpoint's ready and desired replicas (one EMF record per metric, dimensions `service` and
    `endpoint`), and the number of endpoints short of ready (gco.reconcile.replica_metrics)."""
    if report.error is not None:
        return  # nothing was listed: no count is known
    metrics.add_metric(name=NOT_READY_METRIC, unit=MetricUnit.Count, value=len(not_ready(report.replicas)))
    for name, (ready, desired) in sorted(report.replicas.items()):
        for metric, value in ((REPLICAS_READY_METRIC, ready), (REPLICAS_DESIRED_METRIC, desired)):
            with single_metric(
                name=metric,
                unit=MetricUnit.Count,
                value=value,
                namespace=METRICS_NAMESPACE,
                default_dimensions={"service": SWEEP_SERVICE, ENDPOINT_DIMENSION: name},
            ):
                pass


def read_engine_metrics() -> TtftReading | None:
    """The endpoints' time to first token from the Region's Prometheus; None where the Region has no
    Prometheus server (the stack did not install it: `gco.reconcile.addons.ADDONS_ENV`)."""
    from gco.reconcile.addons import PROMETHEUS
    from gco.reconcile.engine_metrics import PodProxyCluster, read_ttft

    region = reconciler()
    present = region.settings.addons
    if present is not None and PROMETHEUS not in present:
        return None
    if not isinstance(region.cluster, PodProxyCluster):
        return None
    return read_ttft(region.cluster)


def publish_ttft(reading: TtftReading) -> None:
    """Each endpoint's TTFT p50 and p99 in seconds (one EMF record per metric, dimensions `service` and
    `endpoint`, as the replica counts), for the endpoints that served a request in the query's window."""
    if reading.problem is not None:
        logger.warning("time to first token not read", extra={"problem": reading.problem})
    for metric, by_endpoint in sorted(reading.values.items()):
        for name, seconds in sorted(by_endpoint.items()):
            with single_metric(
                name=metric,
                unit=MetricUnit.Seconds,
                value=seconds,
                namespace=METRICS_NAMESPACE,
                default_dimensions={"service": SWEEP_SERVICE, ENDPOINT_DIMENSION: name},
            ):
                pass
