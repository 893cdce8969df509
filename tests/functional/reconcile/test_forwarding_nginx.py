"""The rendered proxy configuration in a real nginx: a request whose serving Region is another goes
there once, over verified TLS, streamed; a hop request, or one for this Region, is served here.

nginx runs the configuration `nginx_conf(forwarding)` renders, adapted to loopback as the local stack
adapts it (`gco.local.region.nginx.local_conf`), with two stand-ins, each for a thing that cannot
run here:
- DNS: each other Region's name (`us-west-2.llm.test`) is an nginx `upstream` block of that name
  pointing at a loopback server; nginx uses an upstream group whose name equals `proxy_pass`'s value
  instead of resolving it (https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_pass),
  so `$proxy_host`, the SNI name and the name verified stay the Region's name;
- the public CA: the system bundle's path is replaced by a test CA that signed the stand-in
  Region's certificate. A second stand-in Region (`eu-west-1`) presents a certificate of another CA,
  which nginx must refuse.
Skipped where nginx is not installed (`.ci/run` installs it).
"""

from __future__ import annotations

import datetime
import http.server
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gco.front_door import HOP_HEADER, SERVE_REGION_HEADER
from gco.local.processes.listen import LOOPBACK, free_port
from gco.local.region.nginx import local_conf, nginx_path, self_signed
from gco.reconcile.proxy.proxy_conf import nginx_conf
from gco.reconcile.proxy.route_shards import shard_data, shard_of
from gco.reconcile.proxy.routes import Route, RouteTable
from gco.reconcile.proxy_forwarding import CA_BUNDLE, Forwarding

pytestmark = pytest.mark.skipif(nginx_path() is None, reason="nginx is not installed")

DOMAIN = "llm.test"
HERE, THERE, ROGUE = "us-east-1", "us-west-2", "eu-west-1"
SERVICE = "smol.gco-inference.svc"
TABLE = RouteTable(
    routes=(Route(endpoint="smol", path="/inference/smol", upstream=f"http://{SERVICE}:8000"),)
)
WAIT_S = 10.0


