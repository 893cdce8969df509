"""Reaching a Region's EKS cluster with IAM: endpoint and CA from eks:DescribeCluster, and a token.

The token is what `aws eks get-token` prints: `k8s-aws-v1.` + base64url (unpadded) of a presigned
STS GetCallerIdentity URL whose signature covers the `x-k8s-aws-id: <cluster>` header. It lives
15 minutes; it is minted again after `TOKEN_LIFETIME` or when the API server answers 401. No
kubeconfig and no static credential is involved; tokens are never logged.
"""

from __future__ import annotations

import base64
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco import aws
from gco.reconcile.access import RECONCILER_GRANT, Grant
from gco.reconcile.errors import ClusterAuthError, ClusterConfigError
from gco.reconcile.kube_tokens import TOKEN_PREFIX
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy

CLUSTER_HEADER = "x-k8s-aws-id"
PRESIGN_SECONDS = 60
TOKEN_LIFETIME = 10 * 60.0


def _take_cluster_name(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    if "ClusterName" in params:
        context[CLUSTER_HEADER] = params.pop("ClusterName")


def _sign_cluster_header(request: Any, **_: Any) -> None:
    if CLUSTER_HEADER in request.context:
        request.headers[CLUSTER_HEADER] = request.context[CLUSTER_HEADER]


def eks_token(cluster_name: str, sts_client: Any) -> str:
    """A bearer token for `cluster_name` from `sts_client` (the cluster's Region's STS).

    Raises:
        ClusterAuthError: the URL could not be signed (no credentials, say).
    """
    events = sts_client.meta.events
    events.register("provide-client-params.sts.GetCallerIdentity", _take_cluster_name, unique_id="gco-eks-1")
    events.register("before-sign.sts.GetCallerIdentity", _sign_cluster_header, unique_id="gco-eks-2")
    try:
        url: str = sts_client.generate_presigned_url(
            "get_caller_identity",
            Params={"ClusterName": cluster_name},
            ExpiresIn=PRESIGN_SECONDS,
            HttpMethod="GET",
        )
    except (ClientError, BotoCoreError) as error:
        raise ClusterAuthError(f"signing the EKS token of {cluster_name} failed: {error}") from error
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class TokenCache:
    """Mints a token on first use, after `lifetime` seconds, or when asked to refresh (a 401)."""

    def __init__(
        self,
        mint: Callable[[], str],
        lifetime: float = TOKEN_LIFETIME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._mint = mint
        self._lifetime = lifetime
        self._clock = clock
        self._token: str | None = None
        self._minted = 0.0
        self._lock = threading.Lock()

    def __call__(self, refresh: bool = False) -> str:
        with self._lock:
            if refresh or self._token is None or self._clock() - self._minted >= self._lifetime:
                self._token = self._mint()
                self._minted = self._clock()
            return self._token


def describe_cluster(cluster_name: str, eks_client: Any) -> tuple[str, str]:
    """(API server URL, CA bundle PEM) of an EKS cluster.

    Raises:
        ClusterConfigError: the cluster is unknown, not active, or has no endpoint/certificate.
    """
    try:
        cluster = eks_client.describe_cluster(name=cluster_name)["cluster"]
    except (ClientError, BotoCoreError) as error:
        raise ClusterConfigError(f"eks:DescribeCluster {cluster_name} failed: {error}") from error
    endpoint = cluster.get("endpoint")
    authority = (cluster.get("certificateAuthority") or {}).get("data")
    if not endpoint or not authority:
        raise ClusterConfigError(f"EKS cluster {cluster_name} has no endpoint or certificate authority yet")
    problem = f"EKS cluster {cluster_name}: certificate authority is not base64 PEM"
    try:
        pem = base64.b64decode(authority, validate=True).decode()
    except ValueError as error:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise ClusterConfigError(problem) from error
    if "BEGIN CERTIFICATE" not in pem:
        raise ClusterConfigError(problem)
    return str(endpoint), pem


def connect_eks(
    cluster_name: str,
    region: str,
    *,
    eks_client: Any | None = None,
    sts_client: Any | None = None,
    retry: RetryPolicy | None = None,
    grant: Grant = RECONCILER_GRANT,
) -> KubeCluster:
    """A `KubeCluster` for the Region's EKS cluster, authenticated with the caller's IAM identity;
    `grant` is what that identity's RBAC allows (its lists go to the grant's scopes).

    Raises:
        ClusterConfigError: eks:DescribeCluster failed, or the cluster has no endpoint or
            certificate authority (yet), or that authority is not base64 PEM.
    """
    eks = eks_client or aws.client("eks", region=region)
    sts = sts_client or aws.client("sts", region=region)
    endpoint, pem = describe_cluster(cluster_name, eks)
    context = ssl.create_default_context(cadata=pem)
    return KubeCluster(
        endpoint, TokenCache(lambda: eks_token(cluster_name, sts)), verify=context, retry=retry, grant=grant
    )
