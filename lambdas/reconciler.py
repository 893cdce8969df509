"""Lambda: the Region's copy of the endpoint table's stream -> the Regional reconciler.

Reports partial batch failures (ReportBatchItemFailures); a record that keeps failing goes to
the dead-letter queue after the mapping's bounded retries. The reconciler is built once per
execution environment. Each failed endpoint is logged with its kind (`gco.reconcile.failures`);
only an unreadable record is also counted, as the metric `UnreadableRecords`, which the Regional
stack alarms on (`count_failure`).

The handler module imports only what the cold start needs (Powertools, the failure kinds, the lazy
reconciler); the reconciler's code (pydantic models, botocore) is imported by the first invocation
(`tests/unit/lambdas/test_cold_imports.py` keeps it so; docs/benchmarks.md says why).
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from gco.reconcile.failures import METRICS_NAMESPACE, STREAM_SERVICE, UNREADABLE_METRIC, FailureKind
from gco.reconcile.runtime import LazyReconciler
from gco.reconcile.tracing import LazyTracer

logger = Logger(service=STREAM_SERVICE)
tracer = LazyTracer(service=STREAM_SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=STREAM_SERVICE)
reconciler = LazyReconciler()


def count_failure(kind: FailureKind) -> None:
    """Count an unreadable record as `UnreadableRecords`; every other kind is only logged."""
    if kind == "unreadable":
        metrics.add_metric(name=UNREADABLE_METRIC, unit=MetricUnit.Count, value=1)


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from gco.reconcile.handler import handle_stream_event  # on the first invocation (module docstring)

    response = handle_stream_event(event, reconciler(), context, on_failure=count_failure)
    records, failed = len(event.get("Records") or []), len(response["batchItemFailures"])
    metrics.add_metric(name="RecordsReconciled", unit=MetricUnit.Count, value=records - failed)
    metrics.add_metric(name="RecordsFailed", unit=MetricUnit.Count, value=failed)
    return response
