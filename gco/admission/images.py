"""Image references resolved to digests: the `ImageResolver` port, its registry adapter, its stand-in.

A tag names whatever was pushed under it last, so a check of "was this build validated" first asks
the registry what the tag names now: a tag that moved since the matrix ran is another build.

- `RegistryResolver` speaks the OCI Distribution API: `HEAD /v2/<name>/manifests/<tag>` with an
  `Accept` of the OCI and Docker index and manifest media types, reading `Docker-Content-Digest`
  (https://github.com/opencontainers/distribution-spec/blob/main/spec.md, "Pulling manifests": "the
  client SHOULD include an Accept header"; the header is "OPTIONAL and clients SHOULD NOT depend on
  [it]", so without it the manifest is fetched with GET and its bytes hashed, which is what the
  digest is). A `401` with `WWW-Authenticate: Bearer realm=...,service=...,scope=...` is answered
  the Docker registry token way (https://distribution.github.io/distribution/spec/auth/token/): an
  anonymous `GET realm?service=...&scope=...` gives `{"token": ...}` (or `access_token`), and the
  request is sent again with `Authorization: Bearer <token>`. Docker Hub's short names
  (`vllm/vllm-openai`, `ubuntu`) are `registry-1.docker.io/<ns>/<name>`, `library/` for one part.
- An ECR reference (`<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>`) is resolved with
  `ecr:DescribeImages` (imageIds `imageTag`) in that Region, with the caller's IAM identity.
- `LocalImageResolver` stands in for a registry on the local stack (a JSON file of tag -> digest):
  an unknown tag is pushed on first sight, `push` moves a tag to a new digest. It models that a tag
  resolves to one digest at a time and that a moved tag is another build; not manifests, platforms,
  authentication or deletion.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx
from botocore.exceptions import BotoCoreError, ClientError

from gco import aws
from gco.admission.errors import ImageResolveError
from gco.evidence.builds import DIGEST, digest_of

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
DEFAULT_TAG = "latest"
# The index (multi-platform) types first: a tag of a multi-platform image names its index, and the
# index's digest is what `docker pull name@sha256:...` (and the matrix's pinned images) name.
MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
DIGEST_HEADER = "Docker-Content-Digest"
ECR_HOST = re.compile(r"(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?")
CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Reference:
    """An image reference split as Docker reads it: registry host, repository, tag, digest."""

    registry: str
    repository: str
    tag: str | None
    digest: str | None

    @classmethod
    def parse(cls, image: str) -> Reference:
        """Split `image`; the first part is a registry when it has a `.` or `:` or is `localhost`."""
        rest, _, digest = image.partition("@")
        first, slash, remainder = rest.partition("/")
        if slash and ("." in first or ":" in first or first == "localhost"):
            registry, path = first, remainder
        else:
            registry, path = DOCKER_HUB, rest
        name, colon, tag = path.rpartition(":") if ":" in path.rpartition("/")[2] else (path, "", "")
        if registry == DOCKER_HUB and "/" not in name:
            name = f"library/{name}"
        return cls(registry, name, tag if colon else None, digest or None)


@dataclass(frozen=True)
class ResolvedImage:
    """An image reference and the digest it names now."""

    image: str
    digest: str


class ImageResolver(Protocol):
    """The port: what digest an image reference names now."""

    def resolve(self, image: str) -> ResolvedImage: ...


def pinned(image: str) -> ResolvedImage | None:
    """A reference pinned by digest names that digest, with no call (its tag, if any, is ignored, as
    the container runtime ignores it)."""
    digest = digest_of(image)
    return ResolvedImage(image, digest) if digest else None


def _challenge(header: str) -> dict[str, str]:
    scheme, _, params = header.partition(" ")
    if scheme.lower() != "bearer":
        raise ImageResolveError(f"the registry asks for {scheme or 'an unknown'} authentication, not a token")
    return dict(CHALLENGE_PARAM.findall(params))


class RegistryResolver:
    """The OCI Distribution API (module docstring), anonymous token flow; ECR via DescribeImages."""

    def __init__(
        self,
        *,
        client: httpx.Client | None = None,
        base_url: Callable[[str], str] = lambda host: f"https://{host}",
        ecr: Callable[[str], Any] | None = None,
    ) -> None:
        self.http = client or httpx.Client(timeout=TIMEOUT_S, follow_redirects=True)
        self.base_url = base_url
        self.ecr = ecr or (lambda region: aws.client("ecr", region=region))

    def resolve(self, image: str) -> ResolvedImage:
        """The digest `image` names now.

        Raises:
            ImageResolveError: the registry refused, could not be reached, or named no digest.
        """
        found = pinned(image)
        if found is not None:
            return found
        ref = Reference.parse(image)
        tag = ref.tag or DEFAULT_TAG
        ecr = ECR_HOST.fullmatch(ref.registry)
        if ecr is not None:
            return ResolvedImage(image, self._ecr(ecr["account"], ecr["region"], ref.repository, tag))
        host = DOCKER_HUB_API if ref.registry == DOCKER_HUB else ref.registry
        url = f"{self.base_url(host)}/v2/{ref.repository}/manifests/{tag}"
        try:
            return ResolvedImage(image, self._manifest_digest(url, ref.repository))
        except httpx.HTTPError as error:
            raise ImageResolveError(f"cannot resolve {image}: {type(error).__name__}: {error}") from error

    def _manifest_digest(self, url: str, repository: str) -> str:
        headers = {"Accept": ", ".join(MANIFEST_TYPES)}
        answer = self.http.head(url, headers=headers)
        if answer.status_code == httpx.codes.UNAUTHORIZED:
            headers["Authorization"] = f"Bearer {self._token(answer, repository)}"
            answer = self.http.head(url, headers=headers)
        if answer.status_code != httpx.codes.OK:
            raise ImageResolveError(f"HEAD {url} answered {answer.status_code}")
        digest: str | None = answer.headers.get(DIGEST_HEADER)
        if digest is None:  # optional in the OCI spec: the digest of the manifest's bytes instead
            body = self.http.get(url, headers=headers)
            if body.status_code != httpx.codes.OK:
                raise ImageResolveError(f"GET {url} answered {body.status_code}")
            digest = "sha256:" + hashlib.sha256(body.content).hexdigest()
        if not DIGEST.fullmatch(digest):
            raise ImageResolveError(f"{url} named digest {digest[:80]!r}, not sha256:<64 hex>")
        return digest

    def _token(self, answer: httpx.Response, repository: str) -> str:
        params = _challenge(answer.headers.get("WWW-Authenticate", ""))
        realm = params.pop("realm", None)
        if not realm:
            raise ImageResolveError("the registry's token challenge names no realm")
        params.setdefault("scope", f"repository:{repository}:pull")
        reply = self.http.get(realm, params=params)
        if reply.status_code != httpx.codes.OK:
            raise ImageResolveError(f"the token service {realm} answered {reply.status_code}")
        try:
            body = reply.json()
            token: object = body.get("token") or body.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise ImageResolveError(f"the token service {realm} gave no token")
        return token

    def _ecr(self, account: str, region: str, repository: str, tag: str) -> str:
        try:
            answer = self.ecr(region).describe_images(
                registryId=account, repositoryName=repository, imageIds=[{"imageTag": tag}]
            )
        except (ClientError, BotoCoreError) as error:
            raise ImageResolveError(f"ECR DescribeImages of {repository}:{tag}: {error}") from error
        details = answer.get("imageDetails") or []
        if not details or not DIGEST.fullmatch(str(details[0].get("imageDigest", ""))):
            raise ImageResolveError(f"ECR names no digest for {repository}:{tag}")
        return str(details[0]["imageDigest"])


class LocalImageResolver:
    """The local stack's registry stand-in: a JSON file of `image -> digest` (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _tags(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as error:
            raise ImageResolveError(f"cannot read the local registry {self.path}: {error}") from error
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def push(self, image: str, digest: str | None = None) -> ResolvedImage:
        """Point the tag `image` at `digest` (default: a new random one): the tag moved.

        Raises:
            ImageResolveError: the file cannot be written, or `digest` is not sha256:<64 hex>.
        """
        digest = digest or "sha256:" + secrets.token_hex(32)
        if not DIGEST.fullmatch(digest):
            raise ImageResolveError(f"{digest[:80]!r} is not sha256:<64 hex>")
        tags = {**self._tags(), image: digest}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".partial")
            partial.write_text(json.dumps(tags, indent=2, sort_keys=True), encoding="utf-8")
            partial.replace(self.path)
        except OSError as error:
            raise ImageResolveError(f"cannot write the local registry {self.path}: {error}") from error
        return ResolvedImage(image, digest)

    def resolve(self, image: str) -> ResolvedImage:
        """The digest the tag names: pinned references as they are; an unknown tag is pushed now.

        Raises:
            ImageResolveError: the file cannot be read or written.
        """
        found = pinned(image)
        if found is not None:
            return found
        digest = self._tags().get(image)
        return ResolvedImage(image, digest) if digest else self.push(image)
