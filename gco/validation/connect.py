"""The real adapters of the matrix's ports.

- Clusters: on the local stack (`GCO_CLUSTER_URLS` set by `gco local env`) each Region's stand-in
  API server with the runner's fixed token; in AWS each Region's EKS cluster `<prefix>-<region>` (as
  the Regional stack names it), reached with the caller's IAM identity. Either way through the
  reconciler's REST client with the runner's read-only grant (`gco.reconcile.access.RUNNER_GRANT`,
  the RBAC a Regional cluster binds to the GPU runner's role), so the matrix reads exactly what the
  runner may read, and a stand-in refuses it anything more as the API server would.
- Endpoint HTTP: the Region's way in, `<base>/<name><path>`: the local proxy (`GCO_INVOKE_URLS`,
  its certificate trusted from `GCO_INVOKE_CA_BUNDLE`), or the Regional stack's `InvokeUrl` with
  SigV4-signed requests.
"""

from __future__ import annotations

import json
import os
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from gco import aws
from gco.env import CLUSTER_URLS_ENV
from gco.front_door import DEFAULT_PREFIX, PREFIX_ENV
from gco.inference.invoke import INVOKE_CA_BUNDLE_ENV, local_bases, sigv4_headers
from gco.inference.regional_outputs import invoke_urls
from gco.reconcile.access import RUNNER_GRANT
from gco.reconcile.eks import connect_eks
from gco.reconcile.kube_tokens import RUNNER_TOKEN
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.validation.errors import UnreachableError
from gco.validation.ports import Answer, ClusterReader


def _url_map(raw: str, env: str) -> dict[str, str]:
    try:
        found = json.loads(raw)
    except json.JSONDecodeError:
        found = None
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        raise UnreachableError(f"{env} is not a JSON object of Region -> URL")
    return found


class UrlClusters:
    """The local stack's stand-in API servers, Region -> URL."""

    def __init__(self, urls: Mapping[str, str], *, timeout: float = 10.0) -> None:
        retry = RetryPolicy(attempts=4, base_delay=0.05, max_delay=0.5)
        self._clusters = {
            region: KubeCluster(
                url, static_token(RUNNER_TOKEN), grant=RUNNER_GRANT, timeout=timeout, retry=retry
            )
            for region, url in urls.items()
        }

    def regions(self) -> list[str]:
        return list(self._clusters)

    def reader(self, region: str) -> ClusterReader:
        """The reader of `region`'s stand-in API server.

        Raises:
            UnreachableError: the local stack runs no cluster for `region`.
        """
        if region not in self._clusters:
            raise UnreachableError(
                f"no cluster is known for {region} (the local stack runs {self.regions()})"
            )
        return self._clusters[region]


class EksClusters:
    """Each Region's EKS cluster, connected on first use with the caller's IAM identity."""

    def __init__(self, regions: list[str], prefix: str | None = None) -> None:
        self._regions = regions
        self._prefix = prefix or os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX
        self._clusters: dict[str, KubeCluster] = {}

    def regions(self) -> list[str]:
        return list(self._regions)

    def reader(self, region: str) -> ClusterReader:
        if region not in self._clusters:
            self._clusters[region] = connect_eks(f"{self._prefix}-{region}", region, grant=RUNNER_GRANT)
        return self._clusters[region]


def environment_clusters(selected_region: str) -> UrlClusters | EksClusters:
    """The local stack's clusters where `GCO_CLUSTER_URLS` is set, else the selected Region's EKS cluster.

    Raises:
        UnreachableError: `GCO_CLUSTER_URLS` is not a JSON object of Region -> URL.
    """
    raw = os.environ.get(CLUSTER_URLS_ENV)
    return UrlClusters(_url_map(raw, CLUSTER_URLS_ENV)) if raw else EksClusters([selected_region])


class ProxyHttp:
    """Requests through each Region's way in (local proxy, or the signed API Gateway front door).

    Raises:
        UnreachableError: from every request: no invoke URL is known for the Region.
    """

    def __init__(
        self,
        *,
        timeout: float,
        bases: Mapping[str, str] | None = None,
        cloudformation: Callable[[str], Any] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        local = dict(bases) if bases is not None else local_bases()
        self._bases = {region: base.rstrip("/") for region, base in local.items()}
        self._signed = not local
        self._cloudformation = cloudformation or (lambda region: aws.client("cloudformation", region=region))
        self._timeout = timeout
        self._clock = clock
        bundle = os.environ.get(INVOKE_CA_BUNDLE_ENV)
        self._verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=bundle) if bundle else True

    def _url(self, region: str, name: str, path: str) -> str:
        if region not in self._bases and self._signed:
            found = invoke_urls(name, [region], self._cloudformation).get(region)
            if found:
                self._bases[region] = found.rstrip("/")[: -len(name) - 1]
        if region not in self._bases:
            raise UnreachableError(f"no invoke URL is known for {region}")
        return f"{self._bases[region]}/{name}{path}"

    def _send(self, method: str, region: str, name: str, path: str, data: bytes | None) -> Answer:
        url = self._url(region, name, path)
        headers = {"content-type": "application/json"} if data is not None else {}
        if self._signed:
            headers = sigv4_headers(method, url, data or b"", region)
        started = self._clock()
        try:
            response = httpx.request(
                method, url, content=data, headers=headers, timeout=self._timeout, verify=self._verify
            )
        except httpx.HTTPError as error:
            return Answer(status=0, body=f"{type(error).__name__}: {error}", latency_ms=0.0, url=url)
        latency = (self._clock() - started) * 1000
        try:
            body: Any = response.json()
        except ValueError:
            body = response.text
        return Answer(status=response.status_code, body=body, latency_ms=latency, url=url)

    def get(self, region: str, name: str, path: str) -> Answer:
        return self._send("GET", region, name, path, None)

    def post(self, region: str, name: str, path: str, body: Mapping[str, Any]) -> Answer:
        return self._send("POST", region, name, path, json.dumps(dict(body)).encode())
