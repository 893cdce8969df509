"""The local global address: bearer keys checked, Regions chosen, the request relayed as it streams.

What it stands in for (docs/global.md): Route 53 latency records with health checks in front of one
API Gateway custom domain per Region, whose Lambda authorizer checks the bearer key and chooses the
serving Region (`gco.global_access.routing`), and the Regional proxy that forwards to that Region.
Here one loopback server does all of it per request:

1. `Authorization: Bearer <key>` is parsed and checked against the keys table (a consistent read on
   the moto server, so a revoked key is refused from the next request on): 401 with
   `WWW-Authenticate: Bearer` (RFC 6750 section 3) for no key, a malformed one, an unknown one or a
   revoked one; 403 for a key outside its scope. SigV4 is not modelled here: in AWS a SigV4 caller
   uses its Region's IAM `InvokeUrl` (a signature names one Region), locally `--region`.
2. The endpoint's record is read afresh and `choose_regions` orders the Regions that may serve it;
   none: 503 naming each Region and why (404 only for an endpoint that has no record).
3. Regions the health checker judges unhealthy go last, and when every one is unhealthy all are
   tried: Route 53 then "considers all the records in the group to be healthy"
   (docs.aws.amazon.com/Route53/latest/DeveloperGuide/health-checks-how-route-53-chooses-records.html).
4. The request goes to the first Region's proxy; a connection failure, or a 404/502/503/504 answer
   (a proxy without the route, no ready replica, no upstream), moves it to the next Region before
   any byte reached the caller (a 404 only when the proxy gave it: an engine's 404 comes through a
   route, which names the version that answered in `X-Gco-Version`, and would be the same in every
   Region): what the health checks and the authorizer's fresh choice do in AWS, in one request
   instead of over a health-check interval and a DNS TTL. An answer that began is relayed to its end
   (chunk by chunk, the first token before the last, up to `GENERATION_TIMEOUT_S` between bytes) and
   never retried: a break mid-stream ends the caller's answer, as nginx does.

The answer names the Region in `X-Gco-Region`, and the Regions tried before it in `X-Gco-Tried`.
Not modelled: DNS and its TTLs (callers hold the one loopback URL), the health checkers' 10-30 s
interval and their spread over the world, API Gateway's own limits and TLS at the global name
(the local address is plain HTTP on loopback; the Regional proxies behind it are TLS).
"""

from __future__ import annotations

import json
import logging
import re
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from typing import Protocol
from urllib.parse import parse_qsl

import httpx

from gco.endpoints.errors import EndpointError
from gco.endpoints.paths import INGRESS_PREFIX, escape_reason
from gco.endpoints.record import EndpointRecord
from gco.endpoints.serving import ServingRecord, serving_of
from gco.front_door import GENERATION_TIMEOUT_S
from gco.global_access import keys
from gco.global_access.errors import BearerFormatError, KeyStoreError
from gco.global_access.keys import ApiKey
from gco.global_access.routing import REGION_HEADER, choose_regions, unavailable_message
from gco.local.assembly.apigateway import GlobalApiGate
from gco.local.front.health import HealthChecker
from gco.local.processes.listen import LOOPBACK
from gco.local.region.services import answer, read_body, relay, serve
from gco.reconcile.proxy.routes import HEALTH_PATH, VERSION_HEADER

log = logging.getLogger(__name__)
TRIED_HEADER = "X-Gco-Tried"
# A Region that does not accept a connection in this time is passed over for the next one.
CONNECT_TIMEOUT_S = 2.0
RETRY_STATUSES = frozenset({404, 502, 503, 504})
ENDPOINT_PATH = re.compile(r"/inference/(?P<name>[a-z0-9-]+)(?P<rest>/[^?]*)?")
FORWARDED_HEADERS = ("content-type", "accept")
READERS = 16  # threads reading endpoint records beside the key checks


