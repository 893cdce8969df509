"""Lambda: the global front door's REQUEST authorizer (`gco.global_access.authorizer`).

Thin on purpose, for its cold start: no Powertools or X-Ray SDK (Lambda's JSON log format and
active tracing need neither), botocore rather than boto3, and the table reader built once per
execution environment, on the first request. It logs the decision with the key's id, never the key.
"""

from __future__ import annotations

import functools
import logging
import os
from datetime import UTC, datetime
from typing import Any

from gco.endpoints.errors import MalformedRecordError, StoreUnavailableError
from gco.env import AWS_REGION_ENV, TABLE_ENV
from gco.global_access.authorizer import (
    DECISION_MESSAGE,
    EFFECT_FIELD,
    FAILURE_MESSAGE,
    Settings,
    decide,
    policy,
)
from gco.global_access.authorizer_tables import DynamoTables
from gco.global_access.errors import KeyStoreError, UnauthorizedError
from gco.global_access.key_store import KEYS_TABLE_ENV

logger = logging.getLogger("gco.authorizer")
logger.setLevel(logging.INFO)


@functools.cache
def _runtime() -> tuple[Settings, DynamoTables]:
    region = os.environ[AWS_REGION_ENV]
    tables = DynamoTables(
        region=region, keys_table=os.environ[KEYS_TABLE_ENV], endpoints_table=os.environ[TABLE_ENV]
    )
    return Settings.from_env(os.environ, region), tables


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    settings, tables = _runtime()
    try:
        decision = decide(event, tables, settings, datetime.now(UTC))
    except (KeyStoreError, StoreUnavailableError, MalformedRecordError) as error:
        logger.error(FAILURE_MESSAGE, extra={"error": str(error), "path": event.get("path")})
        raise
    logger.info(
        DECISION_MESSAGE,
        extra={
            EFFECT_FIELD: decision.effect,
            "reason": decision.reason,
            "serve_region": decision.serve_region,
            "key_id": decision.key_id,
            "path": event.get("path"),
        },
    )
    if decision.effect == "Unauthorized":
        raise UnauthorizedError
    return policy(decision, str(event.get("methodArn") or ""))
