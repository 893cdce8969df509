"""The local global address as a part of `gco local up`: `python -m gco.local.front.process`.

Runs `GlobalFront` with a `HealthChecker` of every Region's proxy until SIGTERM, reading the
endpoint table and the keys table on the moto server, and reports `front.json` (its pid and URL)
to the stack's state directory once it serves. With `--assembly`, every request is decided by the home
Region's global API authorizer, run from its asset under its role (its log in `front-functions/`),
and refused with the API's synthesized gateway responses (gco.local.assembly.apigateway).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import ssl
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import httpx

from gco import aws
from gco.endpoints import EndpointStore
from gco.global_access import keys
from gco.global_access.errors import BearerFormatError
from gco.global_access.key_store import DynamoKeyStore
from gco.local.assembly.apigateway import (
    GlobalApiGate,
)
from gco.local.assembly.deployed import RUNTIME_SDK_DIR, DeployedFunction, app_from_environment, client_as
from gco.local.assembly.global_api import global_api
from gco.local.front.front import GlobalFront
from gco.local.front.health import CHECK_TIMEOUT_S, HealthChecker
from gco.local.processes import statefiles
from gco.local.processes.statefiles import FrontReport
from gco.reconcile.proxy.routes import HEALTH_PATH

REPORT_NAME = "front.json"
# The key `gco local env --with-key` made for the stack, kept (mode 0600) beside its other state, which
# holds the operator's local access key already: each later call exports it again instead of making one
# more all-endpoint key.
ENV_KEY_NAME = "env-key"


def report_path(state_dir: Path) -> Path:
    return state_dir / REPORT_NAME


def _key_store(
    endpoint_url: str, home_region: str, keys_table: str, credentials: Mapping[str, str] | None
) -> DynamoKeyStore:
    """The stack's keys table, signing with `credentials` (the operator's, where the stack's moto
    server enforces IAM; else the environment's)."""
    if credentials:
        return DynamoKeyStore(client_as("dynamodb", home_region, endpoint_url, credentials), keys_table)
    return DynamoKeyStore.connect(endpoint_url=endpoint_url, table_name=keys_table, region=home_region)


def make_key(
    endpoint_url: str,
    home_region: str,
    keys_table: str,
    name: str = "local-env",
    credentials: Mapping[str, str] | None = None,
) -> str:
    """A new key for every endpoint, stored (hashed) in the stack's keys table; returns the key.

    Raises:
        KeyStoreError: the keys table cannot be written.
    """
    store = _key_store(endpoint_url, home_region, keys_table, credentials)
    return store.create(name, [keys.ALL_ENDPOINTS], now=datetime.now(UTC), created_by="gco local env")[0]


def env_key(
    state_dir: Path,
    endpoint_url: str,
    home_region: str,
    keys_table: str,
    credentials: Mapping[str, str] | None = None,
) -> tuple[str, bool]:
    """The stack's `gco local env --with-key` key and whether it was made now: the one kept in
    `state_dir` while the keys table still accepts it for every endpoint, else a new one (`make_key`),
    kept in its place.

    Raises:
        KeyStoreError: the keys table cannot be read or written.
    """
    kept = state_dir / ENV_KEY_NAME
    try:
        key = kept.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        key = ""
    if key:
        store = _key_store(endpoint_url, home_region, keys_table, credentials)
        try:
            key_id, _ = keys.parse_bearer(f"Bearer {key}")
        except BearerFormatError:
            key_id = ""
        record = store.get(key_id) if key_id else None
        # an all-endpoint key passes for any endpoint name; a revoked or unknown one for none
        everywhere = record is not None and keys.ALL_ENDPOINTS in record.endpoints
        if everywhere and keys.verify(key, record, "any", datetime.now(UTC)).allowed:
            return key, False
    key = make_key(endpoint_url, home_region, keys_table, credentials=credentials)
    descriptor = os.open(kept, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as out:
        out.write(key + "\n")
    return key, True


def http_probe(verify: ssl.SSLContext | bool) -> Callable[[str], bool]:
    """A health check: whether a GET of the URL answers 2xx or 3xx within `CHECK_TIMEOUT_S`."""

    def probe(url: str) -> bool:
        try:
            return httpx.get(url, timeout=CHECK_TIMEOUT_S, verify=verify).status_code < 400
        except httpx.HTTPError:
            return False

    return probe


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gco.local.front.process", description=__doc__)
    parser.add_argument("--endpoint-url", required=True)
    parser.add_argument("--home-region", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--keys-table", required=True)
    parser.add_argument(
        "--proxies", required=True, help="JSON: Region -> its proxy's base URL, nearest first."
    )
    parser.add_argument("--ca-bundle", help="The proxies' certificate.")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--assembly",
        type=Path,
        help="The synthesized app: the home Region's global API authorizer decides each request.",
    )
    return parser.parse_args(argv)


def deployed_gate(options: argparse.Namespace) -> tuple[GlobalApiGate, DeployedFunction]:
    """The home Region's global API as synthesized (`global_api`), from the app `up` hands over.

    Raises:
        AssemblyError: the assembly cannot be read, or its home Region's global API cannot be run.
    """
    packages = options.state_dir / RUNTIME_SDK_DIR
    logs = options.state_dir / "front-functions"
    app = app_from_environment(options.assembly, options.endpoint_url, logs, packages, os.environ)
    return global_api(app, options.home_region)


def serve(options: argparse.Namespace, stop: threading.Event) -> None:
    """Serve the global address as `options` say until `stop` is set; report `front.json` once it serves.

    Raises:
        AssemblyError: `--assembly` names an app whose home Region's global API cannot be run.
    """
    proxies: dict[str, str] = json.loads(options.proxies)
    verify: ssl.SSLContext | bool = (
        ssl.create_default_context(cafile=options.ca_bundle) if options.ca_bundle else True
    )
    dynamodb = aws.client("dynamodb", region=options.home_region, endpoint_url=options.endpoint_url)
    gate, authorizer = deployed_gate(options) if options.assembly is not None else (None, None)
    health = HealthChecker({r: url + HEALTH_PATH for r, url in proxies.items()}, http_probe(verify)).start()
    front = GlobalFront(
        EndpointStore(dynamodb, options.table),
        DynamoKeyStore(dynamodb, options.keys_table),
        proxies,
        health=health,
        verify=verify,
        port=options.port,
        gate=gate,
    )
    statefiles.write(report_path(options.state_dir), FrontReport(pid=os.getpid(), url=front.url))
    try:
        while not stop.wait(0.5):
            pass
    finally:
        front.stop()
        health.stop()
        if authorizer is not None:
            authorizer.close()


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - the process's signals and logging
    """The process: `serve` until SIGTERM or SIGINT.

    Raises:
        AssemblyError: as `serve`.
    """
    options = parse(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    serve(options, stop)
    return 0


if __name__ == "__main__":  # pragma: no cover - the stack's background process
    sys.exit(main())
