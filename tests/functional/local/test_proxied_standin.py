"""A Region's stand-in process with its proxy pods (`gco.local.region.proxied_standin`): the
reconciler's probe asks the pods through the pod proxy, a pod answers from the shards its kubelet
last mounted, and an endpoint is `running` only once every pod serves its route, which the probe's
annotation makes happen at once rather than after the kubelet's 60 s sync."""

from __future__ import annotations

from typing import Any

from gco.endpoints import EndpointStore
from gco.local.region import proxied_standin
from gco.local.standin.process import StandInProcess
from gco.reconcile.kube_tokens import LOCAL_TOKEN
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
from gco.reconcile.objects import POD, SYSTEM_NAMESPACE
from gco.reconcile.proxy.proxy_probe import PodProxyProbe
from gco.reconcile.proxy.render_proxy import proxy_labels
from gco.reconcile.proxy.routes import STATUS_PORT, STATUS_ROUTE_PATH
from gco.reconcile.reconciler import Reconciler
from tests.unit.reconcile.records import EAST, IMAGE

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "m"}
RETRY = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05)


def test_the_probe_asks_the_proxy_pods_of_a_standin_process(store: EndpointStore) -> None:
    extra = proxied_standin.arguments(proxy_pods=2, kubelet_sync_s=60.0)
    with StandInProcess(token=LOCAL_TOKEN, module=proxied_standin.MODULE, extra=extra) as api:
        cluster = KubeCluster(api.url, static_token(LOCAL_TOKEN), timeout=5.0, retry=RETRY)
        try:
            pods = cluster.list_in(POD, SYSTEM_NAMESPACE, proxy_labels())
            assert [pod["metadata"]["name"] for pod in pods] == proxied_standin.proxy_pod_names(2)
            reconciler = Reconciler(store, cluster, EAST, probe=PodProxyProbe(cluster), wait=5.0, poll=0.05)
            reconciler.ensure_system()
            # Mounted before any route existed: within its 60 s sync a pod answers from that copy.
            assert (
                cluster.proxy_get(
                    SYSTEM_NAMESPACE, pods[0]["metadata"]["name"], STATUS_PORT, STATUS_ROUTE_PATH + "chat"
                )[0]
                == 404
            )
            store.create("chat", SPEC, [EAST])
            asked = api.requests()["GET"]
            assert reconciler.reconcile("chat").kind == "done"
            record = store.get("chat")
            assert record is not None and record.region_status[EAST].state == "running"
            for name in proxied_standin.proxy_pod_names(2):  # each pod serves the route now
                code, body = cluster.proxy_get(
                    SYSTEM_NAMESPACE, name, STATUS_PORT, STATUS_ROUTE_PATH + "chat"
                )
                assert code == 200 and body.strip()
            assert api.requests()["GET"] > asked
        finally:
            cluster.close()
