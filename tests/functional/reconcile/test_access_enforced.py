"""The reconciler under the enforcing stand-in: only what the grant allows, as the API server answers
refusals; namespaces created, the shared proxy applied once and kept, a missing CRD is terminal. The
GPU runner's read-only grant beside it: the matrix's reads allowed, any write refused 403."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from gco.endpoints import EndpointStore
from gco.endpoints.namespaces import SYSTEM_NAMESPACE
from gco.local.standin import RECONCILER_USER, RUNNER_IDENTITY, RUNNER_USER, StandInKubeAPI
from gco.reconcile.access import RECONCILER_GRANT, RUNNER_GRANT
from gco.reconcile.errors import ClusterAuthError
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.model_sources import MODEL_SERVICE_ACCOUNT, parse_prefixes
from gco.reconcile.objects import DEPLOYMENT, ENDPOINT_LABEL, HPA, Kind, ObjectRef
from gco.reconcile.proxy.render_proxy import PROXY_DEPLOYMENT, PROXY_HPA
from gco.reconcile.proxy.route_shards import SHARDS, TABLE_JSON, shard_key, shard_name, shard_number
from gco.reconcile.reconciler import Reconciler
from gco.reconcile.settings import RenderSettings
from gco.reconcile.sweep import sweep
from gco.validation import checks
from tests.unit.reconcile.records import EAST, IMAGE

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}
FAST = RetryPolicy(attempts=2, base_delay=0.001, max_delay=0.001)
PROXY = {
    ("Namespace", "", "gco-inference"),
    ("Namespace", "", "gco-system"),
    ("ConfigMap", "gco-system", "inference-proxy-conf"),
    *(("ConfigMap", "gco-system", shard_name(shard)) for shard in range(SHARDS)),
    ("Deployment", "gco-system", "inference-proxy"),
    ("Service", "gco-system", "inference-proxy"),
    ("HorizontalPodAutoscaler", "gco-system", "inference-proxy-hpa"),
    ("NetworkPolicy", "gco-inference", "gco-default-deny"),
    ("NetworkPolicy", "gco-inference", "gco-no-instance-metadata"),
}


def build(api: StandInKubeAPI, store: EndpointStore) -> Reconciler:
    cluster = KubeCluster(api.url, static_token("t"), retry=FAST, sleep=lambda _: None)
    return Reconciler(store, cluster, EAST, wait=0.0)


@pytest.fixture
def api() -> Iterator[StandInKubeAPI]:
    with StandInKubeAPI() as server:
        yield server


def keys(api: StandInKubeAPI) -> set[tuple[str, str, str]]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in api.objects()}


def routes(api: StandInKubeAPI) -> list[dict[str, Any]]:
    """Every route the shards hold."""
    found: list[dict[str, Any]] = []
    for obj in api.objects():
        number = shard_number(obj["metadata"]["name"])
        if number is not None:
            found += json.loads(obj["data"][shard_key(number, TABLE_JSON)])["routes"]
    return found


def test_a_cluster_wide_list_is_refused_as_the_api_server_refuses_it(api: StandInKubeAPI) -> None:
    with httpx.Client(base_url=api.url, headers={"Authorization": "Bearer t"}) as http:
        answer = http.get("/apis/apps/v1/deployments", params={"labelSelector": "gco.dev/endpoint=llama"})
        named = http.patch(
            "/apis/apps/v1/namespaces/kube-system/deployments/coredns",
            params={"fieldManager": "x"},
            content=b"{}",
            headers={"Content-Type": "application/apply-patch+yaml"},
        )
    assert answer.status_code == 403
    assert answer.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'deployments.apps is forbidden: User "{RECONCILER_USER}" cannot list resource '
        '"deployments" in API group "apps" at the cluster scope',
        "reason": "Forbidden",
        "details": {"group": "apps", "kind": "deployments"},
        "code": 403,
    }
    assert named.status_code == 403
    assert named.json()["message"] == (
        f'deployments.apps "coredns" is forbidden: User "{RECONCILER_USER}" cannot patch resource '
        '"deployments" in API group "apps" in the namespace "kube-system"'
    )
    assert named.json()["details"] == {"group": "apps", "kind": "deployments", "name": "coredns"}


DEPLOYMENTS = "/apis/apps/v1/namespaces/gco-inference/deployments"
APPLY = {"Content-Type": "application/apply-patch+yaml"}
NO_CREATE = replace(RECONCILER_GRANT, verbs=tuple(v for v in RECONCILER_GRANT.verbs if v != "create"))


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "gco-inference"},
        "spec": {"replicas": 1},
    }


def test_an_apply_that_creates_needs_create_and_a_later_apply_needs_only_patch() -> None:
    """As the API server authorizes a server-side apply: `patch`, and `create` too when the object
    does not exist. A grant without `create` is refused the first apply, with the Forbidden that
    `withAuthorization` writes, and nothing is stored; once the object exists the same apply passes."""
    path = f"{DEPLOYMENTS}/llama"
    with (
        StandInKubeAPI(grant=NO_CREATE, namespaces=["gco-inference"]) as api,
        httpx.Client(base_url=api.url, headers={"Authorization": "Bearer t", **APPLY}) as http,
    ):
        first = http.patch(path, params={"fieldManager": "gco"}, json=deployment("llama"))
        assert first.status_code == 403
        assert first.json()["message"] == 'deployments.apps "llama" is forbidden: '
        assert first.json()["details"] == {"group": "apps", "kind": "deployments", "name": "llama"}
        assert [(a.verb, a.name) for a in api.forbidden] == [("create", "llama")]
        assert api.get(DEPLOYMENT, "gco-inference", "llama") is None
        api.apply_as("operator", deployment("llama"))  # someone allowed to create it did
        later = http.patch(path, params={"fieldManager": "gco"}, json=deployment("llama"))
        assert later.status_code == 200
        assert len(api.forbidden) == 1


def test_a_reconciler_without_create_cannot_start_a_region(store: EndpointStore) -> None:
    """The Roles as they were before `create`: in a new cluster the proxy's first object is refused,
    so the proxy never exists (in EKS: an empty target group, every invoke a 503)."""
    with StandInKubeAPI(grant=NO_CREATE) as api:
        with pytest.raises(ClusterAuthError, match=r'configmaps "inference-proxy-conf" is forbidden: $'):
            build(api, store).ensure_system()
        assert {k for k in keys(api) if k[0] != "Namespace"} == set()
        assert [(a.verb, a.namespace) for a in api.forbidden] == [("create", "gco-system")]


def test_the_shipped_grant_creates_the_proxy_and_a_new_endpoint_from_nothing(
    api: StandInKubeAPI, store: EndpointStore
) -> None:
    """A cluster with only `default` and `kube-system`: the namespaces, the proxy and every object of
    an endpoint are created by apply, each authorized as `create` and `patch`, none refused."""
    spec = {
        **SPEC,
        "autoscaling": {"enabled": True, "max_replicas": 3, "metrics": [{"type": "gpu", "target": 60}]},
    }
    store.create("llama", spec, [EAST])
    assert build(api, store).reconcile("llama").kind == "done"
    assert api.forbidden == []
    kinds = {o["kind"] for o in api.endpoint_objects()}
    assert {"Deployment", "Service", "ScaledObject", "Ingress"} <= kinds
    assert keys(api) >= PROXY


@pytest.mark.parametrize(
    ("method", "path", "params", "verb", "resource"),
    [
        (
            "GET",
            "/apis/apps/v1/namespaces/gco-inference/deployments",
            {"watch": "true"},
            "watch",
            "deployments",
        ),
        (
            "DELETE",
            "/apis/apps/v1/namespaces/gco-inference/deployments",
            {},
            "deletecollection",
            "deployments",
        ),
        (
            "GET",
            "/apis/apps/v1/namespaces/gco-inference/deployments/llama/status",
            {},
            "get",
            "deployments/status",
        ),
        (
            "PUT",
            "/apis/apps/v1/namespaces/gco-inference/deployments/llama/scale",
            {},
            "update",
            "deployments/scale",
        ),
        ("PUT", "/apis/apps/v1/namespaces/gco-inference/deployments/llama", {}, "update", "deployments"),
        ("POST", "/api/v1/namespaces", {}, "create", "namespaces"),
        ("GET", "/api/v1/namespaces", {}, "list", "namespaces"),
    ],
)
def test_each_request_is_authorized_by_its_own_verb(
    api: StandInKubeAPI, method: str, path: str, params: dict[str, str], verb: str, resource: str
) -> None:
    """Verbs as the request-info resolver names them; a subresource is `plural/subresource`; the
    namespaces' `resourceNames` rule grants neither a list nor a POST create (no name)."""
    with httpx.Client(base_url=api.url, headers={"Authorization": "Bearer t"}) as http:
        answer = http.request(method, path, params=params, content=b"{}")
    assert answer.status_code == 403
    assert f'cannot {verb} resource "{resource}"' in answer.json()["message"]
    assert [(a.verb, a.rbac_resource) for a in api.forbidden] == [(verb, resource)]