def _certificate(
    subject: str, issuer_key: Any, issuer: x509.Name | None, *, ca: bool
) -> tuple[Any, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
    return key, builder.sign(issuer_key or key, hashes.SHA256())


def _pem(directory: Path, stem: str, key: Any, certificate: x509.Certificate) -> tuple[Path, Path]:
    key_path, cert_path = directory / f"{stem}.key", directory / f"{stem}.crt"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return key_path, cert_path


def _ca(directory: Path, stem: str) -> tuple[Any, x509.Certificate, Path]:
    key, certificate = _certificate(f"gco test {stem}", None, None, ca=True)
    return key, certificate, _pem(directory, stem, key, certificate)[1]


@dataclass
class Seen:
    """What one stand-in server was asked: each request's path, headers and body; the SNI names."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    sni: list[str | None] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _server(answer: bytes, seen: Seen, context: ssl.SSLContext | None) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen.requests.append({"path": self.path, "headers": dict(self.headers.items()), "body": body})
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in (answer + b" first\n", answer + b" last\n"):
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
                # The last chunk waits until the client has read the first: a buffering hop would hold
                # the first until the answer ended, and the wait would run out (not a timing assertion:
                # the test fails on the missing chunk, whatever the clock).
                if b"first" in chunk and answer == b"remote":
                    seen.release.wait(WAIT_S)
            self.wfile.write(b"0\r\n\r\n")

        do_GET = do_POST = _serve  # noqa: N815 - http.server's names

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer((LOOPBACK, 0), Handler)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _tls(directory: Path, name: str, ca_key: Any, ca_cert: x509.Certificate, seen: Seen) -> ssl.SSLContext:
    key, certificate = _certificate(name, ca_key, ca_cert.subject, ca=False)
    key_path, cert_path = _pem(directory, name, key, certificate)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    context.sni_callback = lambda _socket, server_name, _context: seen.sni.append(server_name)
    return context


@dataclass
class Proxy:
    url: str
    ca_bundle: Path
    local: Seen
    remote: Seen
    rogue: Seen


@pytest.fixture
def proxy(tmp_path: Path) -> Iterator[Proxy]:
    trusted_key, trusted_cert, trusted_path = _ca(tmp_path, "trusted-ca")
    other_key, other_cert, _ = _ca(tmp_path, "other-ca")
    local, remote, rogue = Seen(), Seen(), Seen()
    servers = [
        _server(b"local", local, None),
        _server(b"remote", remote, _tls(tmp_path, f"{THERE}.{DOMAIN}", trusted_key, trusted_cert, remote)),
        _server(b"rogue", rogue, _tls(tmp_path, f"{ROGUE}.{DOMAIN}", other_key, other_cert, rogue)),
    ]
    engine, there, rogue_port = (server.server_address[1] for server in servers)
    forwarding = Forwarding(region=HERE, regions=(HERE, THERE, ROGUE), domain=DOMAIN)
    run = tmp_path / "run"
    (run / "routes").mkdir(parents=True)
    port = free_port()
    addresses = {SERVICE: f"{LOOPBACK}:{engine}"}
    conf = local_conf(
        nginx_conf(forwarding),
        addresses,
        port=port,
        tls_dir=tmp_path / "tls",
        run_dir=run,
        status_port=free_port(),
    )
    assert CA_BUNDLE in conf
    stand_ins = "".join(
        f"    upstream {region}.{DOMAIN} {{ server {LOOPBACK}:{remote_port}; }}\n"
        for region, remote_port in ((THERE, there), (ROGUE, rogue_port))
    )
    conf = conf.replace(CA_BUNDLE, str(trusted_path)).replace("http {\n", "http {\n" + stand_ins, 1)
    (run / "nginx.conf").write_text(conf)
    for key, text in shard_data(shard_of("smol"), TABLE).items():
        if key.endswith(".map"):
            (run / "routes" / key).write_text(
                local_conf(text, addresses, port=port, tls_dir=run, run_dir=run)
            )
    ca_bundle = self_signed(tmp_path / "tls")
    program = nginx_path()
    assert program is not None
    check = subprocess.run(
        [program, "-t", "-c", str(run / "nginx.conf")], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stderr
    process = subprocess.Popen(
        [program, "-c", str(run / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = f"https://{LOOPBACK}:{port}"
        for _ in range(200):  # bounded: up to 10 s for nginx to listen
            try:
                httpx.get(f"{url}/healthz", verify=ssl.create_default_context(cafile=ca_bundle), timeout=1.0)
                break
            except httpx.TransportError:
                threading.Event().wait(0.05)
        yield Proxy(url=url, ca_bundle=ca_bundle, local=local, remote=remote, rogue=rogue)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        for server in servers:
            server.shutdown()
            server.server_close()


def _post(proxy: Proxy, path: str, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{proxy.url}{path}",
        content=b'{"prompt": "hi"}',
        headers={"Authorization": "Bearer gco-0123456789ab-secret", **headers},
        verify=ssl.create_default_context(cafile=proxy.ca_bundle),
        timeout=WAIT_S,
    )


def test_another_serving_region_is_forwarded_once_as_sent_over_verified_tls(proxy: Proxy) -> None:
    with httpx.Client(verify=ssl.create_default_context(cafile=proxy.ca_bundle), timeout=WAIT_S) as client:
        request = client.build_request(
            "POST",
            f"{proxy.url}/inference/smol/v1/completions?stream=true",
            content=b'{"prompt": "hi"}',
            headers={"Authorization": "Bearer gco-0123456789ab-secret", SERVE_REGION_HEADER: THERE},
        )
        response = client.send(request, stream=True)
        lines = response.iter_lines()
        assert next(lines) == "remote first"  # before the last chunk was even written (see `_server`)
        proxy.remote.release.set()
        assert next(lines) == "remote last"
        response.close()
    assert response.status_code == 200 and "X-Gco-Version" not in response.headers
    (seen,) = proxy.remote.requests
    assert seen["path"] == "/inference/smol/v1/completions?stream=true"  # the path as sent, prefix kept
    assert seen["body"] == b'{"prompt": "hi"}'
    headers = {name.lower(): value for name, value in seen["headers"].items()}
    assert headers["host"] == f"{THERE}.{DOMAIN}"
    assert headers[HOP_HEADER.lower()] == "1"
    assert headers["authorization"] == "Bearer gco-0123456789ab-secret"
    assert proxy.remote.sni == [f"{THERE}.{DOMAIN}"]
    assert proxy.local.requests == []


def test_an_endpoint_without_a_route_here_is_still_forwarded(proxy: Proxy) -> None:
    proxy.remote.release.set()
    response = _post(proxy, "/inference/elsewhere/v1/completions", **{SERVE_REGION_HEADER: THERE})
    assert response.status_code == 200 and response.text.startswith("remote first")
    assert _post(proxy, "/inference/elsewhere/v1/completions").status_code == 404  # not forwarded: 404 here


@pytest.mark.parametrize(
    "headers",
    [
        {SERVE_REGION_HEADER: THERE, HOP_HEADER: "1"},  # forwarded once already
        {SERVE_REGION_HEADER: HERE},  # this Region serves
        {SERVE_REGION_HEADER: "ap-south-1"},  # no Region of the deployment
        {},
    ],
)
def test_hop_requests_and_this_region_are_served_here(proxy: Proxy, headers: dict[str, str]) -> None:
    response = _post(proxy, "/inference/smol/v1/completions", **headers)
    assert response.status_code == 200 and response.text == "local first\nlocal last\n"
    assert response.headers["X-Gco-Version"] == "primary"
    (seen,) = proxy.local.requests
    assert seen["path"] == "/v1/completions"  # routed here: the prefix stripped
    assert HOP_HEADER.lower() not in {name.lower() for name in seen["headers"]}
    assert proxy.remote.requests == []


def test_a_region_whose_certificate_does_not_verify_is_never_sent_the_request(proxy: Proxy) -> None:
    response = _post(proxy, "/inference/smol/v1/completions", **{SERVE_REGION_HEADER: ROGUE})
    assert response.status_code == 502
    assert proxy.rogue.requests == [] and proxy.rogue.sni == [f"{ROGUE}.{DOMAIN}"]
