"""Failover through the global address: a Region failed in the middle of a constant stream of requests.

Starts `gco local up` (two Regions, the fake engine) in a temporary state directory, makes a key,
deploys one endpoint to both Regions and waits until both run it. Then, at a constant rate, each
tick sends two requests at once, in rotating order: one through the global address and one straight
to the first Region's proxy (the way in the global address sends it to while that Region is up).
At `--fail-at` seconds the first Region's proxy is stopped (`gco local fail-region`), and at
`--restore-at` it is started again. It prints:

- the time from the failure to the first answer from another Region through the global address;
- the number of failed requests through the global address (any status but 200, or no answer),
  and how many were answered after a retry in another Region (`X-Gco-Tried`);
- the p50 and p99 latency through the global address and directly, over the ticks before the
  failure (both answered by the same Region), and the global hop's added p50 and p99.

    .venv/bin/python benchmarks/failover.py                         # 20 requests/s for 15 s
    .venv/bin/python benchmarks/failover.py --rate 10 --seconds 8 --fail-at 3 --restore-at 6

It measures the local model of the design (docs/local.md: one process standing in for Route 53,
the authorizer and the Regional proxies' forwarding); in AWS the switch takes health-check
intervals and DNS TTLs (docs/deploy.md), which it does not model.
"""

from __future__ import annotations

import argparse
import ssl
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gco import aws  # noqa: E402
from gco.endpoints import EndpointStore  # noqa: E402
from gco.global_access.routing import REGION_HEADER  # noqa: E402
from gco.local import stack  # noqa: E402
from gco.local.front.front import TRIED_HEADER  # noqa: E402
from gco.local.front.process import make_key  # noqa: E402
from gco.local.processes.statefiles import StackState  # noqa: E402
from gco.local.region import faults  # noqa: E402

REGIONS = ("us-east-1", "us-west-2")
NAME = "smol"
MODEL = "HuggingFaceTB/SmolLM2-135M"
BODY = {"model": MODEL, "prompt": "hi", "max_tokens": 4}
DEPLOY_TIMEOUT_S = 120.0


@dataclass
class Sample:
    sent: float  # seconds since the run began
    done: float
    status: int  # 0: no answer
    region: str
    tried: str

    @property
    def latency_ms(self) -> float:
        return (self.done - self.sent) * 1000


def request(client: httpx.Client, url: str, headers: dict[str, str], start: float) -> Sample:
    sent = time.perf_counter() - start
    try:
        reply = client.post(url, json=BODY, headers=headers)
        status, region, tried = (
            reply.status_code,
            reply.headers.get(REGION_HEADER, ""),
            reply.headers.get(TRIED_HEADER, ""),
        )
    except httpx.HTTPError:
        status, region, tried = 0, "", ""
    return Sample(sent, time.perf_counter() - start, status, region, tried)


def deployed(state: StackState) -> None:
    """`smol` created in both Regions and running in both (bounded wait)."""
    client = aws.client("dynamodb", region=state.home_region, endpoint_url=state.endpoint_url)
    store = EndpointStore(client, state.table)
    store.create(NAME, {"image": "vllm/vllm-openai:v0.6.3", "model_id": MODEL}, list(REGIONS))
    deadline = time.monotonic() + DEPLOY_TIMEOUT_S
    while time.monotonic() < deadline:
        record = store.get(NAME)
        statuses = record.region_status if record else {}
        if all(
            s.state == "running" and s.replicas_ready >= 1 for r in REGIONS if (s := statuses.get(r))
        ) and len(statuses) == len(REGIONS):
            return
        time.sleep(0.2)
    raise SystemExit(f"{NAME} did not run in {REGIONS} within {DEPLOY_TIMEOUT_S:g} s")


