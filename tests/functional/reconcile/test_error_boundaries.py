"""Each third-party error at each boundary ends as the documented outcome (docs/reconciler.md).

The boundaries: the store (botocore `ClientError` and `BotoCoreError` from DynamoDB), the
Kubernetes client (httpx transport and decoding errors, an answer that is not JSON), the EKS token
(botocore while signing), and a bug (an exception gco never raises). At each, the error leaves as
gco's own (`StoreUnavailableError`, `ClusterUnavailableError`, ...), and both entry points treat it
alike: the stream handler fails only the records of the endpoints it touched (kind logged and
counted), the sweep never raises, names what failed and goes on; the other Region is untouched.
Real parts throughout: the moto server, loopback HTTP servers, the stand-in API servers.

It runs the reconciler library in this process (`local`): it injects faults into that reconciler and
reads its in-process sweep reports."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import NoCredentialsError

from gco import aws
from gco.endpoints import EndpointStore, StoreUnavailableError
from gco.local.region.poller import lambda_event
from gco.local.region.reconcilers import LocalReconcilers
from gco.reconcile.eks import eks_token
from gco.reconcile.errors import ClusterAuthError, ClusterUnavailableError
from gco.reconcile.failures import failure_kind
from gco.reconcile.handler import handle_stream_event
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.objects import DEPLOYMENT, ENDPOINT_LABEL, ObjectRef
from gco.reconcile.port import Cluster
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, IMAGE, WEST, make_record

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}
NAMES = ("alpha", "beta")
FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)

# What a misbehaving API server (or something in front of it) answers, per fault.
ANSWERS: dict[str, tuple[dict[str, str], bytes]] = {
    "not-json": ({"Content-Type": "text/html"}, b"<html>502 Bad Gateway</html>"),
    "json-not-object": ({"Content-Type": "application/json"}, b"[1, 2]"),
    "bad-gzip": ({"Content-Type": "application/json", "Content-Encoding": "gzip"}, b"not gzip at all"),
}


class Misbehaving(http.server.ThreadingHTTPServer):
    """A loopback HTTP server that answers every request 200 with one fault's headers and body."""

    daemon_threads = True

    def __init__(self, fault: str) -> None:
        headers, body = ANSWERS[fault]

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_PATCH = do_DELETE = _answer  # noqa: N815 - http.server's names

            def log_message(self, format: str, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client hanging up on a body it could not decode is expected: nothing to print."""


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@contextlib.contextmanager
def broken_cluster(fault: str) -> Iterator[KubeCluster]:
    if fault == "refused":
        url, server = closed_port_url(), None
    else:
        server = Misbehaving(fault)
        url = server.url
    client = KubeCluster(url, static_token("t"), timeout=1.0, retry=FAST, sleep=lambda _: None)
    yield client
    client.close()
    if server is not None:
        server.shutdown()
        server.server_close()


KUBE_FAULTS = ["refused", *ANSWERS]


@pytest.mark.parametrize("fault", KUBE_FAULTS)
def test_every_verb_converts_every_httpx_and_json_error(fault: str) -> None:
    obj = render(make_record(), EAST)[0]
    with broken_cluster(fault) as kube:
        calls: list[Callable[[], object]] = [
            lambda: kube.apply(obj),
            lambda: kube.get(DEPLOYMENT, "gco-inference", "llama"),
            lambda: kube.list({ENDPOINT_LABEL: "llama"}),
        ]
        if fault in ("refused", "bad-gzip"):  # a delete reads no body: only these reach it
            calls.append(lambda: kube.delete([ObjectRef.of(obj)]))
        for call in calls:
            with pytest.raises(ClusterUnavailableError) as raised:
                call()
            assert failure_kind(raised.value) == "unavailable"


def test_signing_the_eks_token_without_credentials_is_an_auth_error() -> None:
    class Unsigned:
        meta = aws.client("sts", region=EAST, endpoint_url="http://127.0.0.1:9").meta

        def generate_presigned_url(self, *args: Any, **kwargs: Any) -> str:
            raise NoCredentialsError

    with pytest.raises(ClusterAuthError, match="signing the EKS token"):
        eks_token("gco", Unsigned())


def dynamodb_fault(fault: str, store: EndpointStore) -> EndpointStore:
    """A store whose every call fails as `fault` does: a missing table (`ClientError`) or a refused
    connection (`BotoCoreError`), with gco's client configuration but one attempt (the retries a
    real outage would spend are not what is tested here)."""
    if fault == "client-error":
        return EndpointStore(store.client, "no-such-table")
    client = boto3.session.Session().client(
        "dynamodb",
        region_name=EAST,
        endpoint_url=closed_port_url(),
        config=aws.CLIENT_CONFIG.merge(Config(retries={"mode": "standard", "max_attempts": 1})),
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return EndpointStore(client, store.table_name)


def stream_batch(local: LocalReconcilers, names: Sequence[str]) -> dict[str, Any]:
    records = [
        {
            "eventID": f"e{index}",
            "eventName": "INSERT",
            "dynamodb": {"Keys": {"endpoint_name": {"S": name}}, "SequenceNumber": str(100 + index)},
        }
        for index, name in enumerate(names)
    ]
    return lambda_event(records, local.stream_arn, EAST)


def assert_running(store: EndpointStore, region: str) -> None:
    for name in NAMES:
        record = store.get(name)
        assert record is not None and record.region_status[region].state == "running", (name, region)


@pytest.mark.parametrize("fault", ["client-error", "botocore-error"])
def test_a_dynamodb_failure_in_one_region_ends_as_documented_and_spares_the_other(
    store: EndpointStore, local: LocalReconcilers, fault: str
) -> None:
    for name in NAMES:
        store.create(name, SPEC, [EAST, WEST])
    east = local.regions[EAST].reconciler
    east.store = dynamodb_fault(fault, store)
    with pytest.raises(StoreUnavailableError):
        east.store.get("alpha")

    kinds: list[str] = []
    response = handle_stream_event(stream_batch(local, NAMES), east, on_failure=kinds.append)
    assert {item["itemIdentifier"] for item in response["batchItemFailures"]} == {"100", "101"}
    assert kinds == ["unavailable", "unavailable"]

    reports = local.sweep()  # never raises; the Region that cannot list says so
    assert reports[EAST].error is not None and reports[EAST].done == 0
    assert reports[WEST].error is None and reports[WEST].done == len(NAMES)
    assert_running(store, WEST)
    assert local.regions[EAST].api.endpoint_objects() == []  # nothing touched without a listing


@pytest.mark.parametrize("fault", KUBE_FAULTS)
def test_a_kubernetes_failure_in_one_region_ends_as_documented_and_spares_the_other(
    store: EndpointStore, local: LocalReconcilers, fault: str
) -> None:
    for name in NAMES:
        store.create(name, SPEC, [EAST, WEST])
    east = local.regions[EAST].reconciler
    with broken_cluster(fault) as broken:
        east.cluster = broken
        kinds: list[str] = []
        response = handle_stream_event(stream_batch(local, NAMES), east, on_failure=kinds.append)
        assert {item["itemIdentifier"] for item in response["batchItemFailures"]} == {"100", "101"}
        assert kinds == ["unavailable", "unavailable"]
        reports = local.sweep()
        assert reports[EAST].error is not None
        assert reports[WEST].error is None and reports[WEST].done == len(NAMES)
        assert_running(store, WEST)


class Buggy:
    """The Region's real cluster, except that applying one endpoint's objects raises a plain
    Python error: a bug, not a gco error."""

    def __init__(self, cluster: Cluster, victim: str) -> None:
        self._cluster = cluster
        self._victim = victim

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cluster, name)

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["metadata"].get("labels", {}).get(ENDPOINT_LABEL) == self._victim:
            raise KeyError("a bug")
        return self._cluster.apply(obj)


def test_a_bug_is_handled_like_any_failure_by_both_entry_points(
    store: EndpointStore, local: LocalReconcilers
) -> None:
    for name in NAMES:
        store.create(name, SPEC, [EAST, WEST])
    east = local.regions[EAST].reconciler
    east.cluster = Buggy(east.cluster, "alpha")  # type: ignore[assignment]
    kinds: list[str] = []
    response = handle_stream_event(stream_batch(local, NAMES), east, on_failure=kinds.append)
    assert response["batchItemFailures"] == [{"itemIdentifier": "100"}]
    assert kinds == ["unexpected"]
    reports = local.sweep()
    assert reports[EAST].failed == ["alpha"] and reports[EAST].done == 1
    assert reports[WEST].failed == [] and reports[WEST].done == len(NAMES)
    record = store.get("beta")
    assert record is not None and record.region_status[EAST].state == "running"
    assert_running(store, WEST)
