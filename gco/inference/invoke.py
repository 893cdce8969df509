"""One request to an endpoint through its Region's way in, as `gco inference invoke` sends it.

In AWS a Region is reached at its Regional stack's `InvokeUrl` (`gco.front_door`), an
IAM-authorized API: the request is signed with the caller's credentials (SigV4, service
`execute-api`). On the local stack `gco local env` sets `GCO_INVOKE_URLS` (JSON, Region -> base
URL of the Region's local proxy) and `GCO_INVOKE_CA_BUNDLE` (the local proxy's self-signed
certificate, which TLS verification then trusts), and requests go there unsigned over loopback. Either way the
endpoint answers at `<base>/<name>/<path>`.

The default request is a chat completion, the prompt as the user's turn (`gco.engines`:
`POST /v1/chat/completions`, which vLLM, SGLang and TGI's Messages API all serve): the server
frames it with the model's chat template, which an instruct model needs to answer at all (a bare
question as a plain completion prompt got 0 tokens from SmolLM2-135M-Instruct for most questions).
A plain completion is one `--path /v1/completions --body ...` away.

Streamed (`invoke --stream`, `stream_request` and `send_stream`): the framework's streamed request;
the answer is server-sent events (html.spec.whatwg.org/multipage/server-sent-events.html), whose
text, as the framework reads each event, is handed on as each event arrives, until OpenAI's
`data: [DONE]` or the stream's end. The way in streams too (the front
door's STREAM integration, the proxy without buffering), so the first token reaches the caller
while the engine is still generating. Every wait is `GENERATION_TIMEOUT_S` by default, the front
door's own limit.
"""

from __future__ import annotations

import html
import json
import os
import re
import ssl
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

import httpx
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from pydantic import BaseModel, ConfigDict

from gco import aws, engines
from gco.endpoints.paths import INGRESS_PREFIX, target_reason
from gco.endpoints.record import EndpointRecord
from gco.endpoints.spec import EndpointSpec
from gco.engines.base import chat_event_text
from gco.errors import GcoError, GcoInputError
from gco.front_door import GENERATION_TIMEOUT_S, MAX_REQUEST_BYTES
from gco.global_access.routing import REGION_HEADER
from gco.inputs import strict_json
from gco.reconcile.proxy.routes import VERSION_HEADER

INVOKE_URLS_ENV = "GCO_INVOKE_URLS"
INVOKE_CA_BUNDLE_ENV = "GCO_INVOKE_CA_BUNDLE"  # the local proxy's self-signed certificate
# The global address (`<url>/inference/<name>/...`, docs/global.md) and the bearer key sent to it.
GLOBAL_URL_ENV = "GCO_GLOBAL_URL"
API_KEY_ENV = "GCO_API_KEY"
GLOBAL = "global"  # the Region named in messages before the global address says which one answered
EXECUTE_API = "execute-api"
DEFAULT_MAX_TOKENS = 32
DEFAULT_PROMPT = "Say hello."
TIMEOUT_S = float(GENERATION_TIMEOUT_S)
DONE = "[DONE]"  # the OpenAI stream's last event


class NotServingError(GcoError):
    """The endpoint does not run in the Region asked (its observed state is named)."""


class InvokeFailedError(GcoError):
    """The request could not be sent, or no way in to the Region is known."""


class InvokeResult(BaseModel):
    """What one request got back."""

    model_config = ConfigDict(frozen=True)

    region: str
    url: str  # as sent (what the HTTP client put on the request line)
    status: int
    latency_ms: float
    body: Any
    first_event_ms: float | None = None  # streamed: when the first event arrived
    version: str | None = None  # which version answered (the proxy's `X-Gco-Version`): primary or canary


