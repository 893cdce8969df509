"""Secrets for endpoint pods: AWS Secrets Manager values reaching the serving container, never stored.

An endpoint spec names, per environment variable, a secret (name or ARN) and optionally a JSON key
(`EndpointSpec.secret_env`). Only that reference is stored (the table, the Deployment, evidence).
The Regional reconciler reads the values (`SecretReader`; its Lambda role may call
`secretsmanager:GetSecretValue` on the secrets named in `cdk.json` `gco.endpoint_secrets` only) and
writes them into one Kubernetes Secret per endpoint, `<endpoint>--secrets` in the endpoint's
namespace (`secret_name`: endpoint names cannot hold `--`, so it is no endpoint's object name); the
container reads each variable with `env[].valueFrom.secretKeyRef`
(kubernetes.io/docs/concepts/configuration/secret/#using-secrets-as-environment-variables).
docs/deploy.md says why this mechanism rather than the Secrets Store CSI driver or External Secrets.

What is hashed or annotated is the reference and the secret's version id (`sources_digest`), never
a value, so a rotation (a new version id) rewrites the Secret without a value entering any record.

The allowed list, as `cdk.json` gives it (`parse_allowed`): secret names (`team/hf-token`, in the
home Region) and secret ARNs, each matched exactly (a spec names a secret as the list does), so the
IAM policy lists exactly these secrets and no wildcard. A spec naming a secret outside it is
refused, naming the allowed entries (`check_secret_env`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.spec import SECRET_ARN, SecretEnvRef, check_secret_id
from gco.errors import GcoError

ENDPOINT_SECRETS_ENV = "GCO_ENDPOINT_SECRETS"  # the allowed list, comma-separated (the reconciler's env)
SECRET_SUFFIX = "--secrets"  # noqa: S105 - a name suffix, not a password
# The Secret's annotation: a digest of each variable's reference and the version id read.
SOURCES_ANNOTATION = "gco.dev/secret-sources"
SECRET_ARN_PATTERN = re.compile(SECRET_ARN)


class SecretReadError(GcoError):
    """A secret could not be read; `retryable` says whether a later attempt may succeed (throttling,
    an unavailable service) or not (no such secret or key, access denied). The message never holds a
    value."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


@dataclass(frozen=True)
class SecretValue:
    """A secret's current value (SecretString) and the version id it was read at."""

    value: str
    version_id: str

    def __repr__(self) -> str:  # never the value, whatever logs or tracebacks print it
        return f"SecretValue(version_id={self.version_id!r})"


class SecretReader(Protocol):
    """Reads secrets (Secrets Manager in AWS and against the moto server:
    `gco.secrets.secrets_manager.SecretsManagerReader`)."""

    def read(self, secret_id: str) -> SecretValue:
        """The secret's current value.

        Raises:
            SecretReadError: it cannot be read (not retryable) or not now (retryable).
        """
        ...


# -- the allowed list ------------------------------------------------------------------------------


def parse_allowed(entries: Iterable[str]) -> tuple[str, ...]:
    """Each entry checked (a secret name or ARN), first-seen order, no duplicates.

    Raises:
        ValueError: an entry is neither, or a partial ARN (names it).
    """
    return tuple(dict.fromkeys(check_secret_id(entry) for entry in entries))


def refusal(secret_env: Mapping[str, SecretEnvRef], allowed: Iterable[str] | None) -> tuple[str, str] | None:
    """(field, reason) of the first variable whose secret is outside `allowed`; None where all are
    allowed or the list is not known here."""
    if allowed is None:
        return None
    entries = tuple(allowed)
    for name, ref in secret_env.items():
        if ref.secret_id not in entries:
            names = ", ".join(entries) or "none: cdk.json gco.endpoint_secrets is empty"
            reason = f"{ref.secret_id} is not a secret endpoints may read ({names})"
            return f"secret_env.{name}.secret_id", reason
    return None


def check_secret_env(secret_env: Mapping[str, SecretEnvRef], allowed: Iterable[str] | None) -> None:
    """Refuse a secret outside `allowed` (None: not known here, nothing refused).

    Raises:
        InvalidSpecError: naming the variable's `secret_id` field and the allowed entries.
    """
    found = refusal(secret_env, allowed)
    if found is not None:
        raise InvalidSpecError(*found)


def iam_resources(entries: Iterable[str], *, partition: str, region: str, account: str) -> list[str]:
    """The ARNs an IAM policy grants `GetSecretValue` on for the allowed list: an ARN as given; a name
    (in `region`, the home Region) with the six random characters Secrets Manager appends to every
    ARN (`-??????`, docs.aws.amazon.com/secretsmanager/latest/userguide/auth-and-access_iam-policies.html)."""
    base = f"arn:{partition}:secretsmanager:{region}:{account}:secret:"
    out: list[str] = []
    for entry in entries:
        if SECRET_ARN_PATTERN.fullmatch(entry):
            out.append(entry)
        else:
            out.append(f"{base}{entry}-??????")
    return out


# -- the Kubernetes Secret -------------------------------------------------------------------------


def secret_name(endpoint: str) -> str:
    """The endpoint's Kubernetes Secret (deterministic: a retry rewrites, never duplicates it)."""
    return endpoint + SECRET_SUFFIX


def env_value(ref: SecretEnvRef, secret: SecretValue) -> str:
    """The variable's value: the whole SecretString, or its JSON key's value (a string as is, any
    other JSON value as JSON).

    Raises:
        SecretReadError: the secret is not a JSON object holding the key (not retryable).
    """
    if ref.json_key is None:
        return secret.value
    try:
        document = json.loads(secret.value)
    except json.JSONDecodeError:
        document = None
    if not isinstance(document, dict) or ref.json_key not in document:
        raise SecretReadError(
            f"secret {ref.secret_id}: no JSON key {ref.json_key!r} in its value", retryable=False
        )
    item = document[ref.json_key]
    return item if isinstance(item, str) else json.dumps(item)


def sources_digest(secret_env: Mapping[str, SecretEnvRef], versions: Mapping[str, str]) -> str:
    """A digest of each variable's reference and version id read (no value)."""
    rows = sorted(
        (name, ref.secret_id, ref.json_key or "", versions.get(ref.secret_id, ""))
        for name, ref in secret_env.items()
    )
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:32]


def render_secret(
    endpoint: str,
    namespace: str,
    values: Mapping[str, str],
    *,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> dict[str, Any]:
    """The endpoint's Secret: one `data` key per variable, base64 as the API server stores it (pure)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": secret_name(endpoint),
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": dict(annotations),
        },
        "data": {key: base64.b64encode(value.encode()).decode() for key, value in sorted(values.items())},
    }


def secret_env_list(endpoint: str, secret_env: Mapping[str, SecretEnvRef]) -> list[dict[str, Any]]:
    """The container's `env` entries that read each variable from the endpoint's Secret (pure)."""
    return [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret_name(endpoint), "key": name}}}
        for name in sorted(secret_env)
    ]
