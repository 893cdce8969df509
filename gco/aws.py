"""AWS SDK clients configured the one way gco uses them: adaptive retries, timeouts, local endpoints,
and one service-model loader per process (see `session`).

`AWS_ENDPOINT_URL` (read by botocore) or an explicit endpoint URL points every client at a local
server; for a loopback endpoint with no credentials configured, fixed local credentials are used.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

import botocore.loaders
import botocore.session
from botocore.config import Config

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


class _ClientSettings:
    """The configuration this process's clients get: `CLIENT_CONFIG`, unless the CLI bounded it."""

    config: Config = CLIENT_CONFIG


_SETTINGS = _ClientSettings()
REQUEST_ATTEMPTS = 2  # a bounded request is tried at most this often (once more after a timeout)


def reset_request_bounds() -> None:
    """Back to `CLIENT_CONFIG` for the clients made from now on: the CLI calls it after each command,
    so a program (or a test) running several commands in one process does not carry one command's
    `--request-timeout` into the next."""
    _SETTINGS.config = CLIENT_CONFIG


def bound_requests(timeout: float) -> None:
    """Bound each request of this process's clients made from now on: connect within
    min(5, timeout) s, read within `timeout` s, `REQUEST_ATTEMPTS` attempts in all. For a command
    that a person waits on (`--request-timeout`): without it a server that accepts and never
    answers holds the command for `max_attempts` x `read_timeout` (minutes), silently."""
    _SETTINGS.config = CLIENT_CONFIG.merge(
        Config(
            connect_timeout=min(5.0, timeout),
            read_timeout=timeout,
            retries={"mode": "adaptive", "total_max_attempts": REQUEST_ATTEMPTS},
        )
    )


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


def client(service: str, *, region: str | None = None, endpoint_url: str | None = None) -> Any:
    """A client for `service` with gco's retry and timeout configuration (what boto3's would be).

    Made by botocore directly: boto3's session adds only resources and S3's transfer methods, which
    gco does not use, and would add its data path to the shared loader once per client.
    """
    url = endpoint_url_from_env(endpoint_url)
    current = session()
    local = is_loopback(url) and current.get_credentials() is None
    return current.create_client(
        service,
        region_name=region or home_region(),
        endpoint_url=url,
        config=_SETTINGS.config,
        aws_access_key_id=LOCAL_CREDENTIALS["aws_access_key_id"] if local else None,
        aws_secret_access_key=LOCAL_CREDENTIALS["aws_secret_access_key"] if local else None,
    )
