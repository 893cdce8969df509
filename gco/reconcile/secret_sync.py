"""An endpoint's Kubernetes Secret: its `secret_env` values read from Secrets Manager, written by name.

The reconciler calls `EndpointSecret.sync` before it applies or deletes an endpoint's objects: a
live endpoint with `secret_env` gets its Secret (`gco.secrets.endpoint_secrets.secret_name`) written when
the version ids read differ from those annotated on it (a digest, never a value); an endpoint that
no longer has one (deleted, not targeted here, its `secret_env` emptied) has it deleted when its
Deployments still referenced it. No value is logged, returned or put in an error message.

The reconciler reads an endpoint's secrets (`EndpointSecret.read`) before it plans, each secret once
per reconcile, and hands the digest of the version ids read (`gco.secrets.endpoint_secrets.sources_digest`)
to the renderer, which puts it on the serving pods' template (`SOURCES_ANNOTATION`). A rotated secret
(a new version id, read at the next reconcile: the sweep reconciles every endpoint with `secret_env`
through this read) therefore changes the template: the Secret is rewritten with the new values first
(`sync`, before any apply), then the Deployment rolls its pods, which start with the new value (a
Secret read through `secretKeyRef` is fixed for a container's life, so nothing less than new pods
would do: kubernetes.io/docs/concepts/configuration/secret/#using-secrets-as-environment-variables).
Neither the annotation nor any log holds a value.

A secret that cannot be read (no such secret or key, access denied) is a terminal status naming the
variable; Secrets Manager throttled or unavailable raises `SecretUnavailableError` (retried).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gco.endpoints.record import EndpointRecord
from gco.reconcile.errors import ClusterRejectedError, SecretUnavailableError
from gco.reconcile.objects import (
    DEPLOYMENT,
    ENDPOINT_LABEL,
    LIFECYCLE_ANNOTATION,
    MANAGED_BY,
    MANAGER,
    SECRET,
    SYSTEM_NAMESPACE,
    ObjectRef,
    annotations_of,
    labels_of,
)
from gco.reconcile.port import Cluster
from gco.secrets.endpoint_secrets import (
    SOURCES_ANNOTATION,
    SecretReader,
    SecretReadError,
    SecretValue,
    env_value,
    render_secret,
    secret_name,
    sources_digest,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SecretRead:
    """An endpoint's `secret_env` as read now: each variable's value (never printed) and the digest of
    the references and version ids read; or why it cannot be read (`refused`, a terminal reason)."""

    values: dict[str, str] = field(repr=False, default_factory=dict)
    digest: str | None = None
    refused: str | None = None


@dataclass(frozen=True)
class EndpointSecret:
    """Writes and deletes endpoints' Secrets in one Region's cluster, reading values with `reader`
    (None: no reader configured, so an endpoint naming a secret gets a terminal status)."""

    cluster: Cluster
    reader: SecretReader | None
    region: str

    def wanted(self, record: EndpointRecord | None) -> bool:
        """Whether the endpoint has a Secret here: live in this Region, with `secret_env`."""
        return (
            record is not None
            and not record.is_deleted
            and self.region in record.target_regions
            and bool(record.spec.secret_env)
        )

    def read(self, record: EndpointRecord | None, cache: dict[str, SecretValue]) -> SecretRead | None:
        """The endpoint's secrets read now (None: it has no Secret here). A secret already in `cache`
        (read earlier in the same reconcile) is not read again; one read is added to it.

        Raises:
            SecretUnavailableError: Secrets Manager could not answer now (retry).
        """
        if record is None or not self.wanted(record):
            return None
        if self.reader is None:
            return SecretRead(refused="secret_env: no Secrets Manager reader is configured in this Region")
        values: dict[str, str] = {}
        versions: dict[str, str] = {}
        for variable, ref in sorted(record.spec.secret_env.items()):
            try:
                if ref.secret_id not in cache:
                    cache[ref.secret_id] = self.reader.read(ref.secret_id)
                secret = cache[ref.secret_id]
                values[variable] = env_value(ref, secret)
            except SecretReadError as error:
                if error.retryable:
                    raise SecretUnavailableError(f"secret_env.{variable}: {error}") from None
                return SecretRead(refused=f"secret_env.{variable}: {error}")
            versions[ref.secret_id] = secret.version_id
        return SecretRead(values, sources_digest(record.spec.secret_env, versions))

    def sync(
        self,
        name: str,
        record: EndpointRecord | None,
        *,
        read: SecretRead | None,
        applies: bool,
        deletes: Sequence[ObjectRef],
        observed: Sequence[dict[str, Any]],
    ) -> str | None:
        """Bring the endpoint's Secret in line with its record and `read` (what `read` returned for
        it); returns a terminal reason or None."""
        if record is not None and self.wanted(record):
            if read is None or read.refused is not None:
                return read.refused if read is not None else "secret_env: its secrets were not read"
            return self._write(name, record, read) if applies else None
        if (applies or deletes) and _references(observed, name):
            namespace = record.namespace if record is not None else _namespace_of(deletes, observed)
            if namespace is not None:
                ref = ObjectRef(SECRET.kind, namespace, secret_name(name), SECRET.api_version)
                self.cluster.delete([ref])
                log.info("deleted its secret: endpoint=%s region=%s", name, self.region)
        return None

    def _write(self, name: str, record: EndpointRecord, read: SecretRead) -> str | None:
        values, digest = read.values, read.digest or ""
        where = f"Secret {record.namespace}/{secret_name(name)}"
        wanted = {SOURCES_ANNOTATION: digest, LIFECYCLE_ANNOTATION: record.lifecycle_id or ""}
        stored = self.cluster.get(SECRET, record.namespace, secret_name(name))
        if stored is not None:
            labels = labels_of(stored)
            if labels.get(MANAGED_BY) != MANAGER or labels.get(ENDPOINT_LABEL) != name:
                return f"{where} is held by another owner: not applied over"
            noted = annotations_of(stored)
            if all(noted.get(key) == value for key, value in wanted.items()):
                return None  # the same versions, already written: nothing to do
        obj = render_secret(
            name,
            record.namespace,
            values,
            labels={MANAGED_BY: MANAGER, ENDPOINT_LABEL: name},
            annotations=wanted,
        )
        try:
            self.cluster.apply(obj)
        except ClusterRejectedError as error:
            return f"{where}: {error}"
        log.info("wrote its secret (%d variables): endpoint=%s region=%s", len(values), name, self.region)
        return None


def _references(observed: Sequence[dict[str, Any]], name: str) -> bool:
    """Whether an observed Deployment's pods read the endpoint's Secret (`secretKeyRef`)."""
    wanted = json.dumps(secret_name(name))
    return any(
        obj.get("kind") == DEPLOYMENT.kind and wanted in json.dumps(obj.get("spec") or {}) for obj in observed
    )


def _namespace_of(deletes: Sequence[ObjectRef], observed: Sequence[dict[str, Any]]) -> str | None:
    """The endpoint's namespace where its record is gone: that of its Deployments."""
    for ref in [*deletes, *(ObjectRef.of(obj) for obj in observed)]:
        if ref.kind == DEPLOYMENT.kind and ref.namespace != SYSTEM_NAMESPACE:
            return ref.namespace
    return None
