"""EKS access: DescribeCluster and the presigned-STS token, against the moto server."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from gco import aws
from gco.local.moto.motoserver import MotoServer
from gco.reconcile.eks import TokenCache, connect_eks, describe_cluster, eks_token
from gco.reconcile.errors import ClusterConfigError
from gco.reconcile.kube_tokens import TOKEN_PREFIX

PEM = (
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBszCCAVmgAwIBAgIUQ2g3b0ZsZ2NvbG9jYWx0ZXN0Y2VydDAKBggqhkjOPQQDAjAW\n"
    "-----END CERTIFICATE-----\n"
)


def decode(token: str) -> str:
    body = token.removeprefix(TOKEN_PREFIX)
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


def test_token_is_a_presigned_get_caller_identity_bound_to_the_cluster(moto: MotoServer) -> None:
    sts = aws.client("sts", region="eu-west-1", endpoint_url=moto.url)
    token = eks_token("gco-eu-west-1", sts)
    assert token.startswith(TOKEN_PREFIX)
    assert "=" not in token
    url = urlparse(decode(token))
    query = parse_qs(url.query)
    assert query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")
    assert query["X-Amz-Expires"] == ["60"]


def test_token_cache_mints_on_expiry_and_refresh() -> None:
    minted: list[int] = []
    now = [0.0]

    def mint() -> str:
        minted.append(1)
        return f"token-{len(minted)}"

    cache = TokenCache(mint, lifetime=10, clock=lambda: now[0])
    assert cache() == "token-1"
    assert cache() == "token-1"
    now[0] = 11
    assert cache() == "token-2"
    assert cache(True) == "token-3"


class FakeEks:
    def __init__(self, cluster: dict[str, Any] | None) -> None:
        self.cluster = cluster

    def describe_cluster(self, name: str) -> dict[str, Any]:
        if self.cluster is None:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "ResourceNotFoundException"}}, "DescribeCluster")
        return {"cluster": self.cluster}


def test_describe_cluster_reads_endpoint_and_ca(moto: MotoServer) -> None:
    eks = aws.client("eks", region="us-east-1", endpoint_url=moto.url)
    eks.create_cluster(name="gco", roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={})
    with pytest.raises(ClusterConfigError, match="certificate authority"):
        describe_cluster("gco", eks)  # moto's placeholder CA is not a PEM certificate
    with pytest.raises(ClusterConfigError, match="DescribeCluster missing"):
        describe_cluster("missing", eks)


def test_describe_cluster_refuses_incomplete_clusters() -> None:
    with pytest.raises(ClusterConfigError, match="no endpoint"):
        describe_cluster("gco", FakeEks({"endpoint": "https://x"}))
    for data in ("%%%", base64.b64encode(b"not a certificate").decode()):
        with pytest.raises(ClusterConfigError, match="base64"):
            describe_cluster(
                "gco", FakeEks({"endpoint": "https://x", "certificateAuthority": {"data": data}})
            )


def test_connect_eks_builds_an_authenticated_client(
    moto: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ssl

    created: dict[str, Any] = {}
    real = ssl.create_default_context

    def capture(cadata: str) -> ssl.SSLContext:
        created["pem"] = cadata
        return real()

    monkeypatch.setattr(ssl, "create_default_context", capture)
    cluster_data = {
        "endpoint": "https://abc.eks.amazonaws.com",
        "certificateAuthority": {"data": base64.b64encode(PEM.encode()).decode()},
    }
    sts = aws.client("sts", region="us-east-1", endpoint_url=moto.url)
    client = connect_eks("gco", "us-east-1", eks_client=FakeEks(cluster_data), sts_client=sts)
    assert client.server == "https://abc.eks.amazonaws.com"
    assert created["pem"] == PEM
    assert client._token(False).startswith(TOKEN_PREFIX)
    client.close()
