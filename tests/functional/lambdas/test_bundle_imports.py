"""Each Lambda handler imports and handles a sample event from the built bundle alone, in a subprocess.

The bundle is built by the project's bundling (handlers and gco copied, the lock's wheels installed)
for this machine's interpreter: the lock's exact versions, so a package missing from the lock fails
the import here as it would on every cold start in AWS. The subprocess runs isolated (`-I -S`): on its
path only the bundle, a folder standing in for what the Lambda Python runtime provides (boto3 and its
dependencies, copied from this environment), and the standard library. A UDP socket stands in for the
X-Ray daemon: the traces must still reach it though the tracer now loads on the first invocation.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gco import aws
from gco.endpoints import EndpointStore
from gco.endpoints.codec import to_item
from gco.endpoints.record import RegionStatus
from gco.env import TABLE_ENV
from gco.global_access.authorizer import REGION_ORDER_ENV
from gco.global_access.key_store import KEY_ATTRIBUTE, KEYS_TABLE_ENV
from gco.global_access.key_store import to_item as key_item
from gco.global_access.keys import new_key
from gco.local.moto.motoserver import MotoServer
from gco.local.standin import StandInKubeAPI
from gco.reconcile.environment import ReconcilerEnvironment
from gco.reconcile.heartbeat import SsmParameters, read_heartbeat
from stacks.bundling import (
    BUNDLE_ENVIRONMENT,
    REGIONAL,
    ROLLOUT,
    Bundle,
)
from tests.conftest import TABLE
from tests.tools.lambda_runtime import bundle_for_this_python, runtime_sdk
from tests.unit.reconcile.records import EAST, IMAGE

EVENTS = Path(__file__).parents[2] / "events"
DRIVER = Path(__file__).with_name("bundle_driver.py")
AUTHORIZER_DRIVER = Path(__file__).with_name("authorizer_driver.py")
KEYS_TABLE = "gco-test-api-keys"
TOKEN = "bundle-test-token"


def built(kind: Bundle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`kind`'s bundle for this interpreter (tests/tools/lambda_runtime.py)."""
    return bundle_for_this_python(kind, tmp_path_factory.mktemp(f"bundle-{kind.name}"))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Regional functions' bundle (the reconciler's handlers and the authorizer)."""
    return built(REGIONAL, tmp_path_factory)


@pytest.fixture(scope="module")
def rollout_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The rollout workflow's bundle (its step and the stream's starter)."""
    return built(ROLLOUT, tmp_path_factory)


@pytest.fixture(scope="module", name="runtime_sdk")
def runtime_sdk_fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Stands in for the Lambda runtime's own packages: the AWS SDK and its dependencies."""
    return runtime_sdk(tmp_path_factory.mktemp("runtime"))


@pytest.fixture
def kube() -> Iterator[StandInKubeAPI]:
    api = StandInKubeAPI(token=TOKEN).start()
    try:
        yield api
    finally:
        api.stop()


