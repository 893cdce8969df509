"""The local global address: bearer keys checked, Regions chosen, the request relayed as it streams.

What it stands in for (docs/global.md): Route 53 latency records with health checks in front of one
API Gateway custom domain per Region, whose Lambda authorizer checks the bearer key and chooses the
serving Region (`gco.global_access.routing`), and the Regional proxy that forwards to that Region.
Here one loopback server (an ASGI app on uvicorn: `gco.local.front.server`) does all of it per
request:

1. `Authorization: Bearer <key>` is parsed and checked before any byte of the body is read, against
   the keys table (a consistent read on the moto server, so a revoked key is refused from the next
   request on): 401 with `WWW-Authenticate: Bearer` (RFC 6750 section 3) for no key, a malformed
   one, an unknown one or a revoked one; 403 for a key outside its scope. SigV4 is not modelled
   here: in AWS a SigV4 caller uses its Region's IAM `InvokeUrl` (a signature names one Region),
   locally `--region`.
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

A request API Gateway would refuse is refused here as it would be, and answered before its body is
read where API Gateway's limits allow (API Gateway Developer Guide, "Amazon API Gateway quotas",
api-gateway-execution-service-limits-table.html); each answer of our own is in the OpenAI error
shape and closes the connection when the body was left unread:

- the request line and headers over 10240 bytes: 431 (`gco.local.front.server.HEADER_LIMIT_BYTES`);
- a body declared or found larger than `MAX_REQUEST_BYTES`: 413. API Gateway's payload limit is 10 MB;
  the path behind it (the Regional proxy's `client_max_body_size`) takes 2 MB, so the global address
  refuses at once what the proxy would refuse after the relay;
- `Content-Length` that is not a number, or two that differ: 400 (h11, before the app sees it);
- two `Authorization` headers: 400 naming the header (which key decides would be a guess);
- a body that has not arrived whole `BODY_TIMEOUT_S` after the key passed: 408. API Gateway documents
  no timeout of its own for a request body, only the integration's (29 s for an answer that does not
  stream, 15 minutes for a streamed one: `GENERATION_TIMEOUT_S`); the bound is ours, so that a caller
  that stops sending holds nothing for long;
- a chunked body is decoded and forwarded whole, with its length.

Not modelled: DNS and its TTLs (callers hold the one loopback URL), the health checkers' 10-30 s
interval and their spread over the world, API Gateway's 29 s limit on an answer that does not
stream (every answer here is relayed as it streams), its throttling and request rate quotas, and
TLS at the global name (the local address is plain HTTP on loopback; the Regional proxies behind it
are TLS).
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol
from urllib.parse import parse_qsl

import httpx
from starlette.types import Receive, Scope, Send

from gco.endpoints.errors import EndpointError
from gco.endpoints.paths import INGRESS_PREFIX, escape_reason
from gco.endpoints.record import EndpointRecord
from gco.endpoints.serving import ServingRecord, serving_of
from gco.front_door import GENERATION_TIMEOUT_S, MAX_REQUEST_BYTES, error_body
from gco.global_access import keys
from gco.global_access.errors import BearerFormatError, KeyStoreError
from gco.global_access.keys import ApiKey
from gco.global_access.routing import REGION_HEADER, choose_regions, unavailable_message
from gco.local.assembly.apigateway import GlobalApiGate
from gco.local.front.health import HealthChecker
from gco.local.front.server import LoopbackServer
from gco.local.processes.listen import LOOPBACK
from gco.reconcile.proxy.routes import HEALTH_PATH, VERSION_HEADER

__all__ = ["GlobalFront"]

log = logging.getLogger(__name__)
TRIED_HEADER = "X-Gco-Tried"
# A Region that does not accept a connection in this time is passed over for the next one.
CONNECT_TIMEOUT_S = 2.0
# The longest a request's body may take to arrive once its key passed (answered 408 after it).
BODY_TIMEOUT_S = 10.0
RETRY_STATUSES = frozenset({404, 502, 503, 504})
ENDPOINT_PATH = re.compile(r"/inference/(?P<name>[a-z0-9-]+)(?P<rest>/[^?]*)?")
FORWARDED_HEADERS = ("content-type", "accept")
# Headers that must come once: with two, which one decides would be a guess.
SINGLE_HEADERS = ("authorization",)
METHODS = frozenset({"GET", "POST"})
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


@dataclass(frozen=True)
class Answer:
    """One whole answer of the global address's own (`headers`: any further response headers)."""

    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    ctype: str = "application/json"