def test_an_authorized_request_the_stand_in_does_not_serve_is_405() -> None:
    """A grant that allows a watch: authorized, then answered 405 (the stand-in serves no watches)."""
    watcher = replace(RECONCILER_GRANT, verbs=(*RECONCILER_GRANT.verbs, "watch"))
    with (
        StandInKubeAPI(grant=watcher, namespaces=["gco-inference"]) as api,
        httpx.Client(base_url=api.url, headers={"Authorization": "Bearer t"}) as http,
    ):
        answer = http.get(DEPLOYMENTS, params={"watch": "1"})
    assert (answer.status_code, api.forbidden) == (405, [])


def test_the_reconciler_stays_within_its_grant(api: StandInKubeAPI, store: EndpointStore) -> None:
    reconciler = build(api, store)
    store.create("llama", SPEC, [EAST])
    assert reconciler.reconcile("llama").kind == "done"
    assert sweep(reconciler).done == 1
    assert api.forbidden == []
    assert ("Deployment", "gco-inference", "llama") in keys(api)


def test_an_all_namespace_list_fails_under_enforcement(
    api: StandInKubeAPI, store: EndpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The list the reconciler made before it had a grant (every kind, cluster-wide) is refused."""
    reconciler = build(api, store)
    reconciler.ensure_system()
    store.create("llama", SPEC, [EAST])
    monkeypatch.setattr(Kind, "collection", lambda self, namespace=None: f"{self.prefix}/{self.plural}")
    with pytest.raises(ClusterAuthError, match="cannot list resource"):
        reconciler.reconcile("llama")
    assert api.forbidden[0].namespace is None


def test_namespaces_and_proxy_are_applied_once_and_outlive_every_endpoint(
    api: StandInKubeAPI, store: EndpointStore
) -> None:
    reconciler = build(api, store)
    assert api.namespaces() == ["default", "kube-system"]
    assert set(reconciler.ensure_system().applied) == {
        "Namespace /gco-inference",
        "Namespace /gco-system",
        "ConfigMap gco-system/inference-proxy-conf",
        "Deployment gco-system/inference-proxy",
        "Service gco-system/inference-proxy",
        "HorizontalPodAutoscaler gco-system/inference-proxy-hpa",
        "NetworkPolicy gco-inference/gco-default-deny",
        "NetworkPolicy gco-inference/gco-no-instance-metadata",
        *(shard_name(shard) for shard in range(SHARDS)),  # every shard, empty
    }
    assert keys(api) >= PROXY
    writes = api.writes()
    assert reconciler.ensure_system().applied == []  # as desired: reads only
    assert api.writes() == writes
    canary = {**SPEC, "replicas": 2, "canary": {"image": IMAGE, "weight": 30, "replicas": 1}}
    record = store.create("llama", canary, [EAST])
    assert reconciler.reconcile("llama").kind == "done"
    assert [(r["path"], r["canary_weight"]) for r in routes(api)] == [("/inference/llama", 30)]
    settled = api.writes()
    assert sweep(reconciler).done == 1
    assert api.writes() == settled  # a sweep over a settled Region writes nothing
    assert record is not None
    store.update_desired_state("llama", "deleted", expected_lifecycle_id=record.lifecycle_id)
    reconciler.reconcile("llama")
    assert store.get("llama") is None  # purged
    assert keys(api) == PROXY | {("Namespace", "", "default"), ("Namespace", "", "kube-system")}
    assert routes(api) == []


def test_a_route_refresh_reads_the_routes_and_the_shards_and_nothing_of_the_proxy(
    api: StandInKubeAPI, store: EndpointStore
) -> None:
    """A refresh whose changes are not known (no `RouteChanges`) rebuilds the shards: one list of the
    routes and one of the shards; the proxy's own objects do not depend on the routes and are left
    to the start and the sweep. (After a batch, the batch's own changes are merged without the
    lists: `test_route_refresh.py`.)"""
    reconciler = build(api, store)
    reconciler.ensure_system()
    reads, writes = api.requests["GET"], api.writes()
    reconciler.refresh_routes()
    assert (api.requests["GET"] - reads, api.writes() - writes) == (2, 0)
    assert reconciler.ensure_system().applied == []
    # the full check: namespaces, every proxy object (2 + 4) and the endpoint namespace's default
    # deny and refusal of the instance metadata, then the routes and the shards
    assert api.requests["GET"] - reads == 2 + 2 + 4 + 2 + 2


def test_missing_keda_is_a_terminal_status_not_a_retry(store: EndpointStore) -> None:
    spec = {
        **SPEC,
        "autoscaling": {"enabled": True, "max_replicas": 3, "metrics": [{"type": "gpu", "target": 60}]},
    }
    with StandInKubeAPI(crds=frozenset()) as api:
        reconciler = build(api, store)
        store.create("llama", spec, [EAST])
        first = reconciler.reconcile("llama")
        assert (first.kind, first.detail) == ("terminal", f"ScaledObject needs KEDA in {EAST}")
        record = store.get("llama")
        assert record is not None
        status = record.region_status[EAST]
        assert (status.state, status.error) == ("error", f"ScaledObject needs KEDA in {EAST}")
        again = reconciler.reconcile("llama")
        assert (again.kind, again.status_writes) == ("terminal", 0)
        assert api.forbidden == []


@pytest.mark.parametrize(
    ("metric", "present", "expected"),
    [
        ("gpu", frozenset({"metrics-server", "keda"}), "ScaledObject needs prometheus, dcgm-exporter"),
        ("queue_depth", frozenset({"metrics-server"}), "ScaledObject needs keda, prometheus"),
        ("cpu", frozenset({"keda"}), "HorizontalPodAutoscaler needs metrics-server"),
    ],
)
def test_an_addon_the_region_lacks_is_a_terminal_status_before_any_apply(
    api: StandInKubeAPI, store: EndpointStore, metric: str, present: frozenset[str], expected: str
) -> None:
    spec = {
        **SPEC,
        "autoscaling": {"enabled": True, "max_replicas": 3, "metrics": [{"type": metric, "target": 60}]},
    }
    cluster = KubeCluster(api.url, static_token("t"), retry=FAST, sleep=lambda _: None)
    reconciler = Reconciler(store, cluster, EAST, settings=RenderSettings(addons=present), wait=0.0)
    store.create("llama", spec, [EAST])
    outcome = reconciler.reconcile("llama")
    assert (outcome.kind, outcome.detail, outcome.applied) == ("terminal", f"{expected} in {EAST}", 0)
    record = store.get("llama")
    assert record is not None
    assert record.region_status[EAST].error == f"{expected} in {EAST}"
    assert keys(api) - PROXY <= {("Namespace", "", "default"), ("Namespace", "", "kube-system")}


def test_a_region_with_the_addons_serves_it(api: StandInKubeAPI, store: EndpointStore) -> None:
    spec = {
        **SPEC,
        "autoscaling": {"enabled": True, "max_replicas": 3, "metrics": [{"type": "cpu", "target": 60}]},
    }
    cluster = KubeCluster(api.url, static_token("t"), retry=FAST, sleep=lambda _: None)
    settings = RenderSettings(addons=frozenset({"metrics-server"}))
    store.create("llama", spec, [EAST])
    outcome = Reconciler(store, cluster, EAST, settings=settings, wait=0.0).reconcile("llama")
    assert outcome.kind != "terminal"
    assert ("HorizontalPodAutoscaler", "gco-inference", "llama") in keys(api)


def test_a_namespace_outside_the_grant_is_a_terminal_status(
    api: StandInKubeAPI, store: EndpointStore
) -> None:
    reconciler = build(api, store)
    store.create("llama", SPEC, [EAST], namespace="team-x")
    outcome = reconciler.reconcile("llama")
    assert outcome.kind == "terminal"
    record = store.get("llama")
    assert record is not None
    assert record.region_status[EAST].error == (
        f"namespace team-x is not granted to gco in {EAST} (granted: gco-inference)"
    )
    assert not any(o["metadata"].get("namespace") == "team-x" for o in api.objects())


def test_the_runner_reads_what_the_matrix_reads_and_any_write_is_refused(store: EndpointStore) -> None:
    """The matrix's reads with the runner's identity (its checks' gets and label lists, the inventory's
    set-based lists) are all allowed; an apply or a delete by that identity is refused 403."""
    with StandInKubeAPI(token="t", identities={"runner": RUNNER_IDENTITY}) as api:
        store.create("llama", SPEC, [EAST])
        assert build(api, store).reconcile("llama").kind == "done"
        record = store.get("llama")
        assert record is not None and record.lifecycle_id is not None
        runner = KubeCluster(
            api.url, static_token("runner"), grant=RUNNER_GRANT, retry=FAST, sleep=lambda _: None
        )
        deployment = runner.get(DEPLOYMENT, SYSTEM_NAMESPACE, PROXY_DEPLOYMENT)
        assert deployment is not None and runner.get(HPA, SYSTEM_NAMESPACE, PROXY_HPA) is not None
        assert {o["kind"] for o in runner.list({ENDPOINT_LABEL: "llama"})} >= {"Deployment", "Service"}
        assert checks.hpa_replicas(runner, "llama", record.lifecycle_id) == (0, 1)
        left = checks.leftovers({EAST: runner}, [record.lifecycle_id])
        assert "Deployment gco-inference/llama" in left[EAST]
        assert api.forbidden == []
        with pytest.raises(ClusterAuthError, match=f'User "{RUNNER_USER}" cannot patch resource'):
            runner.apply(deployment)
        with pytest.raises(ClusterAuthError, match=f'User "{RUNNER_USER}" cannot delete resource'):
            runner.delete([ObjectRef.of(deployment)])
        assert [(a.user, a.verb) for a in api.forbidden] == [(RUNNER_USER, "patch"), (RUNNER_USER, "delete")]
        assert api.get(DEPLOYMENT, SYSTEM_NAMESPACE, PROXY_DEPLOYMENT) is not None
        with httpx.Client(base_url=api.url, headers={"Authorization": "Bearer unknown"}) as http:
            assert http.get(f"/apis/apps/v1/namespaces/{SYSTEM_NAMESPACE}/deployments").status_code == 401


def test_a_model_source_outside_the_configured_prefixes_is_a_terminal_status(
    api: StandInKubeAPI, store: EndpointStore
) -> None:
    """The pods' Pod Identity role could not read it: refused before any apply, naming the prefixes;
    a source under them is served, its pods under the model reader service account."""
    cluster = KubeCluster(api.url, static_token("t"), retry=FAST, sleep=lambda _: None)
    settings = RenderSettings(model_sources=parse_prefixes(["s3://models/llama/"]))
    reconciler = Reconciler(store, cluster, EAST, settings=settings, wait=0.0)
    store.create("qwen", {**SPEC, "model_source": "s3://models/qwen/7b"}, [EAST])
    outcome = reconciler.reconcile("qwen")
    expected = "model_source: s3://models/qwen/7b is outside the model sources endpoint pods may read (s3://models/llama/)"
    assert (outcome.kind, outcome.detail, outcome.applied) == ("terminal", expected, 0)
    record = store.get("qwen")
    assert record is not None and record.region_status[EAST].error == expected
    store.create("llama", {**SPEC, "model_source": "s3://models/llama/8b"}, [EAST])
    assert reconciler.reconcile("llama").kind == "done"
    deployment = api.get(DEPLOYMENT, "gco-inference", "llama")
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == MODEL_SERVICE_ACCOUNT
