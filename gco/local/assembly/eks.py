"""EKS's part in a Regional function reaching its cluster, stood in for the local stack's API servers.

A deployed reconciler asks `eks:DescribeCluster` for its cluster's endpoint and CA, and sends a
bearer token that is a presigned STS GetCallerIdentity URL (`gco.reconcile.eks`); EKS's
authenticator calls that URL, takes the caller's ARN, and maps it through the cluster's access
entries (`AWS::EKS::AccessEntry`: principal ARN -> Kubernetes groups) to what RBAC allows. Here:

- `DescribeClusterStandIn`: an HTTP server answering EKS's `GET /clusters/{name}` (the REST-JSON
  DescribeCluster of the EKS API Reference) with the stand-in API server's URL and a CA; a request
  without a SigV4 `Authorization` header is refused 403 and an unknown cluster is 404
  `ResourceNotFoundException`, as EKS answers. The function's SDK reaches it through
  `AWS_ENDPOINT_URL_EKS` (botocore's service-specific endpoint variable).
- `IamTokens`: the stand-in API server's authenticator of `k8s-aws-v1.` tokens, modelled on
  aws-iam-authenticator's server (`pkg/token/token.go`, `Verify`): the token must decode to a GET of
  GetCallerIdentity at the STS endpoint (here the moto server), with `x-k8s-aws-id` among its signed
  headers, presigned for at most 15 minutes. The authenticator then calls the URL and STS checks the
  signature; moto cannot answer a presigned STS call (it routes a request without an
  `Authorization` header to S3, and its IAM enforcement needs that header), so STS's check is made
  here: the signature computed again with the secret moto issued for the key (`moto_sessions`, from
  moto's state) at the URL's own date, its age checked (STS answers it for 15 minutes after it was
  signed, whatever its X-Amz-Expires: `STS_PRESIGNED_VALIDITY`), and the session's ARN taken. That ARN (an
  assumed role's session, made the role's ARN) is looked up in the access entries, and the entry's
  Kubernetes group names the grant (`gco.reconcile.access`).

A token verified once is not verified again for two minutes (nor past STS's 15 minutes): the API
server keeps a webhook authenticator's answer that long (kube-apiserver's
`--authentication-token-webhook-cache-ttl`, default 2m0s), so EKS asks its authenticator once per
token and not once per request; a refusal is not kept. The sessions moto issued are read from its
state once per access key (a session's secret and token never change).

What they do not model: TLS to the API server (the stand-in serves plain HTTP on loopback; the CA is
handed over and not used), access policies (`AccessPolicies`: only `KubernetesGroups` entries map to
a grant), the cache of refusals (kube-apiserver's `--authentication-token-webhook-cache-unauthorized-ttl`),
and any other EKS API.
"""

from __future__ import annotations

import base64
import functools
import hmac
import json
import re
import threading
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlparse

from botocore.auth import SIGV4_TIMESTAMP, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from gco.local.assembly.reader import StackArtifact
from gco.local.assembly.resolve import Resolver
from gco.local.standin.server import Identity
from gco.reconcile.access import Grant
from gco.reconcile.eks import CLUSTER_HEADER
from gco.reconcile.kube_tokens import TOKEN_PREFIX

ACCESS_ENTRY_TYPE = "AWS::EKS::AccessEntry"
MAX_EXPIRES_S = 15 * 60  # aws-iam-authenticator refuses a presigned URL valid for longer
WEBHOOK_CACHE_TTL = timedelta(minutes=2)  # kube-apiserver's --authentication-token-webhook-cache-ttl
# How long STS answers a presigned GetCallerIdentity after its X-Amz-Date, whatever its X-Amz-Expires:
# "The sts GetCallerIdentity request is valid for 15 minutes regardless of this parameters value after
# it has been signed, but we set this unused parameter to 60 for legacy reasons ... IT IS IGNORED"
# (aws-iam-authenticator, pkg/token/token.go, on the X-Amz-Expires it sets); EKS's `get-token` gives
# the token an expirationTimestamp 14 minutes ahead accordingly.
STS_PRESIGNED_VALIDITY = timedelta(minutes=15)
_ASSUMED = re.compile(r"^arn:(?P<partition>[^:]+):sts::(?P<account>\d+):assumed-role/(?P<role>[^/]+)/.+$")


@dataclass(frozen=True)
class AccessEntry:
    """An access entry of the template: who (a principal's ARN) is in which Kubernetes groups."""

    principal_arn: str
    groups: tuple[str, ...]


