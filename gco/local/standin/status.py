"""The `Status` objects the Kubernetes API server answers failures with, as it writes them.

Used by the stand-in API server so that the adapter parses the same bodies it gets from EKS:

- 403: `deployments.apps is forbidden: User "u" cannot list resource "deployments" in API group
  "apps" at the cluster scope` (k8s.io/apiserver `responsewriters.forbiddenMessage` wrapped by
  `apierrors.NewForbidden`: the qualified resource, the object's name when the request has one);
- 403 for an apply that would create an object its user may patch but not create: the same
  `Forbidden` built by `withAuthorization` (k8s.io/apiserver `pkg/endpoints/handlers/rest.go`) from
  the authorizer's reason, which RBAC leaves empty when no rule matched
  (`plugin/pkg/auth/authorizer/rbac/rbac.go`): `deployments.apps "llama" is forbidden: `;
- 404 for a resource the server does not serve (an API group whose CRD is not installed): `the
  server could not find the requested resource`, with empty details;
- 404 for an object: `deployments.apps "llama" not found`, details naming group, kind and name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    415: "UnsupportedMediaType",
    422: "Invalid",
}
NOT_SERVED = "the server could not find the requested resource"


@dataclass(frozen=True)
class Attributes:
    """The authorization attributes of one resource request (as the API server derives them)."""

    user: str
    verb: str
    group: str
    resource: str
    namespace: str | None
    name: str | None
    subresource: str = ""

    @property
    def rbac_resource(self) -> str:
        """The resource RBAC matches: `deployments`, or `deployments/status` for a subresource."""
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource

    @property
    def qualified_resource(self) -> str:
        """`deployments.apps`, or `services` for the core group."""
        return f"{self.resource}.{self.group}" if self.group else self.resource


def status(code: int, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `Status` of kind Failure; the reason follows the code."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": REASONS.get(code, "InternalError" if code >= 500 else "TooManyRequests"),
        "code": code,
    }
    if details is not None:
        body["details"] = details
    return body


def forbidden(attributes: Attributes) -> dict[str, Any]:
    """The 403 `Status` for a request RBAC did not allow."""
    where = (
        f"in the namespace {_quote(attributes.namespace)}" if attributes.namespace else "at the cluster scope"
    )
    resource = _quote(attributes.rbac_resource)
    reason = (
        f"User {_quote(attributes.user)} cannot {attributes.verb} resource {resource} "
        f"in API group {_quote(attributes.group)} {where}"
    )
    subject = attributes.qualified_resource
    if attributes.name:
        subject = f"{subject} {_quote(attributes.name)}"
    details: dict[str, Any] = {"group": attributes.group, "kind": attributes.resource}
    if attributes.name:
        details["name"] = attributes.name
    return status(403, f"{subject} is forbidden: {reason}", details)


def create_forbidden(attributes: Attributes) -> dict[str, Any]:
    """The 403 `Status` for an apply whose object does not exist and whose user may not create it."""
    details: dict[str, Any] = {"group": attributes.group, "kind": attributes.resource}
    if attributes.name:
        details["name"] = attributes.name
    subject = f"{attributes.qualified_resource} {_quote(attributes.name)}"
    return status(403, f"{subject} is forbidden: ", details)


def not_found(group: str, resource: str, name: str) -> dict[str, Any]:
    """The 404 `Status` for a missing object of a served resource."""
    qualified = f"{resource}.{group}" if group else resource
    return status(
        404, f"{qualified} {_quote(name)} not found", {"name": name, "group": group, "kind": resource}
    )


def not_served() -> dict[str, Any]:
    """The 404 `Status` for a resource the server does not serve (an uninstalled CRD)."""
    return status(404, NOT_SERVED, {})


def _quote(value: str | None) -> str:
    """Go's `%q` for the plain names that appear here."""
    return '"' + (value or "").replace("\\", "\\\\").replace('"', '\\"') + '"'
