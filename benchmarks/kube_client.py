"""The Kubernetes client's CPU per request: `KubeCluster` (urllib3) against httpx, the same requests.

One stand-in API server in a process of its own (`gco.local.standin.process`); in this process, for
each client in turn (alternated over `--rounds`), `--requests` of each request kind the reconciler
sends most: a GET of a name that is not there (`ownership.claim`), a set-based list of 40 endpoints'
objects (a batch's observation) and a server-side apply. Printed: this process's CPU per request
(`time.process_time`, so another process's load moves it little) and the server's, each client's
median over the rounds, and the ratio httpx / KubeCluster. httpx is what `KubeCluster` used before;
the comparison client is built as that one was (one `httpx.Client`, keep-alive pool of 64).

    .venv/bin/python benchmarks/kube_client.py [--requests 300] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from gco.local.standin.process import StandInProcess  # noqa: E402
from gco.reconcile.kube_tokens import LOCAL_TOKEN  # noqa: E402
from gco.reconcile.kubeapi import MAX_CONNECTIONS, KubeCluster, RetryPolicy, static_token  # noqa: E402
from gco.reconcile.objects import CONFIG_MAP, DEPLOYMENT, ENDPOINT_LABEL, FIELD_MANAGER, set_selector  # noqa: E402

NAMESPACE = "gco-inference"
BATCH = [f"ep-{index:04d}" for index in range(40)]


def config_map(index: int) -> dict[str, Any]:
    """An object the reconciler's grant may apply in the stand-in (in the system namespace)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"bench-{index % 50}",
            "namespace": "gco-system",
            "labels": {"bench": "kube-client"},
        },
        "data": {"routes": "x" * 400},
    }


def kube_requests(cluster: KubeCluster) -> dict[str, Callable[[int], object]]:
    selector = set_selector(ENDPOINT_LABEL, BATCH)
    return {
        "get (absent)": lambda i: cluster.get(DEPLOYMENT, NAMESPACE, f"absent-{i}"),
        # one scope's list, as each of a batch's lists is (`list_any` sends one per scope at once)
        "list (40 endpoints)": lambda i: cluster._list_scope(NAMESPACE, DEPLOYMENT, selector),
        "apply": lambda i: cluster.apply(config_map(i)),
    }


def httpx_requests(client: httpx.Client) -> dict[str, Callable[[int], object]]:
    params = {"fieldManager": FIELD_MANAGER, "force": "true"}
    headers = {"Authorization": f"Bearer {LOCAL_TOKEN}", "Accept": "application/json"}
    apply_headers = {**headers, "Content-Type": "application/apply-patch+yaml"}
    return {
        "get (absent)": lambda i: client.get(
            DEPLOYMENT.path(NAMESPACE, f"absent-{i}"), headers=headers
        ).json(),
        "list (40 endpoints)": lambda i: client.get(
            DEPLOYMENT.collection(NAMESPACE),
            params={"labelSelector": set_selector(ENDPOINT_LABEL, BATCH), "limit": "500"},
            headers=headers,
        ).json(),
        "apply": lambda i: client.patch(
            CONFIG_MAP.path("gco-system", f"bench-{i % 50}"),
            params=params,
            content=json.dumps(config_map(i)).encode(),
            headers=apply_headers,
        ).json(),
    }


def measure(api: StandInProcess, work: Callable[[int], object], requests: int) -> tuple[float, float]:
    """(this process's, the server's) CPU milliseconds per request."""
    client, server = time.process_time(), api.cpu_seconds()
    for index in range(requests):
        work(index)
    return (time.process_time() - client) / requests * 1000, (api.cpu_seconds() - server) / requests * 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with StandInProcess(token=LOCAL_TOKEN) as api:
        cluster = KubeCluster(api.url, static_token(LOCAL_TOKEN), retry=RetryPolicy(attempts=1))
        for namespace in (NAMESPACE, "gco-system"):
            cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        limits = httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS)
        other = httpx.Client(base_url=api.url, limits=limits, timeout=10.0)
        clients = {"KubeCluster (urllib3)": kube_requests(cluster), "httpx": httpx_requests(other)}
        results: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            for client_name, kinds in clients.items():
                for kind, work in kinds.items():
                    results.setdefault((client_name, kind), []).append(measure(api, work, args.requests))
        cluster.close()
        other.close()
    print(f"{args.requests} requests of each kind per client per round, {args.rounds} rounds alternated")
    for kind in clients["httpx"]:
        row = {}
        for client_name in clients:
            values = results[(client_name, kind)]
            row[client_name] = (
                statistics.median(v[0] for v in values),
                statistics.median(v[1] for v in values),
            )
            client_ms, server_ms = row[client_name]
            print(f"  {kind:>20} {client_name:>22}: client {client_ms:6.3f} ms, server {server_ms:6.3f} ms")
        ratio = row["httpx"][0] / row["KubeCluster (urllib3)"][0]
        print(f"  {kind:>20} client CPU ratio httpx / KubeCluster: {ratio:.2f}x")


if __name__ == "__main__":
    main()
