"""The matrix's ports: what it reads from each Region's cluster, and how it reaches an endpoint.

Small Protocols so the run's logic never builds a client: `connect.py` holds the real adapters
(the EKS API with the caller's IAM identity, or the local stack's stand-in API server; the Region's
way in over HTTPS, SigV4-signed in AWS), and tests pass the same adapters pointed at the local
stack.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict

from gco.reconcile.objects import Kind


class ClusterReader(Protocol):
    """Read access to one Region's cluster (a subset of the reconciler's `Cluster` port)."""

    def get(self, kind: Kind, namespace: str, name: str) -> dict[str, Any] | None: ...

    def list(self, labels: Mapping[str, str]) -> builtins.list[dict[str, Any]]: ...

    def list_any(self, key: str, values: Sequence[str]) -> builtins.list[dict[str, Any]]: ...


class Clusters(Protocol):
    """The Regions the final inventory covers, and a reader for each."""

    def regions(self) -> list[str]: ...

    def reader(self, region: str) -> ClusterReader: ...


class Answer(BaseModel):
    """One HTTP answer: status, parsed JSON body (or text), and how long it took."""

    model_config = ConfigDict(frozen=True)

    status: int
    body: Any
    latency_ms: float
    url: str


class EndpointHttp(Protocol):
    """Requests to `/inference/<name><path>` through the Region's way in (its shared proxy)."""

    def get(self, region: str, name: str, path: str) -> Answer: ...

    def post(self, region: str, name: str, path: str, body: Mapping[str, Any]) -> Answer: ...