def default_request(spec: EndpointSpec, prompt: str | None) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of the default request for `prompt` (`Framework.default_request`)."""
    text = prompt if prompt is not None else DEFAULT_PROMPT
    return engines.get(spec.framework).default_request(spec.model_id or "", text, DEFAULT_MAX_TOKENS)


def stream_request(spec: EndpointSpec, prompt: str | None) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of the default request for `prompt`, streamed (`Framework.default_request`)."""
    text = prompt if prompt is not None else DEFAULT_PROMPT
    return engines.get(spec.framework).default_request(
        spec.model_id or "", text, DEFAULT_MAX_TOKENS, stream=True
    )


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The `data` of each server-sent event in `lines` (several `data:` lines joined by newlines; one
    space after the colon dropped; comments and other fields skipped), as each event ends."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
            data = []
        elif line.startswith("data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(" ") else value)
    if data:
        yield "\n".join(data)


def event_text(data: str, framework: str = engines.DEFAULT) -> str | None:
    """The text one event of `framework`'s stream adds (None: the stream is done).

    Raises:
        InvokeFailedError: the event is not JSON, or is the engine's error event.
    """
    if data == DONE:
        return None
    try:
        event = json.loads(data)
    except json.JSONDecodeError:
        raise InvokeFailedError(f"a streamed event is not JSON: {data[:200]!r}") from None
    if not isinstance(event, dict):
        raise InvokeFailedError(f"a streamed event is not a JSON object: {data[:200]!r}")
    if "error" in event:
        raise InvokeFailedError(f"the engine ended the stream with an error: {event['error']}")
    if "choices" in event:  # an OpenAI chunk (the default chat request), from any framework
        return chat_event_text(event)
    return engines.get(framework).event_text(event)


def parse_body(text: str) -> dict[str, Any]:
    """`--body` as a JSON object, read as strictly as a spec file (`gco.inputs.strict_json`).

    Raises:
        GcoInputError: not JSON, a duplicate key, NaN, a huge integer, too deep, or not an object
            (field `--body`).
    """
    body = strict_json.loads(text, "--body", "the body")
    if not isinstance(body, dict):
        raise GcoInputError("--body", "must be a JSON object")
    return body


def check_size(body: Mapping[str, Any], field: str) -> None:
    """Refuse a request body larger than every way in takes (`MAX_REQUEST_BYTES`, answered 413 there).

    Raises:
        GcoInputError: on `field` (`--body` or `--prompt`), naming the size and the limit.
    """
    size = len(json.dumps(body).encode())
    if size > MAX_REQUEST_BYTES:
        raise GcoInputError(
            field, f"the request body would be {size} bytes; the proxy takes at most {MAX_REQUEST_BYTES}"
        )


def check_path(path: str, name: str) -> str:
    """`--path`: a path under endpoint `name` that the proxy takes as written: the proxy's own rule
    (`gco.endpoints.paths.target_reason`) applied to the target it will see, `/inference/<name><path>`.

    Raises:
        GcoInputError: it does not start with `/`, or the proxy would refuse it.
    """
    shown = repr(path) if len(path) <= 80 else f"{path[:60]!r}... ({len(path)} characters)"
    if not path.startswith("/"):
        raise GcoInputError("--path", f"{shown} must start with /")
    reason = target_reason(f"{INGRESS_PREFIX}{name}{path}")
    if reason is not None:
        raise GcoInputError("--path", f"{shown} {reason}: the proxy refuses it (it could leave the endpoint)")
    return path


def serving_region(record: EndpointRecord, region: str | None, stale: Collection[str] = ()) -> str:
    """The Region to invoke: `region` if it runs the endpoint, else the first target that does, a
    Region whose observation is fresh before one in `stale` (its reconciler no longer confirms it).

    Raises:
        GcoInputError: `region` is not one of the endpoint's target Regions (field `--region`).
        NotServingError: naming the Region and its state (or that no target Region runs it).
    """
    fresh_first = sorted(record.target_regions, key=lambda target: target in stale)
    candidates = [region] if region else fresh_first
    for candidate in candidates:
        status = record.region_status.get(candidate)
        if candidate not in record.target_regions:
            targets = ", ".join(record.target_regions)
            raise GcoInputError(
                "--region",
                f"endpoint {record.endpoint_name!r} does not target {candidate} (its Regions: {targets})",
            )
        running = (
            record.desired_state != "deleted"
            and status is not None
            and status.state == "running"
            and status.lifecycle_id == record.lifecycle_id
            and status.replicas_ready > 0
        )
        if running:
            return candidate
        if region:
            state = status.state if status is not None else "pending"
            raise NotServingError(
                f"endpoint {record.endpoint_name!r} is not running in {candidate}: its state is {state}"
            )
    raise NotServingError(f"endpoint {record.endpoint_name!r} is not running in any target Region")


def local_bases(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The local stack's Region -> base URL (`GCO_INVOKE_URLS`), or {} outside it.

    Raises:
        GcoInputError: `GCO_INVOKE_URLS` is not a JSON object of Region -> URL.
    """
    raw = (environ if environ is not None else os.environ).get(INVOKE_URLS_ENV)
    if not raw:
        return {}
    try:
        bases = json.loads(raw)
    except json.JSONDecodeError:
        raise GcoInputError(INVOKE_URLS_ENV, "is not a JSON object of Region -> URL") from None
    if not isinstance(bases, dict) or not all(isinstance(v, str) for v in bases.values()):
        raise GcoInputError(INVOKE_URLS_ENV, "is not a JSON object of Region -> URL")
    for region, base in bases.items():
        if not base.startswith(("http://", "https://")):
            raise GcoInputError(
                INVOKE_URLS_ENV, f"{region[:40]!r}: {redacted(base)[:200]!r} is not an http(s) URL"
            )
    return bases


# `scheme://user:password@host`: what is between `//` and `@` is a secret in a message.
USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]*@")


def redacted(text: str) -> str:
    """`text` with the user and password of every URL in it replaced by `***`."""
    return USERINFO.sub(r"\g<scheme>***@", text)


def tls_verification(environ: Mapping[str, str] | None = None) -> ssl.SSLContext | bool:
    """What TLS verification trusts: the system's CAs, or the certificate `GCO_INVOKE_CA_BUNDLE` names.

    Raises:
        GcoInputError: the bundle is missing, unreadable or holds no certificate.
    """
    bundle = (environ if environ is not None else os.environ).get(INVOKE_CA_BUNDLE_ENV)
    if not bundle:
        return True
    try:
        return ssl.create_default_context(cafile=bundle)
    except (OSError, ssl.SSLError, ValueError) as error:  # FileNotFoundError, "no certificate", a NUL
        reason = getattr(error, "strerror", None) or getattr(error, "reason", None) or str(error)
        raise GcoInputError(
            INVOKE_CA_BUNDLE_ENV, f"{bundle[:200]!r} is not a readable certificate: {reason}"
        ) from None


def global_base(environ: Mapping[str, str] | None = None) -> str | None:
    """The global address (`GCO_GLOBAL_URL`), or None where none is configured.

    Raises:
        GcoInputError: it is not an http(s) URL.
    """
    base = (environ if environ is not None else os.environ).get(GLOBAL_URL_ENV)
    if not base:
        return None
    if not base.startswith(("http://", "https://")):
        raise GcoInputError(GLOBAL_URL_ENV, f"{redacted(base)[:200]!r} is not an http(s) URL")
    return base.rstrip("/")


def global_address(environ: Mapping[str, str] | None = None) -> tuple[str, dict[str, str]] | None:
    """(base URL, headers) of the global address where `GCO_GLOBAL_URL` and `GCO_API_KEY` are both
    set: the key goes as `Authorization: Bearer`; None where either is missing.

    Raises:
        GcoInputError: `GCO_GLOBAL_URL` is not an http(s) URL.
    """
    environ = environ if environ is not None else os.environ
    base = global_base(environ)
    key = environ.get(API_KEY_ENV, "").strip()
    if base is None or not key:
        return None
    return base, {"authorization": f"Bearer {key}"}


def sigv4_headers(method: str, url: str, body: bytes, region: str) -> dict[str, str]:
    """Headers of `url` signed for API Gateway (`execute-api`) with the caller's credentials.

    Raises:
        InvokeFailedError: no AWS credentials are configured.
    """
    credentials = aws.session().get_credentials()
    if credentials is None:
        raise InvokeFailedError("no AWS credentials to sign the request with (IAM-authorized API)")
    request = AWSRequest(method=method, url=url, data=body, headers={"content-type": "application/json"})
    SigV4Auth(credentials.get_frozen_credentials(), EXECUTE_API, region).add_auth(request)
    return dict(request.headers.items())


def send(
    region: str,
    url: str,
    body: dict[str, Any],
    *,
    signed: bool,
    timeout: float = TIMEOUT_S,
    clock: Callable[[], float] = time.perf_counter,
    headers: Mapping[str, str] | None = None,
) -> InvokeResult:
    """POST `body` to `url` (signed for `region` when `signed`; `headers` added) and time the answer;
    the result names the Region the answer's `X-Gco-Region` names (the global address), else `region`.

    Raises:
        GcoInputError: `url` is not a URL, or the CA bundle cannot be read (`tls_verification`).
        InvokeFailedError: the request could not be sent or got no answer.
    """
    data = json.dumps(body).encode()
    extra = dict(headers or {})
    headers = sigv4_headers("POST", url, data, region) if signed else {"content-type": "application/json"}
    headers.update(extra)
    verify = tls_verification()
    started = clock()
    try:
        answer = httpx.post(url, content=data, headers=headers, timeout=timeout, verify=verify)
    except httpx.InvalidURL as error:
        raise GcoInputError("URL", f"{redacted(url)} is not a URL: {redacted(str(error))}") from None
    except httpx.HTTPError as error:
        raise InvokeFailedError(f"{region}: {redacted(url)}: {redacted(str(error))}") from error
    latency = (clock() - started) * 1000
    return InvokeResult(
        region=answer.headers.get(REGION_HEADER, region),
        url=redacted(str(answer.request.url)),
        status=answer.status_code,
        latency_ms=latency,
        body=_parsed(answer),
        version=answer.headers.get(VERSION_HEADER),
    )


def send_stream(
    region: str,
    url: str,
    body: dict[str, Any],
    *,
    signed: bool,
    on_text: Callable[[str], None],
    framework: str = engines.DEFAULT,
    timeout: float = TIMEOUT_S,
    clock: Callable[[], float] = time.perf_counter,
    headers: Mapping[str, str] | None = None,
) -> InvokeResult:
    """POST `body` to `url` and hand each streamed event's text (as `framework` reads its events) to
    `on_text` as it arrives; the Region is named as by `send`. `headers` are sent besides the
    request's own (unsigned: SigV4 signs the headers it lists, and a receiver checks only those),
    e.g. the proxy's version pin or the global address's key.

    The result's body is `{"text", "events"}` for a 2xx answer (the engine's answer otherwise, not
    streamed); `first_event_ms` says when the first event came.

    Raises:
        GcoInputError: `url` is not a URL, or the CA bundle cannot be read (`tls_verification`).
        InvokeFailedError: the request could not be sent, the stream broke, or the engine sent an
            error event.
    """
    data = json.dumps(body).encode()
    sent = sigv4_headers("POST", url, data, region) if signed else {"content-type": "application/json"}
    sent = {**sent, **(headers or {}), "accept": "text/event-stream"}
    started = clock()
    first: float | None = None
    pieces: list[str] = []
    try:
        with httpx.stream(
            "POST", url, content=data, headers=sent, timeout=timeout, verify=tls_verification()
        ) as answer:
            version = answer.headers.get(VERSION_HEADER)
            region = answer.headers.get(REGION_HEADER, region)
            if not 200 <= answer.status_code < 300:
                answer.read()
                latency = (clock() - started) * 1000
                return InvokeResult(
                    region=region,
                    url=redacted(url),
                    status=answer.status_code,
                    latency_ms=latency,
                    body=_parsed(answer),
                    version=version,
                )
            for event in sse_data(answer.iter_lines()):
                first = first if first is not None else (clock() - started) * 1000
                piece = event_text(event, framework)
                if piece is None:
                    break
                pieces.append(piece)
                on_text(piece)
            status = answer.status_code
    except httpx.InvalidURL as error:
        raise GcoInputError("URL", f"{redacted(url)} is not a URL: {redacted(str(error))}") from None
    except httpx.HTTPError as error:
        raise InvokeFailedError(f"{region}: {redacted(url)}: {redacted(str(error))}") from error
    latency = (clock() - started) * 1000
    text = {"text": "".join(pieces), "events": len(pieces)}
    return InvokeResult(
        region=region,
        url=redacted(url),
        status=status,
        latency_ms=latency,
        body=text,
        first_event_ms=first,
        version=version,
    )


HTML_START = re.compile(r"\s*(<!--.*?-->\s*)*<(!doctype\s+html|html)[\s>]", re.IGNORECASE | re.DOTALL)
HTML_TITLE = re.compile(r"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


def shown_body(body: Any) -> str:
    """The answer's body as one prints it: JSON as JSON, text as it is, and an HTML page (the error
    page of a web server that is not the endpoint's proxy) as one line with its title and size,
    not its whole markup."""
    if not isinstance(body, str):
        return json.dumps(body)
    if not HTML_START.match(body[:4096]):
        return body
    found = HTML_TITLE.search(body[:65536])
    title = " ".join(html.unescape(found.group(1)).split())[:120] if found else ""
    named = f": {title!r}" if title else " (no title)"
    return f"an HTML page{named}, {len(body)} characters: not an answer of gco's proxy (is the URL right?)"


def _parsed(answer: httpx.Response) -> Any:
    try:
        return answer.json()
    except ValueError:
        return answer.text