def _elsewhere(reply: httpx.Response) -> bool:
    """Whether a Region's answer sends the request on to the next Region: a retried status, but not a
    404 that an engine gave through the Region's route (it carries the version that answered)."""
    if reply.status_code == 404 and VERSION_HEADER in reply.headers:
        return False
    return reply.status_code in RETRY_STATUSES


class RecordReader(Protocol):
    """Reads an endpoint's record (the endpoint store: `EndpointStore.get`)."""

    def get(self, name: str, consistent_read: bool = True) -> EndpointRecord | None: ...


class KeyReader(Protocol):
    """Reads a key's record (`gco.global_access.key_store.DynamoKeyStore`)."""

    def get(self, key_id: str) -> ApiKey | None: ...


def error_body(message: str, kind: str, code: str) -> bytes:
    """An error answer in the OpenAI shape, which the OpenAI SDKs read into their exceptions."""
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


class GlobalFront:
    """The global address on a loopback port; `url` is its base (`<url>/inference/<name>/...`).

    Parameters:
        records: the endpoint store (home Region).
        key_store: the keys table.
        proxies: Region -> its proxy's base URL (`https://127.0.0.1:<port>`).
        order: the Regions nearest first (locally: the stack's Region order).
        health: the health checker of the proxies (None: every Region counts as healthy).
        verify: TLS verification of the proxies (their CA bundle).
        stale_after_s: the routing's staleness bound on a Region's status (`choose_regions`).
        now: the wall clock, for key revocation times and staleness (injected by tests).
        gate: the synthesized global API's authorizer and gateway responses
            (`gco.local.assembly.apigateway.GlobalApiGate`): each request is decided by the deployed
            authorizer function instead of the keys checked here, and refused as the API answers.
    """

    def __init__(
        self,
        records: RecordReader,
        key_store: KeyReader,
        proxies: Mapping[str, str],
        *,
        order: Sequence[str] | None = None,
        health: HealthChecker | None = None,
        verify: ssl.SSLContext | bool = True,
        stale_after_s: float = float("inf"),
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        port: int = 0,
        gate: GlobalApiGate | None = None,
    ) -> None:
        self.gate = gate
        self.records = records
        self.key_store = key_store
        self.proxies = dict(proxies)
        self.order = list(order) if order is not None else list(proxies)
        self.health = health
        self.stale_after_s = stale_after_s
        self.now = now
        timeout = httpx.Timeout(float(GENERATION_TIMEOUT_S), connect=CONNECT_TIMEOUT_S)
        self._client = httpx.Client(timeout=timeout, verify=verify)
        self._reads = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="global-read")
        self._server = serve(self.handle, "global-front", port)
        self.url = f"http://{LOOPBACK}:{self._server.server_address[1]}"

    def regions_for(self, record: ServingRecord) -> list[str]:
        """The Regions to try, in order: `choose_regions`, the healthy ones first."""
        chosen = choose_regions(record, None, self.order, self.now(), self.stale_after_s)
        chosen = [region for region in chosen if region in self.proxies]
        if self.health is None:
            return chosen
        healthy = [region for region in chosen if self.health.healthy(region)]
        return healthy + [region for region in chosen if region not in healthy]

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        body = read_body(request)
        if body is None:
            return
        if request.path == HEALTH_PATH:
            answer(request, 200, b"ok\n", "text/plain")
            return
        path, sep, query = request.path.partition("?")
        match = ENDPOINT_PATH.fullmatch(path)
        refused = escape_reason(path)
        if refused is not None:
            answer(request, 400, error_body(f"the path {refused}", "invalid_request_error", "bad_path"))
            return
        if match is None:
            message = f"no such path: the global address serves {INGRESS_PREFIX}<endpoint>/..."
            answer(request, 404, error_body(message, "invalid_request_error", "not_found"))
            return
        name = match["name"]
        # The record is read while the key is (two reads of about the same time); it is used only
        # once the key passed, so a refused caller learns nothing of the endpoint.
        reading = self._reads.submit(self.records.get, name, consistent_read=True)
        if not self._authorized(request, name):
            reading.cancel()
            return
        try:
            record = reading.result()
        except EndpointError as error:
            answer(request, 503, error_body(f"the endpoint table: {error}", "server_error", "unavailable"))
            return
        if record is None:
            answer(request, 404, error_body(f"no endpoint {name!r}", "invalid_request_error", "not_found"))
            return
        serving = serving_of(record)
        regions = self.regions_for(serving)
        if not regions:
            message = unavailable_message(serving, self.now(), self.stale_after_s)
            answer(request, 503, error_body(message, "server_error", "no_region"))
            return
        self._forward(request, regions, f"{INGRESS_PREFIX}{name}{match['rest'] or ''}{sep}{query}", body)

    def _authorized(self, request: BaseHTTPRequestHandler, endpoint: str) -> bool:
        """Check the bearer key; answer 401/403/503 and return False when it does not pass."""
        if self.gate is not None:
            return self._authorized_by_gate(request)
        challenge = {"www-authenticate": 'Bearer realm="gco"'}
        try:
            key_id, key = keys.parse_bearer(request.headers.get("authorization"))
            record = self.key_store.get(key_id)
        except BearerFormatError as error:
            answer(
                request,
                401,
                error_body(str(error), "authentication_error", "invalid_api_key"),
                headers=challenge,
            )
            return False
        except KeyStoreError as error:
            answer(request, 503, error_body(f"the keys table: {error}", "server_error", "unavailable"))
            return False
        verdict = keys.verify(key, record, endpoint, self.now())
        if verdict.allowed:
            return True
        kind = "permission_error" if verdict.status == 403 else "authentication_error"
        code = verdict.refusal or "invalid_api_key"
        log.info("key %s refused for %s: %s", verdict.key_id or "?", endpoint, verdict.refusal)
        answer(request, verdict.status, error_body(verdict.reason, kind, code), headers=challenge)
        return False

    def _authorized_by_gate(self, request: BaseHTTPRequestHandler) -> bool:
        """The deployed authorizer's decision; a refusal answered with the API's gateway response."""
        assert self.gate is not None
        path, _, query = request.path.partition("?")
        headers = {name: value for name, value in request.headers.items()}
        refusal = self.gate.check(request.command, path, headers, dict(parse_qsl(query)))
        if refusal is None:
            return True
        answer(request, refusal.status, refusal.body)
        return False

    def _forward(self, request: BaseHTTPRequestHandler, regions: list[str], path: str, body: bytes) -> None:
        """Send to each Region in turn until one answers other than a retried status; relay it."""
        headers = {name: value for name in FORWARDED_HEADERS if (value := request.headers.get(name))}
        tried: list[str] = []
        last: tuple[int, bytes, str] | None = None
        failures: list[str] = []
        for region in regions:
            url = self.proxies[region] + path
            started = time.monotonic()
            try:
                with self._client.stream(request.command, url, content=body, headers=headers) as reply:
                    if _elsewhere(reply) and region != regions[-1]:
                        reply.read()
                        last = (reply.status_code, reply.content, reply.headers.get("content-type", ""))
                        failures.append(f"{region}: {reply.status_code}")
                        tried.append(region)
                        continue
                    extra = {REGION_HEADER: region}
                    if tried:
                        extra[TRIED_HEADER] = ",".join(tried)
                    if version := reply.headers.get(VERSION_HEADER):
                        extra[VERSION_HEADER] = version
                    relay(request, reply, headers=extra)
                    return
            except httpx.HTTPError as error:  # nothing was sent to the caller yet: try the next Region
                waited = time.monotonic() - started
                failures.append(f"{region}: {type(error).__name__} after {waited:.1f} s")
                tried.append(region)
        extra = {TRIED_HEADER: ",".join(tried)} if tried else {}
        if last is not None:
            answer(request, last[0], last[1], last[2] or "application/json", headers=extra)
            return
        message = "no Region answered (" + "; ".join(failures) + ")"
        answer(request, 503, error_body(message, "server_error", "no_region"), headers=extra)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()
        self._reads.shutdown(wait=False, cancel_futures=True)
