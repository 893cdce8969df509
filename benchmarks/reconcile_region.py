"""One Region of the write-to-applied benchmark, as its own process (`reconcile_latency.py` starts it).

As `gco local up` runs each Region in its own process (`gco.local.region.node`), and as AWS runs each
Region's reconciler in its own Lambda functions: the Region's reconciler and its stream poller (or
its 15 s polling sweep) run in this process, not the other Region's, the moto server's or the
writer's, and its stand-in API server in a child process of its own (`--standin process`, the
default: `gco.local.standin.process`; a real API server is another machine) or on a thread here
(`--standin thread`). With `--standin process`, the child also holds the Region's proxy pods
(`--proxy-pods`, default 2; `gco.local.region.proxied_standin`), whose projected volume the kubelet
refreshes every `--kubelet-sync-s` (EKS's default 60 s, or at once on the probe's annotation), and the
reconciler asks them through the pod proxy before it reports `running` (`PodProxyProbe`): the route
shards and the reachability probe are in the path, as in EKS. `--standin thread` has no proxy to ask.
On a machine shared with other work a Python process gets about one
runnable thread's share of the CPU whatever its thread count (the GIL), so one process for
everything measured the local stack's scheduling, not the reconciler.

Protocol, on stdout: one line `ready` once the Region serves (its namespaces and shared proxy
applied); then, when a Deployment exists for every one of the `--expect` endpoints (or at the
deadline), one JSON line: `{"created": {name: CLOCK_MONOTONIC seconds}, "cpu": seconds}` (the CPU
of this process and its stand-in's while it reconciled).
CLOCK_MONOTONIC is one clock for every process of the machine, so the writer compares its own
`time.monotonic()` with these.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gco import aws  # noqa: E402
from gco.endpoints import EndpointStore  # noqa: E402
from gco.env import ENDPOINT_URL_ENV  # noqa: E402
from gco.local.region import proxied_standin  # noqa: E402
from gco.local.region.environments import EnvironmentConfig, ExecutionEnvironments  # noqa: E402
from gco.local.region.poller import Handler, StreamPoller  # noqa: E402
from gco.local.region.reconcilers import LocalReconcilers  # noqa: E402
from gco.local.region.volume import KUBELET_SYNC_S  # noqa: E402
from gco.local.standin.process import StandInProcess  # noqa: E402
from gco.reconcile.handler import handle_stream_event  # noqa: E402
from gco.reconcile.kube_tokens import LOCAL_TOKEN  # noqa: E402
from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token  # noqa: E402
from gco.reconcile.objects import DEPLOYMENT  # noqa: E402
from gco.reconcile.proxy.proxy_probe import PodProxyProbe  # noqa: E402
from gco.reconcile.reconciler import Reconciler  # noqa: E402
from gco.reconcile.sweep import sweep  # noqa: E402
from gco.reconcile.throughput import STREAM_SETTINGS  # noqa: E402

LAMBDA_POLL = 0.25  # an event source mapping polls each shard about four times a second
SWEEP_INTERVAL = 15.0  # the peer's polling period
NAMESPACE = "gco-inference"


def endpoint_names(count: int) -> list[str]:
    """The names the writer creates, in order."""
    return [f"ep-{index:04d}" for index in range(count)]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Region:
    """The Region's reconciler over its stand-in API server: a child process (`process`), or a
    server thread in this process (`thread`, what the functional tests and `gco local up` run)."""

    def __init__(
        self,
        region: str,
        store: EndpointStore,
        endpoint_url: str,
        standin: str,
        proxy_pods: int = 2,
        kubelet_sync_s: float = KUBELET_SYNC_S,
        environments: int = 0,
    ) -> None:
        self.region = region
        self.local: LocalReconcilers | None = None
        self.api: StandInProcess | None = None
        self.kube: KubeCluster | None = None  # the process mode's client of the stand-in, closed on stop
        self.environments: ExecutionEnvironments | None = None
        self.poller: StreamPoller | None = None
        if standin == "thread":
            self.local = LocalReconcilers(store, [region], endpoint_url=endpoint_url, wait=0.0)
            self.reconciler = self.local.regions[region].reconciler
            return
        self.api = StandInProcess(
            token=LOCAL_TOKEN,
            module=proxied_standin.MODULE,
            extra=proxied_standin.arguments(proxy_pods, kubelet_sync_s),
        ).start()
        retry = RetryPolicy(attempts=6, base_delay=0.01, max_delay=0.1)
        self.kube = KubeCluster(self.api.url, static_token(LOCAL_TOKEN), timeout=2.0, retry=retry)
        probe = PodProxyProbe(self.kube) if proxy_pods else None
        self.reconciler = Reconciler(store, self.kube, region, probe=probe, wait=0.0)
        self.reconciler.ensure_system()
        streams = aws.client("dynamodbstreams", endpoint_url=endpoint_url)
        arn = store.client.describe_table(TableName=store.table_name)["Table"]["LatestStreamArn"]
        handler: Handler = lambda event, context: handle_stream_event(event, self.reconciler, context)  # noqa: E731
        if environments:  # each batch in flight in an environment process of its own, as in AWS
            url = self.api.url
            config = EnvironmentConfig(
                region, store.table_name, endpoint_url, url, LOCAL_TOKEN, bool(proxy_pods)
            )
            self.environments = handler = ExecutionEnvironments(config, environments).start()
        self.poller = StreamPoller(
            streams,
            arn,
            handler,
            region=region,
            batch_size=STREAM_SETTINGS.batch_size,
            parallelization=STREAM_SETTINGS.parallelization_factor,
        )

    def created_at(self) -> dict[tuple[str, str, str], float]:
        if self.local is not None:
            return self.local.regions[self.region].api.created_at
        assert self.api is not None
        return self.api.created_at(DEPLOYMENT.plural)

    def created_count(self) -> int:
        """How many endpoint Deployments exist (a number, not the list: the check once a second
        costs both sides next to nothing while the Region works)."""
        if self.local is not None:
            return sum(key[0] == DEPLOYMENT.plural and key[1] == NAMESPACE for key in self.created_at())
        assert self.api is not None
        return self.api.created_count(DEPLOYMENT.plural, NAMESPACE)

    def run_stream(self, stop: threading.Event) -> None:
        """As `LocalReconcilers.start`: the poller's lanes (`StreamPoller.run`), waiting LAMBDA_POLL
        only when nothing is in flight and a read found nothing."""
        if self.local is not None:
            self.local.start(poll_interval=LAMBDA_POLL, sweep_interval=3600.0)
            return
        assert self.poller is not None
        self.poller.run(stop, LAMBDA_POLL)

    def cpu_seconds(self) -> float:
        """CPU seconds of what runs this Region's reconciles: this process, its environments (if
        any) and its stand-in API server process (if any)."""
        used = cpu_seconds()
        if self.environments is not None:
            used += self.environments.cpu_seconds()
        if self.api is not None:
            used += self.api.cpu_seconds()
        return used

    def stop(self) -> None:
        if self.poller is not None:
            self.poller.close()
        if self.environments is not None:
            self.environments.close()
        if self.local is not None:
            self.local.stop()
        if self.kube is not None:
            self.kube.close()
        if self.api is not None:
            self.api.stop()


def run(
    region: str,
    endpoint_url: str,
    table: str,
    mode: str,
    standin: str,
    expect: int,
    deadline_s: float,
    proxy_pods: int = 2,
    kubelet_sync_s: float = KUBELET_SYNC_S,
    environments: int = 0,
) -> dict[str, object]:
    store = EndpointStore(aws.client("dynamodb", endpoint_url=endpoint_url), table)
    stop = threading.Event()
    in_processes = environments if mode == "stream" and standin == "process" else 0
    stack = Region(region, store, endpoint_url, standin, proxy_pods, kubelet_sync_s, in_processes)
    if mode == "stream":
        work = threading.Thread(target=stack.run_stream, args=(stop,), name=f"poller-{region}", daemon=True)
    else:

        def tick() -> None:
            while not stop.is_set():
                sweep(stack.reconciler)
                stop.wait(SWEEP_INTERVAL)

        work = threading.Thread(target=tick, name=f"sweep-{region}", daemon=True)
    work.start()
    print("ready", flush=True)
    started_cpu = stack.cpu_seconds()
    keys = {name: (DEPLOYMENT.plural, NAMESPACE, name) for name in endpoint_names(expect)}
    wanted = set(keys.values())
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        # A check costs CPU on both sides: not too often, and a count until the list can be complete.
        # The latencies are the stand-in's creation clocks, not when this loop sees them.
        time.sleep(0.05 if standin == "thread" else 1.0)
        if stack.created_count() >= len(keys) and wanted <= stack.created_at().keys():
            break
    used = stack.cpu_seconds() - started_cpu  # this process's, its environments' and its stand-in's
    created = stack.created_at()
    stop.set()
    work.join(timeout=300)
    stack.stop()
    return {"created": {name: created[key] for name, key in keys.items() if key in created}, "cpu": used}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--region", required=True)
    parser.add_argument("--endpoint-url", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--mode", choices=("stream", "sweep"), required=True)
    parser.add_argument("--standin", choices=("process", "thread"), default="process")
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--deadline", type=float, required=True, help="seconds to wait for every Deployment")
    parser.add_argument("--proxy-pods", type=int, default=2, help="ready proxy pods the probe asks (process)")
    parser.add_argument(
        "--kubelet-sync-s", type=float, default=KUBELET_SYNC_S, help="the proxy pods' kubelet sync period"
    )
    parser.add_argument(
        "--environments",
        type=int,
        default=0,
        help="stream mode with --standin process: the stream handler's execution environments, each a "
        "process (0: every batch on a thread of this process)",
    )
    args = parser.parse_args()
    os.environ.setdefault(ENDPOINT_URL_ENV, args.endpoint_url)
    result = run(
        *(args.region, args.endpoint_url, args.table, args.mode, args.standin, args.expect, args.deadline),
        *(args.proxy_pods, args.kubelet_sync_s, args.environments),
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