@pytest.fixture
def xray_daemon() -> Iterator[socket.socket]:
    """Stands in for the X-Ray daemon's UDP listener (only receives: it forwards nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.setblocking(False)
        yield listener


def received_segments(listener: socket.socket) -> list[dict[str, Any]]:
    """Every segment document the handler sent (daemon protocol: a JSON header line, then the document)."""
    documents: list[dict[str, Any]] = []
    while True:
        try:
            datagram = listener.recv(65536)
        except BlockingIOError:
            return documents
        header, _, body = datagram.decode().partition("\n")
        assert json.loads(header) == {"format": "json", "version": 1}
        documents.append(json.loads(body))


def run_handler(
    handler: str,
    event: str,
    *,
    bundle: Path,
    runtime: Path,
    moto: MotoServer,
    kube: StandInKubeAPI,
    daemon: socket.socket,
) -> dict[str, Any]:
    config = {
        "bundle": str(bundle),
        "runtime": str(runtime),
        "handler": handler,
        "event": str(EVENTS / event),
        "kube": kube.url,
        "token": TOKEN,
        "table": TABLE,
        "region": EAST,
    }
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_ENDPOINT_URL": moto.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": EAST,
        "AWS_DEFAULT_REGION": EAST,
        "DYNAMODB_REGION": EAST,
        # What the Lambda runtime sets: Powertools then traces, through the X-Ray SDK.
        "AWS_LAMBDA_FUNCTION_NAME": "gco-reconciler-stream",
        "LAMBDA_TASK_ROOT": str(bundle),
        "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
        "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{daemon.getsockname()[1]}",
        "AWS_XRAY_CONTEXT_MISSING": "LOG_ERROR",
        "POWERTOOLS_METRICS_NAMESPACE": "gco-test",
        # What the stack sets on the functions (`ReconcilerEnvironment`): the sweep's heartbeat is built
        # from it (the reconciler itself is replaced by the driver).
        **ReconcilerEnvironment(cluster_name="gco-test", region=EAST, table_name=TABLE).to_env(),
        **BUNDLE_ENVIRONMENT,
    }
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(DRIVER), json.dumps(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["foreign"] == [], "loaded from outside the bundle and the runtime"
    assert not result["tracer_at_import"], "the X-Ray SDK should load on the first invocation, not at import"
    assert result["tracer"], "Powertools' Tracer should have loaded the X-Ray SDK"
    assert result["patched"] == ["botocore"], "only the clients gco uses are patched"
    segments = received_segments(daemon)
    names = {segment["name"] for segment in segments}
    # The handler's subsegment, the DynamoDB calls (botocore) and the Kubernetes API calls
    # (`tracing.trace_kube_requests`).
    assert {"## handler", "dynamodb", "127.0.0.1"} <= names, names
    # botocore's calls are traced once, by the botocore patch: every call traced by its host is the
    # Kubernetes API's, none the moto server's
    traced = [
        str(s.get("http", {}).get("request", {}).get("url", "")) for s in segments if s["name"] == "127.0.0.1"
    ]
    assert traced and all(url.startswith(kube.url) for url in traced), traced
    return result


def test_stream_handler_from_the_bundle(
    bundle: Path,
    runtime_sdk: Path,
    store: EndpointStore,
    moto: MotoServer,
    kube: StandInKubeAPI,
    xray_daemon: socket.socket,
) -> None:
    store.create("llama", {"image": IMAGE}, [EAST])
    result = run_handler(
        "reconciler",
        "dynamodb_stream_batch.json",
        bundle=bundle,
        runtime=runtime_sdk,
        moto=moto,
        kube=kube,
        daemon=xray_daemon,
    )
    assert result["response"] == {"batchItemFailures": [{"itemIdentifier": "222"}]}
    record = store.get("llama")
    assert record is not None
    assert record.region_status[EAST].state == "running"


def test_sweep_handler_from_the_bundle(
    bundle: Path,
    runtime_sdk: Path,
    store: EndpointStore,
    moto: MotoServer,
    kube: StandInKubeAPI,
    xray_daemon: socket.socket,
) -> None:
    store.create("llama", {"image": IMAGE}, [EAST])
    result = run_handler(
        "sweep",
        "scheduled_sweep.json",
        bundle=bundle,
        runtime=runtime_sdk,
        moto=moto,
        kube=kube,
        daemon=xray_daemon,
    )
    assert (result["response"]["endpoints"], result["response"]["failed"]) == (1, [])
    assert result["response"]["heartbeat"] is True
    ssm = SsmParameters(aws.client("ssm", region=EAST, endpoint_url=moto.url))
    beat = read_heartbeat(ssm, TABLE, EAST)
    assert beat is not None and beat.every_s == ReconcilerEnvironment.model_fields["sweep_seconds"].default


def test_authorizer_handler_from_the_bundle(
    bundle: Path, runtime_sdk: Path, store: EndpointStore, moto: MotoServer, dynamodb: Any
) -> None:
    """The authorizer decides from the tables alone, and neither its cold start nor its decisions
    load Powertools, the X-Ray SDK, httpx, boto3 or pydantic (it is on every request's path)."""
    dynamodb.create_table(
        TableName=KEYS_TABLE,
        KeySchema=[{"AttributeName": KEY_ATTRIBUTE, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": KEY_ATTRIBUTE, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    plaintext, key = new_key("bundle", ["llama"], now=datetime.now(UTC))
    dynamodb.put_item(TableName=KEYS_TABLE, Item=key_item(key))
    store.create("llama", {"image": IMAGE}, [EAST])
    record = store.get("llama")
    assert record is not None
    running = {
        "state": "running",
        "replicas_ready": 1,
        "replicas_desired": 1,
        "lifecycle_id": record.lifecycle_id,
    }
    item = record.model_copy(update={"region_status": {EAST: RegionStatus.model_validate(running)}}).to_json()
    dynamodb.put_item(TableName=TABLE, Item=to_item(item))
    arn = "arn:aws:execute-api:us-east-1:111122223333:api/v1/POST/inference/llama/v1/completions"

    def event(authorization: str) -> dict[str, Any]:
        return {
            "path": "/inference/llama/v1/completions",
            "methodArn": arn,
            "headers": {"Authorization": authorization},
        }

    config = {
        "bundle": str(bundle),
        "runtime": str(runtime_sdk),
        "events": [event(f"Bearer {plaintext}"), event("Bearer nonsense")],
    }
    env = {
        "PATH": "/usr/bin:/bin",
        "AWS_ENDPOINT_URL": moto.url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": EAST,
        "AWS_LAMBDA_FUNCTION_NAME": "gco-global-us-east-1-authorizer",
        "LAMBDA_TASK_ROOT": str(bundle),
        KEYS_TABLE_ENV: KEYS_TABLE,
        TABLE_ENV: TABLE,
        REGION_ORDER_ENV: f"{EAST},us-west-2",
        **BUNDLE_ENVIRONMENT,
    }
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(AUTHORIZER_DRIVER), json.dumps(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["foreign"] == [] and result["heavy"] == []
    allowed, refused = result["answers"]
    assert allowed["policyDocument"]["Statement"][0] == {
        "Action": "execute-api:Invoke",
        "Effect": "Allow",
        "Resource": arn,
    }
    assert allowed["context"] == {"keyId": key.key_id, "serveRegion": EAST}
    assert refused == {"error": "UnauthorizedError", "message": "Unauthorized"}
    assert plaintext not in done.stdout + done.stderr  # the key is in no log line


IMPORT_PROBE = """
import json, sys, sysconfig
bundle, runtime, modules = sys.argv[1], sys.argv[2], sys.argv[3:]
stdlib = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
sys.path[:] = [bundle, runtime, *[p for p in sys.path if p.startswith(tuple(stdlib))]]
for module in modules:
    __import__(module)
roots = (bundle, runtime, *stdlib)
files = [getattr(m, "__file__", None) for name, m in list(sys.modules.items()) if name != "__main__"]
print(json.dumps(sorted(f for f in files if f and not f.startswith(roots))))
"""


def test_the_rollout_handlers_and_their_statistics_import_from_their_bundle(
    rollout_bundle: Path, runtime_sdk: Path, tmp_path: Path
) -> None:
    """The rollout step's paired bootstrap (numpy, scipy) and evidence schema (jsonschema) come with
    its bundle, not the Regional one; nothing is loaded from outside it, the SDK and the stdlib."""
    probe = tmp_path / "probe.py"
    probe.write_text(IMPORT_PROBE)
    modules = ["rollout", "rollout_starter", "gco.bench.analysis.stats", "gco.evidence.record", "scipy.stats"]
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(probe), str(rollout_bundle), str(runtime_sdk), *modules],
        env={"PATH": "/usr/bin:/bin", **BUNDLE_ENVIRONMENT},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_regional_bundle_cannot_import_the_statistics(
    bundle: Path, runtime_sdk: Path, tmp_path: Path
) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(IMPORT_PROBE)
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(probe), str(bundle), str(runtime_sdk), "numpy"],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1 and "No module named 'numpy'" in done.stderr