def percentile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def run(rate: float, seconds: float, fail_at: float, restore_at: float) -> None:
    with tempfile.TemporaryDirectory(prefix="gco-failover-") as directory:
        state_dir = Path(directory)
        state = stack.up(REGIONS, state_dir)
        try:
            deployed(state)
            key = make_key(state.endpoint_url, state.home_region, state.keys_table, "failover-bench")
            verify: ssl.SSLContext | bool = (
                ssl.create_default_context(cafile=state.ca_bundle) if state.ca_bundle else True
            )
            global_url = f"{state.global_url}/inference/{NAME}/v1/completions"
            direct_url = f"{state.invoke_urls[REGIONS[0]]}/{NAME}/v1/completions"
            auth = {"authorization": f"Bearer {key}"}
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
            with (
                httpx.Client(timeout=30, verify=verify, limits=limits) as client,
                ThreadPoolExecutor(max_workers=32) as pool,
            ):
                for _ in range(5):  # warm the connections and the engines
                    request(client, global_url, auth, 0.0)
                    request(client, direct_url, {}, 0.0)
                through: list[Future[Sample]] = []
                direct: list[Future[Sample]] = []
                failed_at: list[float] = []
                start = time.perf_counter()

                def fault(at: float, down: bool) -> None:
                    time.sleep(max(0.0, at - (time.perf_counter() - start)))
                    faults.request(state_dir, REGIONS[0], faults.Faults(proxy_down=down))
                    if down:  # the moment the Region's process reports its proxy stopped
                        failed_at.append(time.perf_counter() - start)

                threading.Thread(target=fault, args=(fail_at, True), daemon=True).start()
                threading.Thread(target=fault, args=(restore_at, False), daemon=True).start()
                ticks = int(rate * seconds)
                for tick in range(ticks):
                    time.sleep(max(0.0, tick / rate - (time.perf_counter() - start)))
                    pair = [(through, global_url, auth), (direct, direct_url, {})]
                    for target, url, headers in pair if tick % 2 == 0 else reversed(pair):
                        target.append(pool.submit(request, client, url, headers, start))
                samples = [f.result() for f in through]
                directs = [f.result() for f in direct]
        finally:
            stack.down(state_dir)
    report(samples, directs, failed_at[0] if failed_at else fail_at, rate, seconds)


def report(samples: list[Sample], directs: list[Sample], failed: float, rate: float, seconds: float) -> None:
    other = [
        s for s in samples if s.sent >= failed and s.region and s.region != REGIONS[0] and s.status == 200
    ]
    switch = min(s.done for s in other) - failed if other else float("nan")
    failures = [s for s in samples if s.status != 200]
    retried = [s for s in samples if s.tried]
    before = [(g, d) for g, d in zip(samples, directs, strict=True) if g.done < failed and d.done < failed]
    g_lat = [g.latency_ms for g, _ in before if g.status == 200]
    d_lat = [d.latency_ms for _, d in before if d.status == 200]
    print(
        f"requests: {len(samples)} through the global address at {rate:g}/s for {seconds:g} s, as many direct"
    )
    print(f"failure at {failed:.2f} s: first answer from another Region {switch * 1000:.0f} ms after it")
    print(
        f"failed requests through the global address: {len(failures)}; answered after a retry: {len(retried)}"
    )
    if len(g_lat) > 1 and len(d_lat) > 1:
        g50, g99, d50, d99 = (
            percentile(g_lat, 50),
            percentile(g_lat, 99),
            percentile(d_lat, 50),
            percentile(d_lat, 99),
        )
        print(f"before the failure ({len(g_lat)} pairs): global p50 {g50:.1f} ms p99 {g99:.1f} ms;", end=" ")
        print(f"direct p50 {d50:.1f} ms p99 {d99:.1f} ms")
        print(f"added by the global hop: p50 {g50 - d50:.1f} ms, p99 {g99 - d99:.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rate", type=float, default=20.0, help="Ticks per second (each sends one request each way)."
    )
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--fail-at", type=float, default=5.0)
    parser.add_argument("--restore-at", type=float, default=10.0)
    options = parser.parse_args()
    run(options.rate, options.seconds, options.fail_at, options.restore_at)


if __name__ == "__main__":
    main()
