"""Endpoint secrets against the moto server's Secrets Manager and the stand-in API server: the boto3
reader, the allowed list enforced by the reconciler, a rotation reaching the Secret, and Secrets
stored and authorized as the API server does (by name only, stringData folded into data).

It runs the reconciler library in this process: it drives the in-process `Reconciler` and its secret
reader directly."""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest

from gco import aws
from gco.endpoints import EndpointStore
from gco.local.moto.motoserver import MotoServer
from gco.local.region.reconcilers import LocalReconcilers
from gco.local.standin import StandInKubeAPI
from gco.reconcile.errors import ClusterAuthError, ClusterRejectedError
from gco.reconcile.kube_tokens import LOCAL_TOKEN
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.objects import DEPLOYMENT, SECRET
from gco.secrets.endpoint_secrets import SOURCES_ANNOTATION, SecretReadError, secret_name
from gco.secrets.secrets_manager import SecretsManagerReader
from tests.unit.reconcile.records import EAST, IMAGE

NAMESPACE = "gco-inference"
SPEC: dict[str, Any] = {"image": IMAGE, "secret_env": {"HF_TOKEN": {"secret_id": "team/hf"}}}


@pytest.fixture
def secrets(moto: MotoServer) -> Any:
    client = aws.client("secretsmanager", region=EAST, endpoint_url=moto.url)
    client.create_secret(Name="team/hf", SecretString="first-value")
    return client


@pytest.fixture
def one_region(store: EndpointStore, moto: MotoServer) -> Iterator[LocalReconcilers]:
    with LocalReconcilers(store, [EAST], endpoint_url=moto.url, wait=0.0, poll=0.01) as stack:
        yield stack


def test_the_reader_reads_by_name_and_arn_and_says_what_cannot_be_read(
    secrets: Any, moto: MotoServer
) -> None:
    reader = SecretsManagerReader(lambda region: aws.client("secretsmanager", region=region), EAST)
    by_name = reader.read("team/hf")
    arn = secrets.describe_secret(SecretId="team/hf")["ARN"]
    assert by_name.value == "first-value" and reader.read(arn).version_id == by_name.version_id
    with pytest.raises(SecretReadError) as missing:
        reader.read("team/missing")
    assert str(missing.value) == "secret team/missing: ResourceNotFoundException"
    assert not missing.value.retryable
    secrets.create_secret(Name="team/binary", SecretBinary=b"\x00\x01")
    with pytest.raises(SecretReadError, match="binary") as binary:
        reader.read("team/binary")
    assert not binary.value.retryable


def test_a_secret_outside_the_allowed_list_is_refused_and_nothing_is_written(
    one_region: LocalReconcilers, store: EndpointStore, secrets: Any
) -> None:
    region = one_region.regions[EAST]
    settings = dataclasses.replace(region.reconciler.settings, endpoint_secrets=("team/other",))
    region.reconciler.settings = settings
    store.create("llama", SPEC, [EAST])
    one_region.pump()
    record = store.get("llama", consistent_read=True)
    assert record is not None
    status = record.region_status[EAST]
    assert status.state == "error" and status.error is not None
    assert status.error.startswith(
        "secret_env.HF_TOKEN.secret_id: team/hf is not a secret endpoints may read"
    )
    assert [o for o in region.api.endpoint_objects() if o["kind"] == "Deployment"] == []
    assert region.api.get(SECRET, NAMESPACE, secret_name("llama")) is None


def pod_annotations(region: Any, name: str) -> dict[str, str]:
    deployment = region.api.get(DEPLOYMENT, NAMESPACE, name)
    assert deployment is not None
    annotations: dict[str, str] = deployment["spec"]["template"]["metadata"]["annotations"]
    return annotations


