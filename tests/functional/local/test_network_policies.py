"""NetworkPolicies enforced on the local stack: the reconciler applies them, and the Service network
relays to an endpoint's engines only what they admit (the proxy), refusing any other pod; a pod
that no endpoint policy selects is shut by the namespace's default deny."""

from __future__ import annotations

from typing import Any

import httpx

from gco.endpoints import EndpointStore
from gco.local.region.cluster import LocalClusters
from gco.local.standin.network_policy import Peer, Port
from gco.reconcile.objects import NETWORK_POLICY
from gco.reconcile.proxy.render_proxy import proxy_labels
from gco.reconcile.render_network import DEFAULT_DENY
from tests.functional.local.conftest import eventually
from tests.functional.local.test_engines import SPEC, invoke, running
from tests.unit.reconcile.records import EAST

NAMESPACE = "gco-inference"
BODY: dict[str, Any] = {"prompt": "x", "max_tokens": 1}


def direct(manual: LocalClusters, source: Peer) -> httpx.Response:
    """A completion sent straight to the endpoint's Service, as a pod `source` would send it."""
    address = manual.services[EAST].address(NAMESPACE, "smol", source=source)
    return httpx.post(f"http://{address}/v1/completions", json=BODY, timeout=30)


def test_only_the_proxy_reaches_an_endpoints_engines_and_the_default_deny_holds_without_its_policy(
    store: EndpointStore, manual: LocalClusters
) -> None:
    kubelet, api = manual.kubelets[EAST], manual.reconcilers.regions[EAST].api

    def synced_running() -> bool:
        kubelet.sync()
        return running(store, "smol", EAST, 1)

    store.create("smol", SPEC, [EAST])
    eventually(synced_running, "smol running")
    assert api.get(NETWORK_POLICY, NAMESPACE, DEFAULT_DENY) is not None
    assert api.get(NETWORK_POLICY, NAMESPACE, "smol") is not None
    assert invoke(manual, EAST, "smol", "/v1/completions", BODY).status_code == 200  # through the proxy
    assert direct(manual, Peer("gco-system", proxy_labels())).status_code == 200
    for intruder in (Peer("default", {"app": "curl"}), Peer(NAMESPACE, {"gco.dev/endpoint": "other"})):
        refused = direct(manual, intruder)
        assert refused.status_code == 504 and "NetworkPolicy" in refused.json()["error"]["message"]

    # The namespace's default deny alone (the endpoint's policy aside) admits not even the proxy: what
    # the Service network asks the stand-in, with the policies as stored.
    deny = api.get(NETWORK_POLICY, NAMESPACE, DEFAULT_DENY)
    assert deny is not None and deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    pod = Peer(NAMESPACE, {"gco.dev/endpoint": "smol", "gco.dev/role": "server"})
    assert api.admits(pod, Port(name="http"), Peer("gco-system", proxy_labels()))
    assert not api.admits(
        Peer(NAMESPACE, {"gco.dev/endpoint": "unpolicied"}),
        Port(name="http"),
        Peer("gco-system", proxy_labels()),
    )
