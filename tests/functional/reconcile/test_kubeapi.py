"""The REST adapter against the stand-in API server over loopback HTTP: apply, list, delete,
paging, retries on injected faults, token refresh, and the stand-in's apply semantics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from gco.local.standin import Fault, StandInKubeAPI
from gco.reconcile.access import RECONCILER_GRANT
from gco.reconcile.errors import (
    ClusterAuthError,
    ClusterConflictError,
    ClusterRejectedError,
    ClusterUnavailableError,
)
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.objects import DEPLOYMENT, ENDPOINT_LABEL, ObjectRef
from gco.reconcile.render import render
from tests.unit.reconcile.records import EAST, make_record

TOKEN = "test-token"
NAMESPACES = RECONCILER_GRANT.namespaces  # as the Regional stack creates them
FAST = RetryPolicy(attempts=4, base_delay=0.001, max_delay=0.01)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def api(clock: Clock) -> Iterator[StandInKubeAPI]:
    with StandInKubeAPI(
        token=TOKEN, namespaces=NAMESPACES, ready_delay=5.0, clock=clock, fault_sleep=0.3
    ) as server:
        yield server


@pytest.fixture
def cluster(api: StandInKubeAPI) -> Iterator[KubeCluster]:
    client = KubeCluster(api.url, static_token(TOKEN), timeout=0.1, retry=FAST, sleep=lambda _: None)
    yield client
    client.close()


def objects() -> list[dict[str, Any]]:
    return render(make_record({"canary": {"image": "vllm/vllm-openai:v0.6.4"}}), EAST)


def test_apply_list_delete_round_trip(api: StandInKubeAPI, cluster: KubeCluster, clock: Clock) -> None:
    for obj in objects():
        stored = cluster.apply(obj)
        assert stored["metadata"]["uid"]
    listed = cluster.list({ENDPOINT_LABEL: "llama"})
    assert sorted(ObjectRef.of(obj).key for obj in listed) == sorted(
        ObjectRef.of(obj).key for obj in objects()
    )
    deployment = next(obj for obj in listed if obj["metadata"]["name"] == "llama")
    assert deployment["status"].get("readyReplicas", 0) == 0
    clock.now = 5.0
    deployment = next(obj for obj in cluster.list({ENDPOINT_LABEL: "llama"}) if obj["kind"] == "Deployment")
    assert deployment["status"]["readyReplicas"] == 1
    cluster.delete([ObjectRef.of(obj) for obj in listed])
    cluster.delete([ObjectRef.of(obj) for obj in listed])  # already gone: still a success
    assert cluster.list({ENDPOINT_LABEL: "llama"}) == []


def test_reapplying_the_same_object_changes_nothing(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    first = cluster.apply(objects()[0])
    second = cluster.apply(objects()[0])
    assert first["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]
    assert second["metadata"]["generation"] == 1
    changed = objects()[0]
    changed["spec"]["replicas"] = 4
    third = cluster.apply(changed)
    assert third["metadata"]["generation"] == 2
    assert int(third["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])


def test_field_managers_merge_and_conflict(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    deployment = objects()[0]
    cluster.apply(deployment)
    code, merged = api.apply_as("kubectl", {**deployment, "spec": {"paused": True}})
    assert code == 200
    assert merged["spec"]["paused"] is True
    assert merged["spec"]["replicas"] == 1
    conflict = {**deployment, "spec": {"replicas": 9}}
    code, body = api.apply_as("kubectl", conflict, force=False)
    assert code == 409
    assert "gco-reconciler" in body["message"]
    trimmed = {key: value for key, value in deployment.items() if key != "spec"}
    trimmed["spec"] = {**deployment["spec"]}
    del trimmed["spec"]["revisionHistoryLimit"]
    after = cluster.apply(trimmed)
    assert "revisionHistoryLimit" not in after["spec"]  # a field gco stopped setting is dropped
    assert after["spec"]["paused"] is True  # the other manager's field stays


def test_delete_with_a_stale_uid_leaves_the_new_object(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    stored = cluster.apply(objects()[0])
    old = ObjectRef.of(stored)
    cluster.delete([old])
    cluster.apply(objects()[0])
    cluster.delete([old])  # names the deleted object's uid: the replacement survives
    assert len(cluster.list({ENDPOINT_LABEL: "llama"})) == 1


def test_paging(api: StandInKubeAPI, cluster: KubeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    for index in range(7):
        obj = objects()[0]
        obj["metadata"]["name"] = f"llama-{index}"
        cluster.apply(obj)
    original = cluster._request

    def small_pages(method: str, path: str, **kwargs: Any) -> Any:
        if method == "GET":
            kwargs["params"] = {**kwargs["params"], "limit": "3"}
        return original(method, path, **kwargs)

    monkeypatch.setattr(cluster, "_request", small_pages)
    assert len(cluster.list({ENDPOINT_LABEL: "llama"})) == 7


@pytest.mark.parametrize(
    "fault",
    [Fault(status=429, times=2), Fault(status=500), Fault(status=503), Fault(status=409, method="PATCH")],
    ids=["429", "500", "503", "409"],
)
def test_transient_faults_are_retried(api: StandInKubeAPI, cluster: KubeCluster, fault: Fault) -> None:
    api.inject(fault)
    cluster.apply(objects()[0])
    assert len(cluster.list({ENDPOINT_LABEL: "llama"})) == 1


def at_version(obj: dict[str, Any], version: str) -> dict[str, Any]:
    """`obj` applied only over `version` (a resourceVersion precondition)."""
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": version}}


def test_an_apply_over_a_stale_resource_version_is_a_conflict_and_is_not_retried(
    api: StandInKubeAPI, cluster: KubeCluster
) -> None:
    first = cluster.apply(objects()[0])
    changed = objects()[0]
    changed["spec"]["replicas"] = 3
    current = cluster.apply(at_version(changed, first["metadata"]["resourceVersion"]))  # still current
    assert current["spec"]["replicas"] == 3
    patches = api.requests["PATCH"]
    changed["spec"]["replicas"] = 5
    with pytest.raises(ClusterConflictError, match=r"HTTP 409: .*the object has been modified") as raised:
        cluster.apply(at_version(changed, first["metadata"]["resourceVersion"]))
    assert raised.value.status == 409
    assert isinstance(
        raised.value, ClusterUnavailableError
    )  # a caller that does not read again retries later
    assert api.requests["PATCH"] - patches == 1  # the same request would only fail again
    stored = api.get(DEPLOYMENT, "gco-inference", "llama")
    assert stored is not None and stored["spec"]["replicas"] == 3
    assert cluster.apply(at_version(changed, current["metadata"]["resourceVersion"]))["spec"]["replicas"] == 5


def test_the_stand_in_refuses_a_stale_version_as_the_api_server_words_it(api: StandInKubeAPI) -> None:
    import httpx

    path = "/apis/apps/v1/namespaces/gco-inference/deployments/llama"
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/apply-patch+yaml"}
    with httpx.Client(base_url=api.url, headers=headers) as http:
        created = http.patch(path, params={"fieldManager": "m"}, json=at_version(objects()[0], "999"))
        assert created.status_code == 201  # creating never compares the version (nothing to compare)
        refused = http.patch(path, params={"fieldManager": "m"}, json=at_version(objects()[0], "1"))
    assert refused.status_code == 409
    assert refused.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Operation cannot be fulfilled on deployments.apps "llama": the object has been modified; '
        "please apply your changes to the latest version and try again",
        "reason": "Conflict",
        "details": {"name": "llama", "group": "apps", "kind": "deployments"},
        "code": 409,
    }


def test_a_conditional_apply_carries_its_version_and_is_not_retried_on_conflict(
    api: StandInKubeAPI, cluster: KubeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, str, dict[str, Any]]] = []
    original = cluster._request

    def recorded(method: str, path: str, **kwargs: Any) -> Any:
        body = json.loads(kwargs["content"]) if kwargs.get("content") else {}
        sent.append((method, path, {**kwargs, "content": body}))
        return original(method, path, **kwargs)

    stored = cluster.apply(objects()[0])
    monkeypatch.setattr(cluster, "_request", recorded)
    api.inject(Fault(status=409, method="PATCH"))
    with pytest.raises(ClusterConflictError):
        cluster.apply(at_version(objects()[0], stored["metadata"]["resourceVersion"]))
    ((method, path, request),) = sent
    assert (method, path) == ("PATCH", "/apis/apps/v1/namespaces/gco-inference/deployments/llama")
    assert request["params"] == {"fieldManager": "gco-reconciler", "force": "true"}
    assert request["headers"] == {"Content-Type": "application/apply-patch+yaml"}
    assert request["content"]["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert request["retry_conflict"] is False
    api.inject(Fault(status=409, method="PATCH"))
    cluster.apply(objects()[0])  # without a precondition a 409 is transient: retried
    assert sent[-1][2]["retry_conflict"] is True


@pytest.mark.parametrize("when", ["before", "after"])
def test_timeouts_are_retried_and_apply_stays_idempotent(
    api: StandInKubeAPI, cluster: KubeCluster, when: str
) -> None:
    api.inject(Fault(timeout=when, method="PATCH"))
    cluster.apply(objects()[0])
    listed = cluster.list({ENDPOINT_LABEL: "llama"})
    assert len(listed) == 1
    assert listed[0]["metadata"]["generation"] == 1


def test_persistent_faults_give_up_with_unavailable(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    api.inject(Fault(status=500, times=10))
    with pytest.raises(ClusterUnavailableError, match="HTTP 500"):
        cluster.apply(objects()[0])


def test_rejections_are_terminal(api: StandInKubeAPI, cluster: KubeCluster) -> None:
    bad = objects()[0]
    bad["metadata"]["name"] = "other"
    api.inject(Fault(status=422, method="PATCH"))
    with pytest.raises(ClusterRejectedError, match="422"):
        cluster.apply(bad)
    api.inject(Fault(status=400, method="DELETE"))
    with pytest.raises(ClusterRejectedError):
        cluster.delete([ObjectRef.of(bad)])
    api.inject(Fault(status=400, method="GET"))
    with pytest.raises(ClusterRejectedError):
        cluster.list({ENDPOINT_LABEL: "llama"})


def test_token_is_refreshed_once_on_401(api: StandInKubeAPI) -> None:
    minted: list[bool] = []

    def token(refresh: bool) -> str:
        minted.append(refresh)
        return TOKEN if refresh else "expired"

    client = KubeCluster(api.url, token, retry=FAST, sleep=lambda _: None)
    client.apply(objects()[0])
    assert minted == [False, True]
    bad = KubeCluster(api.url, static_token("wrong"), retry=FAST, sleep=lambda _: None)
    with pytest.raises(ClusterAuthError):
        bad.list({ENDPOINT_LABEL: "llama"})
    client.close()
    bad.close()


def test_missing_crd_lists_as_empty() -> None:
    with StandInKubeAPI(crds=frozenset(), namespaces=NAMESPACES) as server:
        client = KubeCluster(server.url, static_token("any"), retry=FAST)
        assert client.list({ENDPOINT_LABEL: "llama"}) == []
        client.close()


def test_terminating_objects_linger_for_the_deletion_delay(clock: Clock) -> None:
    with StandInKubeAPI(deletion_delay=2.0, clock=clock, namespaces=NAMESPACES) as server:
        client = KubeCluster(server.url, static_token("any"), retry=FAST, sleep=lambda _: None)
        stored = client.apply(objects()[0])
        client.delete([ObjectRef.of(stored)])
        listed = client.list({ENDPOINT_LABEL: "llama"})
        assert listed[0]["metadata"]["deletionTimestamp"]
        with pytest.raises(ClusterUnavailableError):  # applying to a terminating object conflicts
            client.apply(objects()[0])
        clock.now = 2.0
        assert client.list({ENDPOINT_LABEL: "llama"}) == []
        client.close()


def test_stand_in_answers_unknown_paths_and_bad_requests(api: StandInKubeAPI) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {TOKEN}"}
    with httpx.Client(base_url=api.url, headers=headers) as http:
        assert http.get("/apis/nope/v1/things").status_code == 403  # RBAC answers before routing
        assert http.get("/apis/apps/v1/namespaces/x/deployments/missing").status_code == 403
        assert http.get("/apis/apps/v1/namespaces/gco-inference/deployments/missing").status_code == 404
        assert http.get("/apis/oops").status_code == 404
        path = "/apis/apps/v1/namespaces/gco-inference/deployments/llama"
        assert (
            http.patch(path, content=b"{}", headers={"Content-Type": "application/json"}).status_code == 415
        )
        apply = {"Content-Type": "application/apply-patch+yaml"}
        assert http.patch(path, content=b"{", headers=apply).status_code == 400
        assert http.patch(path, content=b"{}", headers=apply).status_code == 400
        assert http.delete("/apis/apps/v1/deployments").status_code == 403  # deletecollection
        assert http.delete("/apis/apps/v1/namespaces/gco-inference/deployments").status_code == 403
        collection = "/apis/apps/v1/namespaces/gco-inference/deployments"
        assert http.patch(collection, content=b"{}", headers=apply).status_code == 405
        body = objects()[0]
        created = http.patch(path, params={"fieldManager": "m"}, json=body, headers=apply)
        assert created.status_code == 201
        assert http.get(path).json()["metadata"]["name"] == "llama"
        mismatch = {**body, "kind": "Service"}
        assert http.patch(path, params={"fieldManager": "m"}, json=mismatch, headers=apply).status_code == 400
    assert api.writes() >= 1
    assert len(api.endpoint_objects()) == 1


def test_a_server_url_with_a_path_keeps_it_on_every_request() -> None:
    """An API server reached under a path (an authenticating proxy's, e.g. `/k8s/clusters/<id>`):
    each request goes to that path plus the API path, on the one host the URL names."""
    import http.server
    import threading

    seen: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            seen.append(self.path)
            body = json.dumps({"kind": "Deployment", "metadata": {"name": "llama"}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/k8s/clusters/c-1/"
        client = KubeCluster(url, static_token(TOKEN), retry=FAST, sleep=lambda _: None)
        found = client.get(DEPLOYMENT, "gco-inference", "llama")
        assert found is not None and found["metadata"]["name"] == "llama"
        client.close()
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["/k8s/clusters/c-1/apis/apps/v1/namespaces/gco-inference/deployments/llama"]
