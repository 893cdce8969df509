"""boto3 clients configured the one way gco uses them: adaptive retries, timeouts, local endpoints.

`AWS_ENDPOINT_URL` (read by botocore) or an explicit endpoint URL points every client at a local
server; for a loopback endpoint with no credentials configured, fixed local credentials are used.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config

from gco.env import FALLBACK_REGION_ENV, HOME_REGION_ENV

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


def home_region() -> str:
    """The table's home Region: DYNAMODB_REGION, else REGION, else us-east-1."""
    return os.environ.get(HOME_REGION_ENV) or os.environ.get(FALLBACK_REGION_ENV) or DEFAULT_REGION


def endpoint_url_from_env(explicit: str | None = None) -> str | None:
    return explicit or os.environ.get("AWS_ENDPOINT_URL") or None


def is_loopback(url: str | None) -> bool:
    if not url:
        return False
    host = urlparse(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def client(service: str, *, region: str | None = None, endpoint_url: str | None = None) -> Any:
    """A boto3 client for `service` with gco's retry and timeout configuration."""
    url = endpoint_url_from_env(endpoint_url)
    session = boto3.session.Session()
    extra: dict[str, str] = {}
    if is_loopback(url) and session.get_credentials() is None:
        extra = dict(LOCAL_CREDENTIALS)
    return session.client(
        service,  # type: ignore[call-overload]
        region_name=region or home_region(),
        endpoint_url=url,
        config=CLIENT_CONFIG,
        **extra,
    )
