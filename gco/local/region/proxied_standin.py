"""A Region's stand-in API server in its own process, with the Region's proxy pods beside it:
`python -m gco.local.region.proxied_standin --token T --proxy-pods N --kubelet-sync-s S`.

`gco.local.standin.process` serves the API alone; this adds what the reconciler's reachability probe
(`gco.reconcile.proxy.proxy_probe.PodProxyProbe`) asks in EKS: `N` ready proxy pods listed in the
system namespace, each answering its status port through the pod proxy from the route shards its
projected volume holds (`gco.local.region.volume.MountedShards`: as its kubelet last synced them,
every `S` seconds or at once when the pod is updated, as the probe's annotation does), exactly as the
local stack's proxy answers (`router.status_answer`). So a benchmark's Region has the route shards,
the kubelet's refresh and the probe in its path, with the API server and the pods' answers in a
process apart from the reconciler's, as a real cluster is another machine.

It does not model: nginx itself (the answer is the digest of the route the pod's copy of the shards
holds, what nginx would load from them, `proxy_conf.py`), a reload's own delay, or pods that become
unready.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gco.local.region.router import ShardReader, proxy_pod, status_answer
from gco.local.region.volume import KUBELET_SYNC_S, MountedShards
from gco.local.standin import StandInKubeAPI
from gco.local.standin.api import PodServer
from gco.local.standin.process import child_parser, main

MODULE = "gco.local.region.proxied_standin"
POD_PREFIX = "inference-proxy-"


def proxy_pod_names(count: int) -> list[str]:
    """The names of the `count` proxy pods the child registers."""
    return [f"{POD_PREFIX}{index}" for index in range(count)]


def arguments(proxy_pods: int, kubelet_sync_s: float = KUBELET_SYNC_S) -> list[str]:
    """This module's own arguments, for `StandInProcess(module=MODULE, extra=...)`."""
    return ["--proxy-pods", str(proxy_pods), "--kubelet-sync-s", str(kubelet_sync_s)]


def register_proxy_pods(api: StandInKubeAPI, count: int, kubelet_sync_s: float) -> None:
    """`count` ready proxy pods in `api`, each answering its status port from its own mounted shards."""
    for name in proxy_pod_names(count):
        api.register_pod(
            proxy_pod(name, ready=True),
            _status_port(ShardReader(api, MountedShards(api, name, sync_s=kubelet_sync_s))),
        )


def _status_port(reader: ShardReader) -> PodServer:
    """A pod's answers on its status port, from the shards `reader` reads (its mounted copy)."""

    def answer(port: int, path: str) -> tuple[int, str]:
        return status_answer(reader, port, path)

    return answer


def _setup(api: StandInKubeAPI, options: argparse.Namespace) -> None:
    register_proxy_pods(api, options.proxy_pods, options.kubelet_sync_s)


def run(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - runs as the child process
    parser = child_parser(f"python -m {MODULE}", __doc__)
    parser.add_argument("--proxy-pods", type=int, default=2)
    parser.add_argument("--kubelet-sync-s", type=float, default=KUBELET_SYNC_S)
    return main(argv, parser=parser, setup=_setup)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
