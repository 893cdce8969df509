"""The synthesized app for tests/functional: `deployed` (a moto server as `gco local up` prepares it,
and the app), and `moto` and `store` overriding the root ones for every test that runs it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gco.endpoints import EndpointStore, init_table
from gco.env import DEFAULT_TABLE
from gco.global_access.key_store import create_keys_table
from gco.local.assembly import CloudAssembly
from gco.local.assembly.deployed import DeployedApp, client_as, function_python, make_identities
from gco.local.assembly.invoke import FunctionRuntime
from gco.local.assembly.runtime_sdk import runtime_sdk
from gco.local.assembly.synth import local_assembly
from gco.local.moto.motoserver import MotoServer
from tests.conftest import TABLE
from tests.unit.reconcile.records import EAST, WEST

EVIDENCE_BUCKET = "gco-local-evidence"


@dataclass(frozen=True)
class Deployed:
    """A moto server as `gco local up` prepares it for the synthesized app (the operator and the Lambda
    service's stand-in made, the endpoint table, the keys table and the evidence bucket, then IAM
    enforced), the app itself (as `up` synthesizes it: gco.local.assembly.synth) and the store,
    signing as the operator."""

    server: MotoServer
    credentials: dict[str, str]
    app: DeployedApp
    store: EndpointStore


@pytest.fixture(scope="session")
def runtime_packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stand-in for the runtime's own packages (`runtime_sdk`: a copy of the AWS SDK), made once
    per test process: read-only to the functions, so every test's app shares it."""
    return runtime_sdk(tmp_path_factory.mktemp("runtime-sdk"))


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, runtime_packages: Path) -> Iterator[Deployed]:
    """`Deployed`, the operator's key in this process's environment (its clients sign with it)."""
    with MotoServer() as server:
        iam = client_as("iam", EAST, server.url, {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})
        credentials, service = make_identities(iam)
        for name, value in credentials.items():
            monkeypatch.setenv(name, value)
        init_table(client_as("dynamodb", EAST, server.url, credentials), DEFAULT_TABLE)
        create_keys_table(client_as("dynamodb", EAST, server.url, credentials))
        client_as("s3", EAST, server.url, credentials).create_bucket(Bucket=EVIDENCE_BUCKET)
        server.enforce_iam()
        # on the runtime's Python where this machine has it, else on this one with bundles built for it
        assembly = CloudAssembly.open(local_assembly([EAST, WEST], EAST))
        python = function_python(assembly)
        assert python is not None
        app = DeployedApp(
            assembly,
            FunctionRuntime(python, runtime_packages),
            server.url,
            tmp_path / "functions",
            credentials=credentials,
            lambda_service=service,
        )
        store = EndpointStore(client_as("dynamodb", EAST, server.url, credentials), DEFAULT_TABLE)
        yield Deployed(server, credentials, app, store)


@pytest.fixture
def moto(moto: MotoServer, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    """The root fixture's clean moto server, except for a test that runs the synthesized app (it uses
    `deployed`, itself or through `clusters`, `manual` or a fixture of its own): then `deployed`'s
    server, AWS_ENDPOINT_URL pointing at it and the operator's credentials in the environment (this
    process's clients, `gco` run in-process included, sign as the operator)."""
    if "deployed" not in request.fixturenames:
        return moto
    found: Deployed = request.getfixturevalue("deployed")
    monkeypatch.setenv("AWS_ENDPOINT_URL", found.server.url)
    for name, value in found.credentials.items():
        monkeypatch.setenv(name, value)
    return found.server


@pytest.fixture
def store(request: pytest.FixtureRequest, dynamodb: Any) -> EndpointStore:
    """The root fixture's store (the test table on the clean moto server), except for a test that runs
    the synthesized app (see `moto`): then `deployed`'s, the table the app's functions reconcile
    (DEFAULT_TABLE), signing as the operator."""
    if "deployed" in request.fixturenames:
        found: Deployed = request.getfixturevalue("deployed")
        return found.store
    init_table(dynamodb, TABLE)
    return EndpointStore(dynamodb, TABLE)