def test_a_rotated_secret_rolls_the_pods_at_the_next_sweep_and_no_value_is_annotated(
    one_region: LocalReconcilers, store: EndpointStore, secrets: Any
) -> None:
    """The pod template carries the digest of the secret's version: a rotation (nothing else changed)
    rewrites the Secret and then changes the template, so the Deployment rolls its pods."""
    region = one_region.regions[EAST]
    store.create("llama", SPEC, [EAST])
    one_region.pump()
    first = region.api.get(SECRET, NAMESPACE, secret_name("llama"))
    assert first is not None and base64.b64decode(first["data"]["HF_TOKEN"]) == b"first-value"
    digest = first["metadata"]["annotations"][SOURCES_ANNOTATION]
    assert pod_annotations(region, "llama")[SOURCES_ANNOTATION] == digest
    writes = region.api.writes
    one_region.sweep()  # nothing changed: neither the Secret nor the Deployment is written again
    assert region.api.writes == writes

    secrets.put_secret_value(SecretId="team/hf", SecretString="second-value")
    one_region.sweep()
    second = region.api.get(SECRET, NAMESPACE, secret_name("llama"))
    assert second is not None and base64.b64decode(second["data"]["HF_TOKEN"]) == b"second-value"
    rolled = pod_annotations(region, "llama")[SOURCES_ANNOTATION]
    assert rolled == second["metadata"]["annotations"][SOURCES_ANNOTATION] != digest
    deployment = json.dumps(region.api.get(DEPLOYMENT, NAMESPACE, "llama"))
    assert "second-value" not in deployment and "first-value" not in deployment


def test_a_secret_that_becomes_unreadable_is_a_terminal_status_and_the_pods_are_left_alone(
    one_region: LocalReconcilers, store: EndpointStore, secrets: Any
) -> None:
    region = one_region.regions[EAST]
    store.create("llama", SPEC, [EAST])
    one_region.pump()
    before = region.api.get(DEPLOYMENT, NAMESPACE, "llama")
    secrets.delete_secret(SecretId="team/hf", ForceDeleteWithoutRecovery=True)
    one_region.sweep()
    record = store.get("llama", consistent_read=True)
    assert record is not None and record.region_status[EAST].state == "error"
    assert (record.region_status[EAST].error or "").startswith("secret_env.HF_TOKEN: secret team/hf:")
    after = region.api.get(DEPLOYMENT, NAMESPACE, "llama")
    assert before is not None and after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@pytest.fixture
def cluster() -> Iterator[tuple[StandInKubeAPI, KubeCluster]]:
    with StandInKubeAPI(token=LOCAL_TOKEN) as api:
        retry = RetryPolicy(attempts=1, base_delay=0.01, max_delay=0.01)
        client = KubeCluster(api.url, static_token(LOCAL_TOKEN), timeout=2.0, retry=retry)
        api.apply_as("test", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        try:
            yield api, client
        finally:
            client.close()


def secret(namespace: str, **body: Any) -> dict[str, Any]:
    meta = {"name": "llama--secrets", "namespace": namespace}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta, **body}


def test_the_stand_in_stores_secrets_as_the_api_server_does(
    cluster: tuple[StandInKubeAPI, KubeCluster],
) -> None:
    api, client = cluster
    stored = client.apply(secret(NAMESPACE, stringData={"A": "plain"}, data={"B": "YmI="}))
    assert stored["data"] == {"A": base64.b64encode(b"plain").decode(), "B": "YmI="}
    assert "stringData" not in json.dumps(api.get(SECRET, NAMESPACE, "llama--secrets"))
    with pytest.raises(ClusterRejectedError, match="not base64"):
        client.apply(secret(NAMESPACE, data={"A": "not base64!"}))


def test_the_stand_in_authorizes_secrets_by_name_in_endpoint_namespaces_only(
    cluster: tuple[StandInKubeAPI, KubeCluster],
) -> None:
    api, client = cluster
    api.apply_as("test", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}})
    with pytest.raises(ClusterAuthError):
        client.apply(secret("kube-system", data={}))
    with pytest.raises(ClusterAuthError):
        client.list_in(SECRET, NAMESPACE, {})
    assert client.get(SECRET, NAMESPACE, "llama--secrets") is None
