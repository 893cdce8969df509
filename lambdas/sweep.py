"""Lambda: the scheduled sweep of the Region's reconciler over every endpoint record."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from gco.reconcile.runtime import LazyReconciler
from gco.reconcile.sweep import sweep
from gco.tracing import LazyTracer

logger = Logger(service="gco-sweep")
tracer = LazyTracer(service="gco-sweep")
metrics = Metrics(namespace="gco", service="gco-sweep")
reconciler = LazyReconciler()


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    report = sweep(reconciler())
    metrics.add_metric(name="SweepEndpoints", unit=MetricUnit.Count, value=report.endpoints)
    metrics.add_metric(name="SweepFailures", unit=MetricUnit.Count, value=len(report.failed))
    logger.info("sweep finished", extra=report.as_dict())
    return report.as_dict()
