"""Engines behind the stand-in over real HTTP: deploy, invoke in two Regions, scale, stop and start,
a killed engine replaced, delete leaving no process."""

from __future__ import annotations

import functools
import os
import signal
from typing import Any

import httpx
import pytest

from gco.endpoints import EndpointStore, operations
from gco.local.region import nginx
from gco.local.region.cluster import LocalClusters
from gco.local.region.nginx import NginxProxy, nginx_path
from gco.processes.proc import group_members
from gco.reconcile.objects import CONFIG_MAP, DEPLOYMENT, SYSTEM_NAMESPACE
from gco.reconcile.proxy.render_proxy import NGINX_CONF, PROXY_CONFIG, PROXY_DEPLOYMENT
from tests.functional.local.conftest import client, eventually
from tests.unit.reconcile.records import EAST, IMAGE, WEST

MODEL = "HuggingFaceTB/SmolLM2-135M"
REVISION = "a" * 40
SPEC: dict[str, Any] = {"image": IMAGE, "model_id": MODEL, "model_revision": REVISION}


def region_state(store: EndpointStore, name: str, region: str) -> tuple[str, int, int] | None:
    record = store.get(name, consistent_read=True)
    status = record.region_status.get(region) if record else None
    if status is None or record is None or status.lifecycle_id != record.lifecycle_id:
        return None
    return status.state, status.replicas_ready, status.replicas_desired


def running(store: EndpointStore, name: str, region: str, replicas: int) -> bool:
    return region_state(store, name, region) == ("running", replicas, replicas)


def stopped_in(store: EndpointStore, region: str) -> bool:
    return region_state(store, "smol", region) == ("stopped", 0, 0)


def engines(clusters: LocalClusters, region: str) -> list[int]:
    return clusters.kubelets[region].pids()


def invoke(
    clusters: LocalClusters, region: str, name: str, path: str, body: dict[str, Any]
) -> httpx.Response:
    with client(clusters) as http:
        return http.post(f"{clusters.invoke_urls()[region]}/{name}{path}", json=body)


def completion(clusters: LocalClusters, region: str) -> httpx.Response:
    """A completion from smol through the Region's proxy."""
    return invoke(
        clusters, region, "smol", "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 3}
    )


def test_deploy_invoke_scale_stop_start_replace_delete(store: EndpointStore, clusters: LocalClusters) -> None:
    store.create("smol", SPEC, [EAST, WEST])
    for region in (EAST, WEST):
        eventually(functools.partial(running, store, "smol", region, 1), f"smol running in {region}")
        # Running means a request through the Region's proxy reaches a ready replica: no retry.
        answer = completion(clusters, region)
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == MODEL
        assert answer.json()["choices"][0]["text"]
        models = client(clusters).get(f"{clusters.invoke_urls()[region]}/smol/v1/models").json()
        assert models["data"][0]["id"] == MODEL
        assert len(engines(clusters, region)) == 1

    operations.scale(store, "smol", 3)
    eventually(lambda: running(store, "smol", EAST, 3), "3 replicas")
    assert len(engines(clusters, EAST)) == 3
    operations.scale(store, "smol", 1)
    eventually(lambda: running(store, "smol", EAST, 1) and len(engines(clusters, EAST)) == 1, "back to 1")

    operations.stop(store, "smol")
    for region in (EAST, WEST):
        eventually(functools.partial(stopped_in, store, region), f"stopped in {region}")
        eventually(lambda r=region: not engines(clusters, r), f"no engine in {region}")  # type: ignore[misc]
    stopped = invoke(clusters, EAST, "smol", "/v1/completions", {"prompt": "x"})
    assert stopped.status_code == 503
    operations.start(store, "smol")
    eventually(lambda: running(store, "smol", WEST, 1), "started again")

    groups = engines(clusters, EAST) + engines(clusters, WEST)
    operations.delete(store, "smol")
    eventually(lambda: store.get("smol") is None, "purged")
    eventually(lambda: not engines(clusters, EAST) and not engines(clusters, WEST), "no engine left")
    eventually(lambda: not any(group_members(pgid) for pgid in groups), "every engine group gone")
    gone = lambda: invoke(clusters, EAST, "smol", "/v1/completions", {}).status_code == 404  # noqa: E731
    eventually(gone, "the route removed (the proxy reloaded)")


