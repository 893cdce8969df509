"""One Region of `gco local up`, as its own background process: `python -m gco.local.region.node`.

Runs `LocalClusters` for the Region (stand-in API server, reconciler with its stream poller and
sweep, engines, autoscaler, Service network and proxy) until SIGTERM, then stops every engine
and the proxy. With `--assembly`, the Region's reconciler and sweep are the synthesized app's
functions, run from their assets (gco.local.assembly.regional), their logs in `<R>/functions/`.
It reports to the stack's state directory:

- `region-<R>.json` once it serves: its pid, the proxy's and the API server's URLs, the proxy
  certificate;
- `region-<R>.children`: the process groups it started (engines, nginx), each leader's pid and
  start time (`RegionChildren`), rewritten as they change, so `gco local down` can stop them even
  when this process was killed, and only while each pid still names the process started;
- `region-<R>.faults.applied.json`: the faults `gco local fail-region` asked for and it applied
  (`gco.local.region.faults`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from gco import aws
from gco.endpoints import EndpointStore
from gco.local.assembly.deployed import RUNTIME_SDK_DIR, app_from_environment
from gco.local.processes import statefiles
from gco.local.processes.statefiles import NodeReport, RegionChildren
from gco.local.region import faults
from gco.local.region.cluster import LocalClusters
from gco.local.region.engines import ENGINE_KINDS, EngineTable
from gco.local.region.nginx import NginxProxy

log = logging.getLogger("gco.local.region.node")
REPORT_INTERVAL_S = 0.2
TLS_DIR_NAME = "tls"  # one certificate for every Region's proxy, made by `up` before they start


def report_path(state_dir: Path, region: str) -> Path:
    return state_dir / f"region-{region}.json"


def children_path(state_dir: Path, region: str) -> Path:
    return state_dir / f"region-{region}.children"


def children(clusters: LocalClusters) -> RegionChildren:
    """Process groups started for the Region: its engines and its nginx master, each as started."""
    groups = [group for kubelet in clusters.kubelets.values() for group in kubelet.groups()]
    for proxy in clusters.proxies.values():
        if isinstance(proxy, NginxProxy) and (group := proxy.group()) is not None:
            groups.append(group)
    return RegionChildren(groups=sorted(groups, key=lambda group: group.pid))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gco.local.region.node", description=__doc__)
    parser.add_argument("--region", required=True)
    parser.add_argument("--endpoint-url", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--home-region", required=True, help="Where the table and its stream live.")
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--engine", choices=ENGINE_KINDS, default="fake")
    parser.add_argument(
        "--assembly",
        type=Path,
        help="The synthesized app whose Regional functions reconcile (gco.local.assembly.deployed); "
        "without it, the source tree's reconciler in this process.",
    )
    parser.add_argument(
        "--evidence-bucket", help="With --assembly: where the rollout functions write evidence."
    )
    options = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    state: Path = options.state_dir
    dynamodb = aws.client("dynamodb", region=options.home_region, endpoint_url=options.endpoint_url)
    store = EndpointStore(dynamodb, options.table)
    app = None
    if options.assembly is not None:
        packages = state / RUNTIME_SDK_DIR  # made by `up` before the Regions start
        logs = state / options.region / "functions"
        app = app_from_environment(options.assembly, options.endpoint_url, logs, packages, os.environ)
    with LocalClusters(
        store,
        [options.region],
        endpoint_url=options.endpoint_url,
        log_dir=state / options.region,
        tls_dir=state / TLS_DIR_NAME,
        table=EngineTable.of_kind(options.engine),
        app=app,
        evidence_bucket=options.evidence_bucket,
    ) as clusters:
        clusters.start()
        local = clusters.reconcilers.regions[options.region]
        report = NodeReport(
            pid=os.getpid(),
            region=options.region,
            proxy_url=clusters.proxies[options.region].url,
            invoke_url=clusters.invoke_urls()[options.region],
            api_url=local.api.url,
            ca_bundle=str(clusters.ca_bundle) if clusters.ca_bundle else None,
            states_url=wing.states.url if (wing := clusters.reconcilers.rollouts) else None,
            rollout_machine=wing.machine_arn if wing else None,
        )
        statefiles.write(report_path(state, options.region), report)
        written: RegionChildren | None = None
        failed = faults.Faults()
        while not stop.wait(REPORT_INTERVAL_S):
            failed = faults.follow(clusters, options.region, state, failed)
            now = children(clusters)
            if now != written:
                statefiles.write(children_path(state, options.region), now)
                written = now
    children_path(state, options.region).unlink(missing_ok=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - the Region's background process
    sys.exit(main())