def access_entries(stack: StackArtifact, resolver: Resolver) -> list[AccessEntry]:
    """The stack's access entries with their principals resolved (roles made locally, by ARN).

    Raises:
        AssemblyError: a principal the resolver was not given.
    """
    found = []
    for logical_id, resource in stack.resources(ACCESS_ENTRY_TYPE).items():
        props = resource.get("Properties", {})
        principal = str(resolver.resolve(props.get("PrincipalArn"), f"{logical_id}.PrincipalArn"))
        found.append(AccessEntry(principal, tuple(props.get("KubernetesGroups", []))))
    return found


@dataclass(frozen=True)
class Session:
    """Credentials STS issued: the caller's ARN, its secret key and its session token (None for an IAM
    user's long-term key)."""

    arn: str
    secret_key: str
    token: str | None


def moto_sessions(moto_url: str) -> Callable[[str], Session | None]:
    """The sessions the moto server issued, by access key id, from its state (`/moto-api/data.json`:
    STS's assumed roles); the local stand-in for STS's own record of what it signed. A session found
    is kept (it never changes); a key not found is looked up again next time."""
    found: dict[str, Session] = {}

    def session(access_key: str) -> Session | None:
        if access_key in found:
            return found[access_key]
        with urllib.request.urlopen(f"{moto_url}/moto-api/data.json", timeout=10) as answer:  # noqa: S310 - loopback
            state = json.loads(answer.read())
        for role in state.get("sts", {}).get("AssumedRole", []):
            if role.get("access_key_id") == access_key:
                arn, secret, token = (
                    str(role["arn"]),
                    str(role["secret_access_key"]),
                    role.get("session_token"),
                )
                found[access_key] = Session(arn, secret, token)
                return found[access_key]
        return None

    return session


