"""Reconciler latency and cost on the embedded stack (moto server + stand-in API servers).

Prints, for one run:
0. the cost of one reconcile of a new endpoint here (time, DynamoDB and API-server calls);
1. for each size, write-to-applied p50/p99 of the stream-triggered path against the same
   reconciler driven only by a 15-second polling sweep (the design of the best-known peer),
   same workload, and the ratio;
2. the stream handler's cold import time (`python -X importtime`, target < 300 ms);
3. the sweep time for 1,000 endpoints x 3 Regions (target < 10 s), with the DynamoDB and
   Kubernetes writes of a sweep over unchanged endpoints (target 0);
4. delete-to-purge time for one endpoint in 2 Regions over the stream (target < 5 s locally).

    .venv/bin/python benchmarks/reconcile_latency.py                            # 40 endpoints x 2 Regions
    .venv/bin/python benchmarks/reconcile_latency.py --endpoints 40,200,1000    # each size in turn

The last line is `worst p99 ratio: X`, the smallest p99 ratio (polling / stream) over the sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.reconcile_region import LAMBDA_POLL, endpoint_names  # noqa: E402
from gco import aws  # noqa: E402
from gco.endpoints import EndpointStore, init_table  # noqa: E402
from gco.env import ENDPOINT_URL_ENV, HOME_REGION_ENV  # noqa: E402
from gco.local.moto.motoserver import MotoServer  # noqa: E402
from gco.local.region.reconcilers import LocalReconcilers  # noqa: E402
from gco.reconcile.objects import FIELD_MANAGER  # noqa: E402
from gco.reconcile.render import render  # noqa: E402
from gco.reconcile.sweep import sweep  # noqa: E402
from gco.reconcile.throughput import STREAM_SETTINGS  # noqa: E402

REGION_WORKER = ROOT / "benchmarks" / "reconcile_region.py"

SPEC: dict[str, Any] = {"image": "vllm/vllm-openai:v0.6.3", "model_id": "meta-llama/Llama-3.1-8B-Instruct"}
REGIONS = ["us-east-1", "eu-west-1", "ap-northeast-1"]


class CountingClient:
    """A boto3 DynamoDB client that counts write calls."""

    WRITES = frozenset({"put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item"})

    def __init__(self, client: Any, *, count_all: bool = False) -> None:
        self._client = client
        self._count_all = count_all
        self.writes = 0
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name not in self.WRITES and not self._count_all:
            return method

        def counted(**kwargs: Any) -> Any:
            self.calls += 1
            self.writes += name in self.WRITES
            return method(**kwargs)

        return counted


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def fresh_store(moto: MotoServer, table: str) -> EndpointStore:
    client = aws.client("dynamodb", endpoint_url=moto.url)
    init_table(client, table)
    return EndpointStore(client, table)


PROXY_PODS = 2  # ready proxy pods each Region's reachability probe asks (`reconcile_region.py`)


def start_region(
    moto: MotoServer,
    table: str,
    region: str,
    mode: str,
    standin: str,
    expect: int,
    deadline: float,
    environments: int = 0,
) -> subprocess.Popen[str]:
    """One Region's process (`reconcile_region.py`), returned once it serves (its environments, if
    any, started)."""
    process = subprocess.Popen(
        [
            *(sys.executable, str(REGION_WORKER), "--region", region, "--endpoint-url", moto.url),
            *("--table", table, "--mode", mode, "--expect", str(expect), "--deadline", str(deadline)),
            *("--standin", standin, "--proxy-pods", str(PROXY_PODS if standin == "process" else 0)),
            *("--environments", str(environments)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if line != "ready":
        process.kill()
        raise RuntimeError(f"the {region} process did not start (said {line!r})")
    return process


@dataclass(frozen=True)
class Applied:
    """One write-to-applied run: each write's latency, the Regions' CPU seconds, and how long the
    writes took (the writer shares the machine: under load it falls behind its planned window, and
    offers the Regions less than the planned rate)."""

    latencies: list[float]
    cpu: float
    wrote_s: float


def write_to_applied(
    moto: MotoServer,
    endpoints: int,
    window: float,
    mode: str,
    standin: str,
    writers: int = 1,
    environments: int = 0,
) -> Applied:
    """Latency from each create() to its Deployment existing in every Region's cluster, and the CPU
    seconds the Regions' processes spent meanwhile. Each Region runs in its own process, as in
    `gco local up` and in AWS (`reconcile_region.py`); in stream mode its handler runs in
    `environments` processes of its own (0: on the Region process's threads). `writers` threads
    write, each write at its planned time (1: one after the other, each waiting for the last)."""
    table = f"latency-{mode}-{endpoints}"
    store = fresh_store(moto, table)
    regions = REGIONS[:2]
    deadline = window + 1800.0  # the polling baseline at 1,000 endpoints on a loaded machine: minutes
    processes = [
        start_region(moto, table, region, mode, standin, endpoints, deadline, environments)
        for region in regions
    ]
    written: dict[str, float] = {}
    gap = window / endpoints

    def write(name: str) -> None:
        written[name] = time.monotonic()  # one key per thread: a dict's item assignment is atomic
        store.create(name, SPEC, regions)

    start = time.monotonic()
    # Each write starts at its planned time however long the ones before take: one writer thread
    # alone falls behind whenever the moto server (which applies one write at a time) is busy with
    # the Regions' status writes, and then offers the Regions less than the planned rate.
    with ThreadPoolExecutor(max_workers=writers, thread_name_prefix="writer") as pool:
        futures = []
        for index, name in enumerate(endpoint_names(endpoints)):
            delay = start + index * gap - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(write, name))
        for future in futures:
            future.result()
    wrote_s = time.monotonic() - start
    results = []
    for process in processes:
        out, _ = process.communicate(timeout=deadline + 300)
        results.append(json.loads(out.strip().splitlines()[-1]))
    latencies = []
    for name, at in written.items():
        times = [result["created"].get(name) for result in results]
        if all(value is not None for value in times):
            latencies.append(max(float(value) for value in times if value is not None) - at)
    return Applied(latencies, sum(float(result["cpu"]) for result in results), wrote_s)


BASELINE = (
    "import boto3, httpx, pydantic\n"
    "from aws_lambda_powertools import Logger, Metrics, Tracer\n"
    "from aws_lambda_powertools.utilities.batch import BatchProcessor\n"
    "Tracer(service='x')"
)


def cold_import_ms(code: str = "import reconciler", runs: int = 5) -> dict[str, float]:
    """Minimum over runs of the cumulative import time of each top-level module `code` imports."""
    best: dict[str, float] = {}
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "1", "PYTHONPATH": str(ROOT)}
    for _ in range(runs):
        result = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", code],
            cwd=ROOT / "lambdas",
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        total: dict[str, float] = {}
        started = False  # the interpreter's own start-up imports end with `site`
        for line in result.stderr.splitlines():
            match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S+)$", line)  # top level: no indent
            if match and started:
                total[match.group(2)] = int(match.group(1)) / 1000
            started = started or bool(match and match.group(2) == "site")
        whole = sum(total.values())
        if whole < sum(best.values()) or not best:
            best = total
    return best


def settled_sweep(moto: MotoServer, endpoints: int, regions: list[str]) -> tuple[float, int, int]:
    """Seed `endpoints` settled endpoints in every Region, then time one sweep per Region."""
    store = fresh_store(moto, "sweep")
    with LocalReconcilers(store, regions, endpoint_url=moto.url, wait=0.0) as stack:
        with ThreadPoolExecutor(8) as pool:
            records = list(pool.map(lambda i: store.create(f"ep-{i:04d}", SPEC, regions), range(endpoints)))

            def settle(record: Any) -> None:
                for region in regions:
                    for obj in render(record, region):
                        stack.regions[region].api.apply_as(FIELD_MANAGER, obj)
                    store.region_writes.update_region_status(
                        record.endpoint_name,
                        region,
                        "running",
                        replicas_ready=1,
                        replicas_desired=1,
                        expected_lifecycle_id=record.lifecycle_id,
                        expected_region_generation=record.region_generations[region],
                    )

            list(pool.map(settle, records))
        for region in regions:  # the proxy's route table now names every endpoint: settled too
            stack.regions[region].reconciler.ensure_system()
        counting = CountingClient(store.client)
        store.client = counting
        kube_before = sum(stack.regions[r].api.writes() for r in regions)
        times = []
        for region in regions:  # one reconciler per Region; in AWS they run in parallel
            started = time.monotonic()
            report = sweep(stack.regions[region].reconciler)
            times.append(time.monotonic() - started)
            assert report.done == endpoints, report.as_dict()
        kube_writes = sum(stack.regions[r].api.writes() for r in regions) - kube_before
        stack.stop()
    return max(times), counting.writes, kube_writes


def delete_to_purge(moto: MotoServer, repeats: int) -> list[float]:
    store = fresh_store(moto, "purge")
    regions = REGIONS[:2]
    results = []
    with LocalReconcilers(store, regions, endpoint_url=moto.url, wait=2.0, poll=0.02) as stack:
        stack.start(poll_interval=LAMBDA_POLL, sweep_interval=3600.0)
        for index in range(repeats):
            name = f"purge-{index}"
            record = store.create(name, SPEC, regions)
            for _ in range(600):
                current = store.get(name)
                if (
                    current
                    and all(s.state == "running" for s in current.region_status.values())
                    and len(current.region_status) == len(regions)
                ):
                    break
                time.sleep(0.02)
            started = time.monotonic()
            store.update_desired_state(name, "deleted", expected_lifecycle_id=record.lifecycle_id)
            for _ in range(3000):
                if store.get(name) is None:
                    break
                time.sleep(0.01)
            results.append(time.monotonic() - started)
        stack.stop()
    return results


def reconcile_cost(moto: MotoServer, endpoints: int) -> tuple[float, float, float]:
    """One Region, new endpoints reconciled one at a time: mean seconds, DynamoDB and API calls each."""
    store = fresh_store(moto, "cost")
    with LocalReconcilers(store, REGIONS[:1], endpoint_url=moto.url, wait=0.0) as stack:
        local = stack.regions[REGIONS[0]]
        for index in range(endpoints):
            store.create(f"cost-{index:04d}", SPEC, REGIONS[:1])
        counting = CountingClient(store.client, count_all=True)
        store.client = counting
        kube_before = sum(local.api.requests.values())
        started = time.monotonic()
        for index in range(endpoints):
            local.reconciler.reconcile_many([f"cost-{index:04d}"], wait=0.0)
        seconds = (time.monotonic() - started) / endpoints
        kube = (sum(local.api.requests.values()) - kube_before) / endpoints
        stack.stop()
    return seconds, counting.calls / endpoints, kube


def parse_sizes(raw: str) -> list[int]:
    try:
        sizes = [int(part) for part in raw.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--endpoints: {raw!r} is not a comma-separated list of counts"
        ) from None
    if not sizes or any(size < 1 or size > 5000 for size in sizes):
        raise argparse.ArgumentTypeError("--endpoints: each count must be from 1 to 5000")
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="sizes 40,200,1000 (default 40)")
    parser.add_argument(
        "--endpoints", type=parse_sizes, help="comma-separated endpoint counts of the latency workload"
    )
    parser.add_argument("--window", type=float, default=15.0, help="seconds over which the writes are spread")
    parser.add_argument(
        "--sweep-endpoints", type=int, default=1000, help="endpoints of the sweep measurement"
    )
    parser.add_argument("--purges", type=int, default=5)
    parser.add_argument(
        "--standin",
        choices=("process", "thread"),
        default="process",
        help="each Region's stand-in API server in its own process (default) or on a thread of the Region's",
    )
    parser.add_argument(
        "--writers",
        type=int,
        default=16,
        help="threads that write the endpoints, each write at its planned time (1: one after the other)",
    )
    parser.add_argument(
        "--environments",
        type=int,
        default=0,
        help="with --standin process: the stream handler's Lambda execution environments per Region, each a "
        f"process, as in AWS ({STREAM_SETTINGS.parallelization_factor}: the mapping's batches in flight per "
        "shard); 0 (default): every batch on a thread of the Region's process",
    )
    parser.add_argument(
        "--latency-only", action="store_true", help="only write-to-applied (no import, sweep, purge, cost)"
    )
    args = parser.parse_args()
    sizes = args.endpoints or ([40, 200, 1000] if args.full else [40])
    with MotoServer() as moto:
        os.environ.update(
            {ENDPOINT_URL_ENV: moto.url}, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench"
        )
        os.environ.setdefault(HOME_REGION_ENV, "us-east-1")
        if not args.latency_only:
            extras(moto, args)
        print(
            f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())} ({os.cpu_count()} CPUs)"
        )
        ratios = []
        if args.standin == "process":
            print(
                f"each Region: its stand-in API server and {PROXY_PODS} proxy pods in a process of their own;"
                " route shards, the kubelet's volume refresh (60 s, or at once when the probe annotates"
                " a pod) and the reachability probe in the path"
            )
            print(
                f"the stream handler: {args.environments} Lambda execution environments per Region,"
                " each a process"
                if args.environments
                else "the stream handler: on the Region process's threads (one interpreter for every batch)"
            )
        for endpoints in sizes:
            print(f"workload: {endpoints} endpoints x 2 Regions, writes spread over {args.window:.0f} s")
            runs: dict[str, list[float]] = {}
            for mode, label in (("stream", "stream-triggered"), ("sweep", "15 s polling sweep")):
                moto_before = moto.cpu_seconds()
                run = write_to_applied(
                    moto, endpoints, args.window, mode, args.standin, args.writers, args.environments
                )
                moto_after = moto.cpu_seconds()
                values = runs[mode] = run.latencies
                print(  # each row as soon as it is measured: the polling run at 1,000 takes minutes
                    f"  write-to-applied {label:>19}: p50 {percentile(values, 50):7.3f} s"
                    f"  p99 {percentile(values, 99):7.3f} s  (n={len(values)}; Regions' CPU {run.cpu:.1f} s;"
                    f" the writes took {run.wrote_s:.1f} s)",
                    flush=True,
                )
                if moto_before is not None and moto_after is not None:
                    print(f"    moto server's CPU meanwhile: {moto_after - moto_before:.1f} s", flush=True)
            stream, polled = runs["stream"], runs["sweep"]
            ratio = percentile(polled, 99) / percentile(stream, 99)
            ratios.append(ratio)
            print(
                f"  ratio sweep/stream: p50 {percentile(polled, 50) / percentile(stream, 50):6.1f}x"
                f"  p99 {ratio:6.1f}x"
            )
        print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
        print(f"worst p99 ratio: {min(ratios):.1f}")


def extras(moto: MotoServer, args: argparse.Namespace) -> None:
    """The measurements besides write-to-applied: reconcile cost, cold import, sweep, purge."""
    seconds, ddb_calls, kube_calls = reconcile_cost(moto, 40)
    print(
        f"one reconcile of a new endpoint here: {seconds * 1000:.0f} ms, {ddb_calls:.1f} DynamoDB calls,"
        f" {kube_calls:.1f} API-server calls (the cost model: docs/scale.md)"
    )
    handler = sum(cold_import_ms().values())
    baseline = sum(cold_import_ms(BASELINE).values())
    endpoints_models = sum(cold_import_ms("import gco.endpoints.record").values())
    print(f"cold import of lambdas/reconciler.py: {handler:.0f} ms (min of 5; target < 300 ms)")
    print(
        f"  boto3+httpx+pydantic+Powertools (Logger, Metrics, Tracer, batch) alone: {baseline:.0f} ms;"
        f" gco.endpoints alone: {endpoints_models:.0f} ms"
    )
    seconds, ddb_writes, kube_writes = settled_sweep(moto, args.sweep_endpoints, REGIONS)
    print(
        f"sweep of {args.sweep_endpoints} settled endpoints x 3 Regions: {seconds:.2f} s per Region"
        " (slowest; target < 10 s)"
    )
    print(f"  writes during that sweep: DynamoDB {ddb_writes}, Kubernetes {kube_writes} (target 0)")
    purges = delete_to_purge(moto, args.purges)
    print(
        f"delete-to-purge, 1 endpoint x 2 Regions: median {statistics.median(purges):.2f} s,"
        f" max {max(purges):.2f} s over {len(purges)} (target < 5 s; the peer's 2-3 ticks: 30-45 s)"
    )


if __name__ == "__main__":
    main()