def refused(status: int, message: str, kind: str, code: str, **headers: str) -> Answer:
    return Answer(status, error_body(message, kind, code), headers)


@dataclass(frozen=True)
class Request:
    """A request's line and headers, as sent (header names lower case)."""

    method: str
    target: str  # the path as sent, undecoded: what the escape checks and the proxy see
    query: str
    headers: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, scope: Scope) -> Request:
        headers = tuple((name.decode("latin-1"), value.decode("latin-1")) for name, value in scope["headers"])
        query = bytes(scope["query_string"]).decode("latin-1")
        return cls(scope["method"], bytes(scope["raw_path"]).decode("latin-1"), query, headers)

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key == name), None)

    def count(self, name: str) -> int:
        return sum(1 for key, _ in self.headers if key == name)


async def send_answer(send: Send, answer: Answer, close: bool = False) -> None:
    """Write one whole answer; `close`: end the connection after it (the body was left unread)."""
    headers = [(b"content-type", answer.ctype.encode()), (b"content-length", b"%d" % len(answer.body))]
    headers += [(name.lower().encode(), value.encode("latin-1")) for name, value in answer.headers.items()]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body})


async def read_body(receive: Receive, declared: int | None) -> bytes | Answer | None:
    """The whole body (a chunked one decoded), an answer refusing it (413 larger than
    `MAX_REQUEST_BYTES`, 408 not whole within `BODY_TIMEOUT_S`), or None when the caller left."""
    if declared is not None and declared > MAX_REQUEST_BYTES:
        return _too_large()
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                parts.append(message.get("body", b""))
                size += len(parts[-1])
                if size > MAX_REQUEST_BYTES:  # a chunked body declares no length
                    return _too_large()
                if not message.get("more_body", False):
                    return b"".join(parts)
    except TimeoutError:
        late = f"the request body did not arrive whole within {BODY_TIMEOUT_S:.0f} s"
        return refused(408, late, "invalid_request_error", "request_timeout")


def _too_large() -> Answer:
    message = f"the request body is larger than {MAX_REQUEST_BYTES} bytes"
    return refused(413, message, "invalid_request_error", "request_too_large")


async def until_gone(receive: Receive) -> None:
    """Return when the caller hung up (or its answer is complete: uvicorn then says the same)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def while_connected(receive: Receive, work: Awaitable[None]) -> None:
    """Run `work` until it ends or the caller hangs up: a relay for nobody is stopped, and its
    Region's request closed with it (uvicorn drops what is sent to a caller that left)."""
    job = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(until_gone(receive))
    await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
    for task in (job, gone):
        task.cancel()
    if job.done() and not job.cancelled():
        job.result()  # its failure is the request's


