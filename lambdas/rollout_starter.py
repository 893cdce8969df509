"""Lambda: on the endpoint table's stream, start the rollout a record's `rollout_request` asks for.

For automation that only writes the table: a record gaining (or changing) `rollout_request` (an object
of `gco inference rollout`'s options: `image`, `waves`, `rule`, ...) starts the rollout state machine's
execution named by the endpoint, its lifecycle and the image (`gco.rollout.execution`), so a redelivered
stream record starts nothing twice. The event source mapping's filter passes only records that hold
the attribute; the handler starts only where it appeared or changed.

Its cold import is Powertools and the lazy tracer alone; the rollout's code and botocore's client
machinery are imported by the first invocation (tests/unit/lambdas/test_cold_imports.py).
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger

from gco.reconcile.tracing import LazyTracer

SERVICE = "gco-rollout-starter"
logger = Logger(service=SERVICE)
tracer = LazyTracer(service=SERVICE)
ALREADY = "ExecutionAlreadyExists"  # a finished execution of the same name: this request already ran


@logger.inject_lambda_context
@tracer.capture_lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    from gco import aws
    from gco.rollout import execution
    from gco.rollout.errors import ExecutionStartError
    from gco.rollout.service import requests_from_stream

    client = aws.client("stepfunctions")
    started: list[str] = []
    for settings, lifecycle in requests_from_stream(event.get("Records") or []):
        try:
            started.append(
                execution.start(client, os.environ[execution.STATE_MACHINE_ENV], settings, lifecycle)
            )
        except ExecutionStartError as error:
            if ALREADY not in str(error):
                raise
            logger.info("rollout already ran", extra={"endpoint": settings.endpoint})
    return {"started": started}
