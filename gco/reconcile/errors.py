"""Errors of the reconciler and its cluster clients.

    ReconcileError                 (gco.errors.GcoError)
    ├── ClusterError               a Kubernetes API call failed
    │   ├── ClusterUnavailableError  429/5xx/timeouts/conflicts after every retry (retry later)
    │   │   └── ClusterConflictError     409 to an apply with a resourceVersion precondition: read again
    │   ├── ClusterAuthError         credentials refused even after a fresh token
    │   └── ClusterRejectedError     the API refused an object (4xx): terminal until the record changes
    │       ├── KindNotServedError       the cluster does not serve the kind (its CRD is not installed)
    │       └── ObjectOwnedElsewhereError  the name is held by an object that is not this endpoint's
    ├── ClusterConfigError         the cluster cannot be located (eks:DescribeCluster failed)
    ├── SecretUnavailableError     Secrets Manager could not answer for an endpoint's secret (retry later)
    ├── PoisonRecordError          a stream record that names no endpoint: it can never succeed
    ├── SweepFailedError           the sweep could not list its Region: nothing was reconciled
    ├── HeartbeatError             the reconciler's heartbeat parameter cannot be written or read
    └── MetricsAnswerError         the Region's Prometheus answered a query with no instant vector

urllib3 errors (transport failures, undecodable bodies, an answer that is not JSON) and botocore
errors are converted at the client boundary with `raise ... from`; docs/reconciler.md tabulates
each one and what the stream handler and the sweep do with it.
"""

from __future__ import annotations

from gco.errors import GcoError
from gco.reconcile.objects import Kind


class ReconcileError(GcoError):
    """Root of the reconcile package's errors."""


class ClusterError(ReconcileError):
    """A Kubernetes API call failed; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class ClusterUnavailableError(ClusterError):
    """Throttled, failing or unreachable after bounded retries: the work is retried later."""


class ClusterConflictError(ClusterUnavailableError):
    """409 Conflict to an apply that carried `metadata.resourceVersion`: the object changed since it
    was read. Retrying the same request cannot succeed; read the object again and merge afresh (a
    caller that does not is retried later, as for any unavailable API server)."""


class ClusterAuthError(ClusterError):
    """401/403 even with a freshly minted token."""


class ClusterRejectedError(ClusterError):
    """The API server refused the request as invalid; retrying the same object cannot help."""


class KindNotServedError(ClusterRejectedError):
    """The API server answered 404 for the kind itself: what provides it (KEDA) is not installed.

    `kind` is the object's kind (`gco.reconcile.objects.Kind`); `needs` names its provider.
    """

    def __init__(self, kind: Kind, message: str) -> None:
        self.kind = kind
        self.needs = kind.provided_by or f"the {kind.kind} API"
        super().__init__(message, 404)


class ObjectOwnedElsewhereError(ClusterRejectedError):
    """An object the endpoint renders exists under its name but carries another endpoint's labels,
    another lifecycle's, or none of gco's: it is neither applied over nor deleted (the Region's
    status names it), and is looked at again on the next reconcile."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 409)


class ClusterConfigError(ReconcileError):
    """The Region's cluster could not be described (name, endpoint or certificate)."""


class SecretUnavailableError(ReconcileError):
    """Secrets Manager could not answer now (throttled, unavailable): the reconcile is retried. A
    secret that cannot be read at all (missing, access denied) is a terminal status instead."""


class PoisonRecordError(ReconcileError):
    """A stream record that names no endpoint; it can never succeed."""


class SweepFailedError(ReconcileError):
    """The sweep could not list its Region (the table or the cluster): nothing was reconciled."""


class HeartbeatError(ReconcileError):
    """The reconciler's heartbeat parameter cannot be written or read, or holds no heartbeat."""


class MetricsAnswerError(ReconcileError):
    """The Region's Prometheus server answered a query with something other than a successful instant
    vector (`gco.reconcile.engine_metrics`)."""