def test_killed_engine_is_unready_seen_and_replaced(store: EndpointStore, manual: LocalClusters) -> None:
    kubelet = manual.kubelets[EAST]

    def synced_running() -> bool:
        kubelet.sync()
        return running(store, "smol", EAST, 1)

    store.create("smol", SPEC, [EAST])
    eventually(synced_running, "smol running")
    (victim,) = kubelet.pids()
    os.killpg(victim, signal.SIGKILL)
    eventually(lambda: not group_members(victim), "the engine gone (a zombie until reaped)")
    kubelet.sync()  # the dead engine is seen gone: unready, waiting out its back-off
    assert kubelet.pids() == []
    (pod,) = kubelet.pods("gco-inference", "gco.dev/endpoint=smol")
    (container,) = pod["status"]["containerStatuses"]
    assert container["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert container["lastState"]["terminated"] == {"exitCode": 137, "signal": 9, "reason": "Error"}
    unready = eventually(
        lambda: region_state(store, "smol", EAST) == ("updating", 0, 1), "the reconciler sees it"
    )
    assert unready
    eventually(synced_running, "a replacement serves")
    answer = invoke(manual, EAST, "smol", "/v1/completions", {"prompt": "x", "max_tokens": 1})
    assert answer.status_code == 200


def test_an_engine_stays_ready_until_its_probe_fails_failure_threshold_times(
    store: EndpointStore, manual: LocalClusters
) -> None:
    """A stopped (SIGSTOP) engine answers no probe: its replica stays in its Service for the rendered
    `failureThreshold` - 1 failed probes, leaves it at the last, and is back on the next answer."""
    kubelet = manual.kubelets[EAST]

    def ready() -> bool:
        (pod,) = kubelet.pods("gco-inference", "gco.dev/endpoint=smol")
        return bool(pod["status"]["containerStatuses"][0]["ready"])

    def synced_running() -> bool:
        kubelet.sync()
        return running(store, "smol", EAST, 1)

    store.create("smol", SPEC, [EAST])
    eventually(synced_running, "smol running")
    (engine,) = kubelet.pids()
    deployment = kubelet.api.get(DEPLOYMENT, "gco-inference", "smol")
    assert deployment is not None
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    threshold = container["readinessProbe"]["failureThreshold"]
    assert threshold == 3
    os.killpg(engine, signal.SIGSTOP)
    try:
        for _ in range(threshold - 1):
            kubelet.sync()
            assert ready()
            assert kubelet.ready_urls("gco-inference", "smol")
        kubelet.sync()
        assert not ready()
        assert not kubelet.ready_urls("gco-inference", "smol")
    finally:
        os.killpg(engine, signal.SIGCONT)
    kubelet.sync()
    assert ready()


def test_tgi_engine_answers_its_protocol(store: EndpointStore, clusters: LocalClusters) -> None:
    store.create("tgi", {**SPEC, "framework": "tgi", "port": 8080}, [EAST])
    eventually(lambda: running(store, "tgi", EAST, 1), "tgi running")
    body = {"inputs": "hello", "parameters": {"do_sample": False, "max_new_tokens": 4}}
    answer = invoke(clusters, EAST, "tgi", "/generate", body)
    assert answer.status_code == 200 and answer.json()["generated_text"]
    info = client(clusters).get(f"{clusters.invoke_urls()[EAST]}/tgi/info").json()
    assert (info["model_id"], info["model_sha"]) == (MODEL, REVISION)


NEEDS_NGINX = pytest.mark.skipif(
    nginx_path() is None, reason="nginx is not installed (apt-get install -y nginx; .ci/run does this in CI)"
)


@NEEDS_NGINX
def test_a_route_change_reloads_nginx_in_place_and_leaves_the_proxy_deployment_alone(
    store: EndpointStore, clusters: LocalClusters
) -> None:
    """The proxy picks routes up without a restart or a rollout: the same nginx master serves every
    new route right after `running`, and the proxy's Deployment is never written for a route."""
    proxy = clusters.proxies[EAST]
    assert isinstance(proxy, NginxProxy)  # nginx is installed, and the proxy kind `auto` picks it
    api = clusters.reconcilers.regions[EAST].api
    before = api.get(DEPLOYMENT, SYSTEM_NAMESPACE, PROXY_DEPLOYMENT)
    assert before is not None
    masters = set()
    for name in ("first", "second"):
        store.create(name, SPEC, [EAST])
        eventually(functools.partial(running, store, name, EAST, 1), f"{name} running")
        body = {"model": MODEL, "prompt": "hi", "max_tokens": 3}
        assert invoke(clusters, EAST, name, "/v1/completions", body).status_code == 200
        masters.add(proxy.pid())
    assert len(masters) == 1 and None not in masters  # one nginx master throughout: reloaded, not restarted
    after = api.get(DEPLOYMENT, SYSTEM_NAMESPACE, PROXY_DEPLOYMENT)
    assert after is not None and after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


@NEEDS_NGINX
def test_nginx_adapts_its_configuration_again_only_when_the_config_map_changes(
    store: EndpointStore, clusters: LocalClusters, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sync loop asks for the files several times a second: with nothing changed, nothing is
    adapted again; a new resourceVersion of the rendered configuration is adapted (and served)."""
    proxy = clusters.proxies[EAST]
    assert isinstance(proxy, NginxProxy)
    store.create("first", SPEC, [EAST])
    eventually(functools.partial(running, store, "first", EAST, 1), "first running")
    adapted: list[str] = []
    real = nginx.local_conf

    def counted(rendered: str, **options: Any) -> str:
        adapted.append(rendered)
        return real(rendered, **options)

    monkeypatch.setattr(nginx, "local_conf", counted)
    with proxy._lock:  # the loop's own passes wait; these are the passes counted
        first = proxy.desired_files()
        assert proxy.desired_files() == first
    assert adapted == []  # the loop's earlier passes adapted everything; nothing changed since
    api = clusters.reconcilers.regions[EAST].api
    config = api.get(CONFIG_MAP, SYSTEM_NAMESPACE, PROXY_CONFIG)
    assert config is not None
    changed = config["data"][NGINX_CONF] + "# changed by the test\n"
    api.apply_as("test", {**config, "data": {NGINX_CONF: changed}})
    with proxy._lock:
        files = proxy.desired_files()
    assert adapted == [changed] and files[NGINX_CONF].endswith("# changed by the test\n")
