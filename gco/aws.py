"""AWS SDK clients configured the one way gco uses them: adaptive retries, timeouts, local endpoints,
and one service-model loader per process (see `session`).

`AWS_ENDPOINT_URL` (read by botocore) or an explicit endpoint URL points every client at a local
server; for a loopback endpoint with no credentials configured, fixed local credentials are used.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

import botocore.loaders
import botocore.session
from botocore.awsrequest import AWSPreparedRequest
from botocore.config import Config
from botocore.exceptions import BotoCoreError

from gco.env import ENDPOINT_URL_ENV, FALLBACK_REGION_ENV, HOME_REGION_ENV
from gco.errors import GcoInputError
from gco.regions import REGION_MAX, REGION_SYNTAX

DEFAULT_REGION = "us-east-1"
LOCAL_CREDENTIALS = {"aws_access_key_id": "gco-local", "aws_secret_access_key": "gco-local"}
MAX_POOL_CONNECTIONS = 32  # connections one client keeps: the most calls it makes at once
CLIENT_CONFIG = Config(
    retries={"mode": "adaptive", "max_attempts": 8},
    connect_timeout=5,
    read_timeout=30,
    tcp_keepalive=True,
    max_pool_connections=MAX_POOL_CONNECTIONS,
)


class _RequestTimeSpentError(BotoCoreError):
    """A bounded call's time ran out before another attempt could be sent (botocore's own kind of
    error, so every adapter converts it where it converts botocore's timeouts; not retryable: it is
    neither a connection nor an HTTP client error, the kinds botocore's retry modes retry)."""

    fmt = (
        "Read timeout on endpoint URL: {endpoint_url}: no answer within --request-timeout "
        "{timeout:g} s (attempts sent: {attempts})"
    )


class _ClientSettings:
    """The configuration this process's clients get: `CLIENT_CONFIG`, unless the CLI bounded it
    (then `timeout` is each call's whole time, every attempt and back-off included)."""

    config: Config = CLIENT_CONFIG
    timeout: float | None = None
    clock: Callable[[], float] = time.monotonic


_SETTINGS = _ClientSettings()
REQUEST_ATTEMPTS = 2  # a bounded request is tried at most this often, within its one time bound
_DEADLINE = "gco_deadline"  # where a call's deadline rides in botocore's request context


def reset_request_bounds() -> None:
    """Back to `CLIENT_CONFIG` for the clients made from now on: the CLI calls it after each command,
    so a program (or a test) running several commands in one process does not carry one command's
    `--request-timeout` into the next."""
    _SETTINGS.config = CLIENT_CONFIG
    _SETTINGS.timeout = None
    _SETTINGS.clock = time.monotonic