async def relay(send: Send, reply: httpx.Response, headers: Mapping[str, str]) -> None:
    """Answer with a Region's `reply` as it arrives: its status and content type, then its body in
    HTTP/1.1 chunks, each sent as soon as it is read. A Region that fails mid-body ends the answer
    without its last chunk (uvicorn closes the connection), so the caller sees a truncated answer,
    as from nginx."""
    start = [(b"content-type", reply.headers.get("content-type", "application/json").encode("latin-1"))]
    start += [(name.lower().encode(), value.encode("latin-1")) for name, value in headers.items()]
    await send({"type": "http.response.start", "status": reply.status_code, "headers": start})
    try:
        async for chunk in reply.aiter_bytes():
            if chunk:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
    except httpx.HTTPError as error:
        log.warning("an answer broke off mid-body: %s: %s", type(error).__name__, error)
        return
    await send({"type": "http.response.body", "body": b"", "more_body": False})


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
        port: the loopback port to serve on (0: any free one).
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
        # Used on the server's event loop only, and closed there (the lifespan's shutdown).
        self._client = httpx.AsyncClient(timeout=timeout, verify=verify)
        self._reads = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="global-read")
        self._server = LoopbackServer(self.app, "global-front", port)
        self.url = f"http://{LOOPBACK}:{self._server.port}"

    def regions_for(self, record: ServingRecord) -> list[str]:
        """The Regions to try, in order: `choose_regions`, the healthy ones first."""
        chosen = choose_regions(record, None, self.order, self.now(), self.stale_after_s)
        chosen = [region for region in chosen if region in self.proxies]
        if self.health is None:
            return chosen
        healthy = [region for region in chosen if self.health.healthy(region)]
        return healthy + [region for region in chosen if region not in healthy]

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI app: the lifespan opens nothing and closes the client; each request is `handle`d."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self.handle(Request.of(scope), receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def handle(self, request: Request, receive: Receive, send: Send) -> None:
        """One request: refused before its body is read where it can be; else read, then forwarded."""
        early = self._refusal(request)
        if early is not None:
            await send_answer(send, early, close=True)
            return
        match = ENDPOINT_PATH.fullmatch(request.target)
        if request.target == HEALTH_PATH or match is None:
            await self._answer_read(request, receive, send, self._own_path(request))
            return
        name = match["name"]
        # The record is read while the key is (two reads of about the same time); it is used only
        # once the key passed, so a refused caller learns nothing of the endpoint.
        reading = self._reads.submit(self.records.get, name, consistent_read=True)
        denied = await asyncio.to_thread(self._key_refusal, request, name)
        if denied is not None:
            reading.cancel()
            await send_answer(send, denied, close=True)
            return
        body = await read_body(receive, _declared_length(request))
        if not isinstance(body, bytes):
            if body is not None:
                await send_answer(send, body, close=True)
            return
        routed = await self._route(name, asyncio.wrap_future(reading))
        if isinstance(routed, Answer):
            await send_answer(send, routed)
            return
        path = f"{INGRESS_PREFIX}{name}{match['rest'] or ''}" + (f"?{request.query}" if request.query else "")
        await while_connected(receive, self._forward(send, request, routed, path, body))

    def _refusal(self, request: Request) -> Answer | None:
        """What is refused from the request line and headers alone: a method, a path that could be
        routed other than it reads, a header sent twice, a body declared too large."""
        if request.method not in METHODS:
            message = f"the global address takes GET and POST, not {request.method}"
            return refused(405, message, "invalid_request_error", "method_not_allowed", allow="GET, POST")
        reason = escape_reason(request.target)
        if reason is not None:
            return refused(400, f"the path {reason}", "invalid_request_error", "bad_path")
        for name in SINGLE_HEADERS:
            if (count := request.count(name)) > 1:
                message = f"the request has {count} {name.title()} headers; send one"
                return refused(400, message, "invalid_request_error", "duplicate_header")
        declared = _declared_length(request)
        if declared is not None and declared > MAX_REQUEST_BYTES:
            return _too_large()
        return None

    def _own_path(self, request: Request) -> Answer:
        """The answer of a path that is not an endpoint's: the health check's, or 404."""
        if request.target == HEALTH_PATH:
            return Answer(200, b"ok\n", ctype="text/plain")
        message = f"no such path: the global address serves {INGRESS_PREFIX}<endpoint>/..."
        return refused(404, message, "invalid_request_error", "not_found")

    async def _answer_read(self, request: Request, receive: Receive, send: Send, answer: Answer) -> None:
        """`answer`, once the body (which it does not need) was read, so the connection stays usable."""
        body = await read_body(receive, _declared_length(request))
        if body is None:
            return
        await send_answer(
            send, answer if isinstance(body, bytes) else body, close=not isinstance(body, bytes)
        )

    def _key_refusal(self, request: Request, endpoint: str) -> Answer | None:
        """The bearer key's check (in a worker thread: it reads the keys table): None when it passes,
        else the 401/403/503 to answer."""
        if self.gate is not None:
            return self._gate_refusal(request)
        challenge = {"www-authenticate": 'Bearer realm="gco"'}
        try:
            key_id, key = keys.parse_bearer(request.header("authorization"))
            record = self.key_store.get(key_id)
        except BearerFormatError as error:
            return refused(401, str(error), "authentication_error", "invalid_api_key", **challenge)
        except KeyStoreError as error:
            return refused(503, f"the keys table: {error}", "server_error", "unavailable")
        verdict = keys.verify(key, record, endpoint, self.now())
        if verdict.allowed:
            return None
        kind = "permission_error" if verdict.status == 403 else "authentication_error"
        code = verdict.refusal or "invalid_api_key"
        log.info("key %s refused for %s: %s", verdict.key_id or "?", endpoint, verdict.refusal)
        return refused(verdict.status, verdict.reason, kind, code, **challenge)

    def _gate_refusal(self, request: Request) -> Answer | None:
        """The deployed authorizer's decision; a refusal answered with the API's gateway response."""
        assert self.gate is not None
        headers = dict(request.headers)
        refusal = self.gate.check(request.method, request.target, headers, dict(parse_qsl(request.query)))
        return None if refusal is None else Answer(refusal.status, refusal.body)

    async def _route(self, name: str, reading: Awaitable[EndpointRecord | None]) -> list[str] | Answer:
        """The Regions to try for the endpoint, or the answer when there are none (404, 503)."""
        try:
            record = await reading
        except EndpointError as error:
            return refused(503, f"the endpoint table: {error}", "server_error", "unavailable")
        if record is None:
            return refused(404, f"no endpoint {name!r}", "invalid_request_error", "not_found")
        serving = serving_of(record)
        regions = self.regions_for(serving)
        if not regions:
            message = unavailable_message(serving, self.now(), self.stale_after_s)
            return refused(503, message, "server_error", "no_region")
        return regions

    async def _forward(
        self, send: Send, request: Request, regions: list[str], path: str, body: bytes
    ) -> None:
        """Send to each Region in turn until one answers other than a retried status; relay it."""
        headers = {name: value for name in FORWARDED_HEADERS if (value := request.header(name))}
        tried: list[str] = []
        last: Answer | None = None
        failures: list[str] = []
        for region in regions:
            started = time.monotonic()
            try:
                async with self._client.stream(
                    request.method, self.proxies[region] + path, content=body, headers=headers
                ) as reply:
                    if _elsewhere(reply) and region != regions[-1]:
                        await reply.aread()
                        ctype = reply.headers.get("content-type") or "application/json"
                        last = Answer(reply.status_code, reply.content, ctype=ctype)
                        failures.append(f"{region}: {reply.status_code}")
                        tried.append(region)
                        continue
                    await relay(send, reply, _relayed(region, tried, reply))
                    return
            except httpx.HTTPError as error:  # nothing was sent to the caller yet: try the next Region
                waited = time.monotonic() - started
                failures.append(f"{region}: {type(error).__name__} after {waited:.1f} s")
                tried.append(region)
        extra = {TRIED_HEADER: ",".join(tried)} if tried else {}
        if last is not None:
            await send_answer(send, Answer(last.status, last.body, extra, last.ctype))
            return
        message = "no Region answered (" + "; ".join(failures) + ")"
        await send_answer(send, refused(503, message, "server_error", "no_region", **extra))

    def stop(self) -> None:
        self._server.stop()
        self._reads.shutdown(wait=False, cancel_futures=True)


def _declared_length(request: Request) -> int | None:
    """The body's declared length (h11 let through only digits, one value), None for a chunked one."""
    value = request.header("content-length")
    return int(value) if value is not None else None


def _relayed(region: str, tried: list[str], reply: httpx.Response) -> dict[str, str]:
    """The headers a relayed answer gains: the Region that answered, those tried first, the version."""
    extra = {REGION_HEADER: region}
    if tried:
        extra[TRIED_HEADER] = ",".join(tried)
    if version := reply.headers.get(VERSION_HEADER):
        extra[VERSION_HEADER] = version
    return extra
