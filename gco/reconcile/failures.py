"""One rule for a failed endpoint, whichever entry point met it: the stream handler or the sweep.

Both entry points catch every exception per endpoint (a `GcoError` or not), log one line naming
the entry, the endpoint, the Region and the failure's kind, and go on with the next endpoint:
the stream handler reports that endpoint's records as batch item failures (Lambda retries them,
then sends them to the dead-letter queue), the sweep names the endpoint in its report (the next
sweep tries again). Third-party errors are converted into gco's tree where they are raised (the
store, the Kubernetes client, the record parser), so only a bug reaches here as something else:
it is logged with its traceback as `unexpected`, and handled like the rest. docs/reconciler.md
tabulates each error and its outcome.

Kinds (the `kind=` of the log line; the Lambdas count only `unreadable`, as `UNREADABLE_METRIC`):
    unreadable   the stored record does not parse (`MalformedRecordError`): fixed by rewriting it
    unavailable  DynamoDB, the Kubernetes API or Secrets Manager kept failing after retries: retried later
    denied       the API server refused the reconciler's credentials (`ClusterAuthError`)
    config       the cluster cannot be located or a setting is malformed
    poison       a stream record that names no endpoint
    failed       any other gco error (a rejected object is terminal before it gets here)
    unexpected   not a gco error: a bug
"""

from __future__ import annotations

import logging
from typing import Literal

from gco.endpoints.errors import MalformedRecordError, StoreUnavailableError
from gco.errors import GcoError, GcoInputError
from gco.reconcile.errors import (
    ClusterAuthError,
    ClusterConfigError,
    ClusterUnavailableError,
    PoisonRecordError,
    SecretUnavailableError,
)

log = logging.getLogger(__name__)
FailureKind = Literal["unreadable", "unavailable", "denied", "config", "poison", "failed", "unexpected"]
# The CloudWatch namespace of the reconciler Lambdas' metrics, and the metric that counts unreadable
# records (the Regional stack alarms on it).
METRICS_NAMESPACE = "gco"
UNREADABLE_METRIC = "UnreadableRecords"
# The Powertools service of each reconciler Lambda (a dimension of its metrics).
STREAM_SERVICE = "gco-reconciler"
SWEEP_SERVICE = "gco-sweep"


def failure_kind(error: BaseException) -> FailureKind:
    """The kind of a failure, for the log line and the metrics."""
    if isinstance(error, MalformedRecordError):
        return "unreadable"
    if isinstance(error, StoreUnavailableError | ClusterUnavailableError | SecretUnavailableError):
        return "unavailable"
    if isinstance(error, ClusterAuthError):
        return "denied"
    if isinstance(error, ClusterConfigError | GcoInputError):
        return "config"
    if isinstance(error, PoisonRecordError):
        return "poison"
    if isinstance(error, GcoError):
        return "failed"
    return "unexpected"


def report_failure(entry: str, name: str, region: str, error: BaseException) -> FailureKind:
    """Log one endpoint's failure the one way (a bug with its traceback); returns its kind.

    Parameters:
        entry: the entry point (`stream`, `sweep`).
        name: the endpoint's name (the record's key), or what was being done for the whole Region.
        region: the reconciler's Region.
        error: what was raised.
    """
    kind = failure_kind(error)
    field = f" field={error.field}" if isinstance(error, MalformedRecordError) else ""
    log.warning(
        "%s: endpoint=%s region=%s kind=%s%s: %s",
        entry,
        name,
        region,
        kind,
        field,
        error,
        exc_info=error if kind == "unexpected" else None,
    )
    return kind