def bound_requests(timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
    """Bound each call of this process's clients made from now on to `timeout` seconds in all:
    every attempt (`REQUEST_ATTEMPTS` at most) and the back-off between them. For a command that a
    person waits on (`--request-timeout`): without it a server that accepts and never answers
    holds the command for `max_attempts` x `read_timeout` (minutes), silently; with a fixed read
    timeout per attempt, for twice `timeout`.

    How: each call's deadline is set when botocore starts the call (`before-call`, once per call);
    before each attempt is sent (`before-send`) the time left becomes that attempt's read timeout
    (botocore's per-request `read_timeout` in the request context), and an attempt due after the
    deadline is not sent: the call fails with a read timeout naming the URL; an attempt that fails
    with no time left ends the call without botocore's back-off (`needs-retry`). Connecting takes
    at most min(5, `timeout`) s of its own. (A botocore older than 1.43.72, which added the
    per-request read timeout, reads each attempt for `timeout`: the first then spends the bound and
    no second is sent, so the bound holds there too.)

    Parameters:
        timeout: seconds one call may take in all.
        clock: the monotonic clock the deadlines are read on (injected by tests).
    """
    _SETTINGS.timeout = timeout
    _SETTINGS.clock = clock
    _SETTINGS.config = CLIENT_CONFIG.merge(
        Config(
            connect_timeout=min(5.0, timeout),
            read_timeout=timeout,
            retries={"mode": "adaptive", "total_max_attempts": REQUEST_ATTEMPTS},
        )
    )


def _start_call(context: dict[str, Any], **_: Any) -> None:
    """`before-call`: the call's deadline, once, before its first attempt."""
    if _SETTINGS.timeout is not None:
        context[_DEADLINE] = (_SETTINGS.clock() + _SETTINGS.timeout, _SETTINGS.timeout)


def _send_attempt(request: AWSPreparedRequest, **_: Any) -> None:
    """`before-send`: the attempt reads for the time its call has left, or is not sent at all."""
    # The request context (botocore >= 1.40; its type stubs predate it): the call's, shared by attempts.
    context: dict[str, Any] = getattr(request, "context", None) or {}
    bound = context.get(_DEADLINE)
    if bound is None:
        return
    deadline, timeout = bound
    left = deadline - _SETTINGS.clock()
    if left <= 0:
        sent = context.get("retries", {}).get("attempt", 1) - 1
        raise _RequestTimeSpentError(endpoint_url=request.url, timeout=timeout, attempts=sent)
    context["read_timeout"] = left


def _before_retry(request_dict: dict[str, Any], caught_exception: Exception | None = None, **_: Any) -> None:
    """`needs-retry`, ahead of botocore's own handler: an attempt that failed with no time left ends
    the call now, with its own error, rather than after botocore's back-off."""
    bound = request_dict.get("context", {}).get(_DEADLINE)
    if bound is not None and caught_exception is not None and bound[0] - _SETTINGS.clock() <= 0:
        raise caught_exception


# botocore parses a service's JSON model (DynamoDB's is hundreds of kB) and its endpoint rules once
# per session's loader; a fresh session per client parsed them again each time, about 150 ms of CPU
# a client here. One loader serves every session of the process, so each model is parsed once.
# Sessions stay one per client: boto3's docs call a session unsafe to share across threads, and a
# new one reads the credentials and region the environment holds now.
_LOADER = botocore.loaders.create_loader()


def session() -> botocore.session.Session:
    """A new botocore session that shares the process's service-model loader."""
    fresh = botocore.session.Session()
    fresh.register_component("data_loader", _LOADER)
    return fresh


def home_region() -> str:
    """The table's home Region: DYNAMODB_REGION, else REGION, else us-east-1.

    Raises:
        GcoInputError: the variable it came from does not hold a Region name (botocore would
            raise a bare ValueError building the endpoint of `us east`).
    """
    for variable in (HOME_REGION_ENV, FALLBACK_REGION_ENV):
        value = os.environ.get(variable)
        if value:
            if len(value) > REGION_MAX or not REGION_SYNTAX.fullmatch(value):
                raise GcoInputError(
                    variable, f"{value[:40]!r} is not an AWS Region name (for example us-east-1)"
                )
            return value
    return DEFAULT_REGION


def endpoint_url_from_env(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get(ENDPOINT_URL_ENV) or None


def is_loopback(url: str | None) -> bool:
    if not url:
        return False
    host = urlparse(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def service_endpoint_variable(current: botocore.session.Session, service: str) -> str:
    """`AWS_ENDPOINT_URL_<SERVICE>`: the service's id, upper case, spaces as underscores (the AWS SDKs
    and Tools Reference Guide, "Identifiers for service-specific endpoints")."""
    service_id = str(current.get_service_data(service)["metadata"]["serviceId"])
    return f"{ENDPOINT_URL_ENV}_{service_id.upper().replace(' ', '_')}"


def client(service: str, *, region: str | None = None, endpoint_url: str | None = None) -> Any:
    """A client for `service` with gco's retry and timeout configuration (what boto3's would be).

    Made by botocore directly: boto3's session adds only resources and S3's transfer methods, which
    gco does not use, and would add its data path to the shared loader once per client.

    Raises:
        GcoInputError: no `region` is given and the home Region's variable is not a Region name.
    """
    url = endpoint_url_from_env(endpoint_url)
    current = session()
    if endpoint_url is not None and endpoint_url == os.environ.get(ENDPOINT_URL_ENV):
        # The URL came from the general variable (the CLI's `--endpoint-url` reads it): a service's own
        # variable wins over it, as the SDKs order them ("Service-specific endpoints").
        own = os.environ.get(service_endpoint_variable(current, service))
        endpoint_url, url = (None, own) if own else (endpoint_url, url)
    local = is_loopback(url) and current.get_credentials() is None
    made = current.create_client(
        service,
        region_name=region or home_region(),
        # Only an explicit URL is passed: botocore itself reads `AWS_ENDPOINT_URL_<SERVICE>` and then
        # `AWS_ENDPOINT_URL` ("Service-specific endpoints", AWS SDKs and Tools Reference Guide), so a
        # service-specific variable (the local stack's EKS stand-in) wins over the general one.
        endpoint_url=endpoint_url,
        config=_SETTINGS.config,
        aws_access_key_id=LOCAL_CREDENTIALS["aws_access_key_id"] if local else None,
        aws_secret_access_key=LOCAL_CREDENTIALS["aws_secret_access_key"] if local else None,
    )
    if _SETTINGS.timeout is not None:  # a bounded command: each call's attempts share one deadline
        made.meta.events.register("before-call", _start_call)
        made.meta.events.register("before-send", _send_attempt)
        made.meta.events.register_first("needs-retry", _before_retry)
    return made
