"""Tags resolved to digests: the registry adapter against a loopback HTTP server that behaves as an
OCI registry with token auth, ECR against the moto server, and the local stand-in.

The registry follows https://github.com/opencontainers/distribution-spec/blob/main/spec.md
("Pulling manifests": `HEAD /v2/<name>/manifests/<reference>`, the digest in
`Docker-Content-Digest`, which is optional) and the Docker registry token flow
(https://distribution.github.io/distribution/spec/auth/token/: a 401 with `WWW-Authenticate: Bearer
realm=...,service=...,scope=...`, a GET of the realm for a token, the request again with it).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

import pytest

from gco import aws
from gco.admission.errors import ImageResolveError
from gco.admission.images import MANIFEST_TYPES, LocalImageResolver, Reference, RegistryResolver
from gco.local.moto.motoserver import MotoServer
from gco.local.processes.listen import LOOPBACK

MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST_TYPES[0], "manifests": []}).encode()
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
TOKEN = "anonymous-pull-token"


class Registry(BaseHTTPRequestHandler):
    """`vllm/vllm-openai:v1` behind token auth; `/token` gives a pull token for that scope."""

    seen: ClassVar[list[tuple[str, str, dict[str, str]]]] = []
    digest_header = True

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def _manifest(self, body: bool) -> None:
        Registry.seen.append((self.command, self.path, dict(self.headers)))
        if self.path != "/v2/vllm/vllm-openai/manifests/v1":
            self.send_response(404)
            self.end_headers()
            return
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            host = self.headers["Host"]
            self.send_response(401)
            self.send_header(
                "WWW-Authenticate",
                f'Bearer realm="http://{host}/token",service="test-registry",'
                'scope="repository:vllm/vllm-openai:pull"',
            )
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", MANIFEST_TYPES[0])
        self.send_header("Content-Length", str(len(MANIFEST)))
        if Registry.digest_header:
            self.send_header("Docker-Content-Digest", DIGEST)
        self.end_headers()
        if body:
            self.wfile.write(MANIFEST)

    def do_HEAD(self) -> None:
        self._manifest(body=False)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path != "/token":
            self._manifest(body=True)
            return
        Registry.seen.append(("GET", self.path, dict(self.headers)))
        query = parse_qs(url.query)
        good = query == {"service": ["test-registry"], "scope": ["repository:vllm/vllm-openai:pull"]}
        payload = json.dumps({"token": TOKEN} if good else {}).encode()
        self.send_response(200 if good else 403)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def registry() -> Iterator[str]:
    Registry.seen = []
    Registry.digest_header = True
    server = ThreadingHTTPServer((LOOPBACK, 0), Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{LOOPBACK}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def resolver() -> RegistryResolver:
    return RegistryResolver(base_url=lambda host: f"http://{host}")


def test_a_tag_is_resolved_through_the_token_challenge(registry: str) -> None:
    found = resolver().resolve(f"{registry}/vllm/vllm-openai:v1")
    assert found.digest == DIGEST
    (first, _, unauth), (token, query, _), (again, _, auth) = Registry.seen
    assert (first, token, again) == ("HEAD", "GET", "HEAD")
    assert "Authorization" not in unauth and auth["Authorization"] == f"Bearer {TOKEN}"
    assert query.startswith("/token?")
    assert auth["Accept"].split(", ") == list(MANIFEST_TYPES)  # index and manifest types, OCI and Docker


def test_without_the_digest_header_the_manifest_bytes_are_hashed(registry: str) -> None:
    Registry.digest_header = False
    assert resolver().resolve(f"{registry}/vllm/vllm-openai:v1").digest == DIGEST
    assert [method for method, _, _ in Registry.seen][-1] == "GET"


def test_a_pinned_reference_needs_no_call_and_errors_are_named(registry: str) -> None:
    pinned = f"{registry}/vllm/vllm-openai:v1@sha256:" + "c" * 64
    assert resolver().resolve(pinned).digest == "sha256:" + "c" * 64
    assert Registry.seen == []
    with pytest.raises(ImageResolveError, match="answered 404"):
        resolver().resolve(f"{registry}/vllm/other:v1")
    with pytest.raises(ImageResolveError, match="ConnectError"):
        RegistryResolver(base_url=lambda host: "http://127.0.0.1:9").resolve("r.example/x:1")


def test_references_are_split_as_docker_reads_them() -> None:
    assert Reference.parse("ubuntu") == Reference("docker.io", "library/ubuntu", None, None)
    assert Reference.parse("vllm/vllm-openai:v0.6.3") == Reference(
        "docker.io", "vllm/vllm-openai", "v0.6.3", None
    )
    assert Reference.parse("localhost:5000/a/b:t@sha256:x") == Reference(
        "localhost:5000", "a/b", "t", "sha256:x"
    )
    assert Reference.parse("ghcr.io/o/r") == Reference("ghcr.io", "o/r", None, None)


def test_an_ecr_tag_is_resolved_with_describe_images(moto: MotoServer) -> None:
    ecr = aws.client("ecr", region="us-west-2", endpoint_url=moto.url)
    ecr.create_repository(repositoryName="engines/vllm")
    manifest = json.dumps({"schemaVersion": 2, "mediaType": MANIFEST_TYPES[3], "layers": []})
    pushed = ecr.put_image(repositoryName="engines/vllm", imageManifest=manifest, imageTag="v1")
    account = pushed["image"]["registryId"]
    found = RegistryResolver(ecr=lambda region: aws.client("ecr", region=region, endpoint_url=moto.url))
    image = f"{account}.dkr.ecr.us-west-2.amazonaws.com/engines/vllm:v1"
    assert found.resolve(image).digest == pushed["image"]["imageId"]["imageDigest"]
    with pytest.raises(ImageResolveError, match="DescribeImages"):
        found.resolve(f"{account}.dkr.ecr.us-west-2.amazonaws.com/engines/vllm:v2")


def test_the_local_stand_in_moves_a_tag(tmp_path: Path) -> None:
    local = LocalImageResolver(tmp_path / "registry.json")
    first = local.resolve("fake:1")
    assert local.resolve("fake:1") == first  # a tag names one digest at a time
    moved = local.push("fake:1")
    assert moved.digest != first.digest and local.resolve("fake:1") == moved
    with pytest.raises(ImageResolveError, match="not sha256"):
        local.push("fake:1", "latest")
