"""EKS's parts stood in (gco.local.assembly.eks): the token authenticator's checks, with tokens minted
by the reconciler's own code (gco.reconcile.eks.eks_token) and an injected clock, and DescribeCluster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import botocore.session
import httpx

from gco.local.assembly.eks import (
    STS_PRESIGNED_VALIDITY,
    WEBHOOK_CACHE_TTL,
    AccessEntry,
    DescribeClusterStandIn,
    IamTokens,
    Session,
    cluster_ca,
)
from gco.reconcile.access import RECONCILER_GRANT, RUNNER_GRANT
from gco.reconcile.eks import eks_token

STS = "http://127.0.0.1:5999"
KEY, SECRET, TOKEN = "ASIAEXAMPLE", "secret", "session-token"
ROLE = "arn:aws:iam::123456789012:role/gco-reconciler-us-east-1"
SESSION = Session("arn:aws:sts::123456789012:assumed-role/gco-reconciler-us-east-1/s", SECRET, TOKEN)
GRANTS = {RECONCILER_GRANT.group: RECONCILER_GRANT, RUNNER_GRANT.group: RUNNER_GRANT}


def token(cluster: str = "gco-us-east-1", secret: str = SECRET, url: str = STS) -> str:
    sts = botocore.session.Session().create_client(
        "sts", region_name="us-east-1", endpoint_url=url,
        aws_access_key_id=KEY, aws_secret_access_key=secret, aws_session_token=TOKEN,
    )  # fmt: skip
    return eks_token(cluster, sts)


def tokens(entries: list[AccessEntry], now: datetime | None = None) -> IamTokens:
    sessions = {KEY: SESSION}
    return IamTokens(
        STS, "gco-us-east-1", entries, GRANTS, sessions.get, clock=lambda: now or datetime.now(UTC)
    )


def test_a_token_of_an_entry_s_role_gets_the_group_s_grant() -> None:
    authenticator = tokens([AccessEntry(ROLE, (RECONCILER_GRANT.group,))])
    identity = authenticator(token())
    assert identity is not None and identity.grant is RECONCILER_GRANT and identity.user == SESSION.arn
    assert authenticator.refusals == []


def test_tokens_eks_would_refuse_are_refused_with_the_reason() -> None:
    entry = AccessEntry(ROLE, (RECONCILER_GRANT.group,))
    cases = [
        (tokens([entry]), token(cluster="another-cluster"), "signature does not match"),
        (tokens([entry]), token(secret="not-the-secret"), "signature does not match"),
        (tokens([entry]), token(url="http://127.0.0.1:6000"), "not the STS endpoint"),
        (tokens([entry], datetime.now(UTC) + timedelta(minutes=16)), token(), "expired"),
        (tokens([]), token(), "no access entry"),
        (tokens([entry]), "k8s-aws-v1.!!!", "not"),
    ]
    for authenticator, made, reason in cases:
        assert authenticator(made) is None
        assert reason in authenticator.refusals[-1], (reason, authenticator.refusals)


def test_a_verified_token_is_kept_for_the_webhook_cache_ttl_and_no_longer() -> None:
    """The API server asks the authenticator once per token for two minutes (kube-apiserver's webhook
    cache), not once per request; STS answers the token for 15 minutes after it was signed, whatever
    its X-Amz-Expires (gco presigns for a minute, as aws-iam-authenticator does), and not after."""
    asked: list[str] = []
    now = [datetime.now(UTC)]

    def sessions(key: str) -> Session | None:
        asked.append(key)
        return SESSION if key == KEY else None

    authenticator = IamTokens(
        STS, "gco-us-east-1", [AccessEntry(ROLE, (RECONCILER_GRANT.group,))], GRANTS, sessions,
        clock=lambda: now[0],
    )  # fmt: skip
    made = token()
    assert authenticator(made) is not None and authenticator(made) is not None
    assert asked == [KEY]  # the second request answered from the cache
    now[0] += timedelta(seconds=50)
    assert authenticator(made) is not None and asked == [KEY]
    now[0] += WEBHOOK_CACHE_TTL  # past the cache's TTL and the URL's X-Amz-Expires: asked again, valid
    assert authenticator(made) is not None and asked == [KEY, KEY]
    now[0] += STS_PRESIGNED_VALIDITY  # past STS's 15 minutes: refused
    assert authenticator(made) is None and authenticator.refusals[-1] == "expired"
    refused = tokens([])  # a refusal is not kept: the next request is judged again
    assert refused(token()) is None and refused(token()) is None and len(refused.refusals) == 2


def test_describe_cluster_answers_as_eks_does() -> None:
    with DescribeClusterStandIn({"gco-us-east-1": "http://127.0.0.1:7000"}) as eks:
        signed = {"Authorization": "AWS4-HMAC-SHA256 Credential=..."}
        found = httpx.get(f"{eks.url}/clusters/gco-us-east-1", headers=signed)
        assert found.status_code == 200 and found.json()["cluster"]["endpoint"] == "http://127.0.0.1:7000"
        assert "BEGIN CERTIFICATE" in cluster_ca()
        missing = httpx.get(f"{eks.url}/clusters/nope", headers=signed)
        assert (
            missing.status_code == 404 and missing.headers["x-amzn-ErrorType"] == "ResourceNotFoundException"
        )
        assert httpx.get(f"{eks.url}/clusters/gco-us-east-1").status_code == 403