class IamTokens:
    """The stand-in API server's authenticator of EKS tokens (see the module's docstring).

    Parameters:
        sts_url: the STS endpoint the tokens must be presigned for (the local moto server).
        cluster: the cluster's name, which each token's signed `x-k8s-aws-id` must carry.
        entries: the cluster's access entries; grants: a grant per Kubernetes group.
        sessions: the credentials STS issued, by access key id (`moto_sessions`).
        clock: the time, for the presigned URL's expiry.
    """

    def __init__(
        self,
        sts_url: str,
        cluster: str,
        entries: list[AccessEntry],
        grants: Mapping[str, Grant],
        sessions: Callable[[str], Session | None],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.sts = urlparse(sts_url)
        self.cluster = cluster
        self.entries = {entry.principal_arn: entry for entry in entries}
        self.grants = dict(grants)
        self.sessions = sessions
        self.clock = clock
        self.refusals: list[str] = []  # why each refused token was refused (never the token)
        self._verified: dict[str, tuple[Identity, datetime]] = {}  # token -> identity, kept until
        self._lock = threading.Lock()

    def __call__(self, token: str) -> Identity | None:
        now = self.clock()
        with self._lock:
            kept = self._verified.get(token)
        if kept is not None and now < kept[1]:
            return kept[0]
        url = self._url(token)
        arn = None if url is None else self._caller(url)
        if arn is None or url is None:
            return None
        identity = self._identity(arn)
        if identity is not None:
            until = min(now + WEBHOOK_CACHE_TTL, _expiry(url))
            with self._lock:
                self._verified = {t: v for t, v in self._verified.items() if now < v[1]}
                self._verified[token] = (identity, until)
        return identity

    def _identity(self, arn: str) -> Identity | None:
        """The grant the access entries give the caller `arn`; None (refused) when none does."""
        role = _role_arn(arn)
        entry = self.entries.get(role)
        grants = [self.grants[group] for group in entry.groups if group in self.grants] if entry else []
        if not grants:
            self.refusals.append(f"{role}: no access entry maps it to a group")
            return None
        return Identity(arn, grants[0])

    def _url(self, token: str) -> str | None:
        encoded = token.removeprefix(TOKEN_PREFIX)
        try:
            url = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except ValueError:
            self.refusals.append("not base64url")
            return None
        parsed = urlparse(url)
        query = {key: values[0] for key, values in parse_qs(parsed.query).items()}
        signed = query.get("X-Amz-SignedHeaders", "").split(";")
        if (parsed.scheme, parsed.netloc) != (self.sts.scheme, self.sts.netloc):
            self.refusals.append(f"presigned for {parsed.netloc}, not the STS endpoint")
        elif query.get("Action") != "GetCallerIdentity" or CLUSTER_HEADER not in signed:
            self.refusals.append("not a GetCallerIdentity signed with x-k8s-aws-id")
        elif not query.get("X-Amz-Expires", "").isdigit() or int(query["X-Amz-Expires"]) > MAX_EXPIRES_S:
            self.refusals.append("presigned for too long")
        else:
            return url
        return None

    def _caller(self, url: str) -> str | None:
        """The caller's ARN, as STS's GetCallerIdentity would answer the presigned URL: its signature
        checked with the secret STS issued for its key, its date within its expiry."""
        query = dict(parse_qsl(urlparse(url).query, keep_blank_values=True))
        session = self.sessions(query.get("X-Amz-Credential", "").split("/", 1)[0])
        if session is None or session.token != query.get("X-Amz-Security-Token"):
            self.refusals.append("credentials STS did not issue")
            return None
        signed_at = datetime.strptime(query.get("X-Amz-Date", ""), SIGV4_TIMESTAMP).replace(tzinfo=UTC)
        if self.clock() > signed_at + STS_PRESIGNED_VALIDITY:
            self.refusals.append("expired")
            return None
        expected = _signature(url, query, session, self.cluster)
        if not hmac.compare_digest(expected, query.get("X-Amz-Signature", "")):
            self.refusals.append("signature does not match")
            return None
        return session.arn


def _expiry(url: str) -> datetime:
    """When STS stops answering the presigned URL (checked already by `IamTokens._url`): 15 minutes
    after it was signed (`STS_PRESIGNED_VALIDITY`), not after its X-Amz-Expires."""
    query = dict(parse_qsl(urlparse(url).query, keep_blank_values=True))
    signed_at = datetime.strptime(query["X-Amz-Date"], SIGV4_TIMESTAMP).replace(tzinfo=UTC)
    return signed_at + STS_PRESIGNED_VALIDITY


def _signature(url: str, query: Mapping[str, str], session: Session, cluster: str) -> str:
    """The SigV4 query signature of the presigned URL, computed again (botocore's own signer, at the
    URL's own date) over what it signed: its query less the signature, `host` and `x-k8s-aws-id`."""
    key, _, region, service, _ = (query["X-Amz-Credential"] + "////").split("/", 4)
    parsed = urlparse(url)
    kept = {name: value for name, value in query.items() if not name.startswith("X-Amz-")}
    request = AWSRequest(
        method="GET", url=f"{parsed.scheme}://{parsed.netloc}{parsed.path}?{urlencode(kept)}"
    )
    request.headers[CLUSTER_HEADER] = cluster
    request.context["timestamp"] = query["X-Amz-Date"]
    credentials = Credentials(key, session.secret_key, session.token)
    signer = SigV4QueryAuth(credentials, service, region, int(query["X-Amz-Expires"]))
    signer._modify_request_before_signing(request)  # type: ignore[attr-defined]  # botocore's step, at a date
    canonical = signer.canonical_request(request)
    return str(signer.signature(signer.string_to_sign(request, canonical), request))


def _role_arn(arn: str) -> str:
    """An assumed role's session ARN made its role's ARN, as EKS maps it to an access entry."""
    match = _ASSUMED.match(arn)
    if match is None:
        return arn
    return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"


@functools.cache
def cluster_ca() -> str:
    """A self-signed CA certificate (PEM) for DescribeCluster's `certificateAuthority.data`: the client
    builds its TLS context from it, as from an EKS cluster's; the stand-in serves plain HTTP."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM).decode()


class DescribeClusterStandIn:
    """EKS's DescribeCluster for the local clusters, on loopback (see the module's docstring)."""

    def __init__(self, clusters: Mapping[str, str]) -> None:
        self.clusters = dict(clusters)  # name -> the stand-in API server's URL
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body, kind = stand_in.answer(self.path, self.headers.get("Authorization", ""))
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                if kind:
                    self.send_header("x-amzn-ErrorType", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="eks-standin")

    def answer(self, path: str, authorization: str) -> tuple[int, dict[str, Any], str]:
        """(status, body, error type) of one request."""
        if not authorization.startswith("AWS4-HMAC-SHA256 "):
            return 403, {"message": "Missing Authentication Token"}, "MissingAuthenticationTokenException"
        match = re.fullmatch(r"/clusters/([^/?]+)", path)
        if match is None:
            return 404, {"message": f"no such API: {path}"}, "UnknownOperationException"
        name = match.group(1)
        if name not in self.clusters:
            return 404, {"message": f"No cluster found for name: {name}."}, "ResourceNotFoundException"
        authority = base64.b64encode(cluster_ca().encode()).decode()
        cluster = {
            "name": name,
            "endpoint": self.clusters[name],
            "status": "ACTIVE",
            "certificateAuthority": {"data": authority},
        }
        return 200, {"cluster": cluster}, ""

    def start(self) -> DescribeClusterStandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> DescribeClusterStandIn:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
