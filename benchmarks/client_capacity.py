"""Load-client capacity: the highest constant rate a client generates faithfully, and its timing error.

One run, one fast local fake server (gco.bench.fake_engine with --trace) pinned to one core, the client
to the other; streaming /v1/completions, 128 output tokens, 20 ms TTFT, 2 ms ITL. A rate is faithful when
the client sent on schedule (p99 of its delay past the planned send times at most 5 ms, for clients
that say when they sent), the server saw the arrivals and finished the answers at the rate (within 5%)
while it kept its pace (mean inter-token gap within 10% of 2 ms), nothing failed, and the client's own
delay in stamping a first token (server's write to client's stamp, both on the machine's monotonic
clock) is at most 5 ms on average; for clients that do not give their send times on that clock (the
peers), the client's mean TTFT within 5 ms of the server's own (which also counts the time a busy
server took to read the request). Also: TTFT/ITL error (client minus server; mean and p99) at
concurrency 1, split for gco into the request's leg (the server's wake-up) and the answer's (the
client's own). Clients: `gco bench serve`; a baseline measured in the same run (an httpx streaming
client with the same schedule, the usual way to write one in Python); AIPerf and GuideLLM when a
separate venv holding them is given with --peers-venv (they need a tokenizer: a tiny one is trained
offline with their own libraries unless --tokenizer names one), otherwise it says why they were not
measured.

The server's own ceiling is measured in the same run, before and after gco's search, by wrk (a C load
generator; Debian's `wrk` package, `apt-get install -y wrk`), closed loop, on the client's core,
sending the request `gco bench serve` sends (a Lua script sets the method, body and header): the most
answers per second the server finished (counted from its own trace) over growing connection counts,
as long as it kept its pace. Without wrk that part is skipped and says so. Targets: the client's
faithful rate at least 90% of that ceiling; TTFT error at concurrency 1 at most 0.3 ms mean and 1 ms
p99, and no worse than the best peer's.

    .venv/bin/python benchmarks/client_capacity.py                 # gco, the baseline, wrk's ceiling
    .venv/bin/python benchmarks/client_capacity.py --peers-venv /tmp/peers --install-peers
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.capacity_peers import prepare_peers  # noqa: E402
from benchmarks.capacity_report import CEILING_TARGET, report  # noqa: E402
from gco.bench.clients.serve import LAG_LIMIT_MS, ServeSettings, payload  # noqa: E402
from gco.local.processes.listen import free_port  # noqa: E402

PY = sys.executable
TOKENS = 128
RATE_TOLERANCE = 0.05
TTFT_TOLERANCE_S = 0.005
SECONDS_PER_RATE = 4.0
MIN_REQUESTS = 40
RESOLUTION = 20  # the search stops when the first unfaithful rate is within 1/20 of the last faithful
TTFT_MS = 20
ITL_MS = 2
# The server keeps its pace while its mean inter-token gap is within 10% of ITL_MS. Past its ceiling the
# fake engine falls behind its schedule and writes the rest of an answer at once (`paced` in
# gco.bench.fake_engine.server sleeps only while a token is not yet due): answers get cheaper, its
# throughput grows with the load offered (wrk: 862/s at 512 connections, 1,136/s at 1,024, mean gap
# 0.9-1.2 ms) and there is no ceiling, only a server that no longer serves what it models.
PACE_TOLERANCE = 0.1
WRK_CONNECTIONS = (128, 192, 256, 384, 512, 768, 1024)
WRK_SECONDS = 6
WRK_CONNECTION_RESOLUTION = 16  # the ceiling's bisection stops within 16 connections (about 50 answers/s)
WRK_SCRIPT = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = {body}
"""


def pinned(core: int | None, argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(core), *argv] if core is not None and shutil.which("taskset") else argv


class Server:
    """The fake engine as a real process, recording arrivals and its own TTFT/ITL.

    `fresh()` replaces the process before each measured level: a level past the server's ceiling
    leaves it slower for whatever follows (on a quiet machine its ceiling measured right after gco's
    search fell from 808 to 373 answers a second, and the levels after an overloaded one all read
    their requests 60-80 ms late), so no level, and no client, is measured on a server that an
    earlier one overloaded.
    """

    def __init__(self, core: int | None) -> None:
        self.core = core
        self._start()

    def fresh(self) -> None:
        """A new server process in place of this one (a new port; clients read `url` when they run)."""
        self.close()
        self._start()

    def _start(self) -> None:
        core = self.core
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [
            PY,
            "-m",
            "gco.bench.fake_engine",
            "--port",
            str(self.port),
            "--ttft-ms",
            str(TTFT_MS),
            "--itl-ms",
            str(ITL_MS),
            "--tokens",
            str(TOKENS),
            "--trace",
        ]
        self.process = subprocess.Popen(
            pinned(core, argv), stdout=subprocess.DEVNULL, start_new_session=True, cwd=ROOT
        )
        for _ in range(200):
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1):  # noqa: S310 - loopback
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("fake server did not start")

    def trace(self) -> list[dict[str, float]]:
        with urllib.request.urlopen(self.url + "/debug/trace", timeout=30) as response:  # noqa: S310 - loopback
            return list(json.loads(response.read()))

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def write_prompts(directory: Path, count: int) -> Path:
    path = directory / "prompts.jsonl"
    path.write_text(
        "".join(json.dumps({"prompt": f"request {i}: tell me about item {i}"}) + "\n" for i in range(count))
    )
    return path


def serve_row(record: dict[str, Any]) -> dict[str, Any]:
    """What the benchmark takes from one `gco bench serve` request record."""
    return {
        "ok": record["ok"],
        "ttft_s": record["ttft_s"],
        "itl_s": record["itl_mean_s"],
        "sent_clock_s": record.get("sent_clock_s"),
        "lag_s": record["schedule_lag_s"],
        "kernel_stamps": record.get("kernel_stamps", 0),
    }


def gco_client(server: Server, rate: int, count: int, core: int | None, work: Path) -> list[dict[str, Any]]:
    """`gco bench serve` load mode at a constant `rate` (levels=rate, reference e2e 1 s)."""
    run = work / f"gco-{rate}-{time.monotonic_ns()}"
    argv = [
        PY,
        "-m",
        "gco.cli",
        "bench",
        "serve",
        "--base-url",
        server.url,
        "--prompts",
        str(write_prompts(work, count)),
        "--mode",
        "load",
        "--arrival",
        "constant",
        "--levels",
        str(rate),
        "--reference-e2e",
        "1",
        "--requests-per-level",
        str(count),
        "--warmup",
        "0",
        "--max-tokens",
        str(TOKENS),
        "--run-dir",
        str(run),
    ]
    subprocess.run(pinned(core, argv), check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in (run / "serve" / "requests.jsonl").read_text().splitlines()]
    return [serve_row(r) for r in rows]


def gco_single(server: Server, count: int, core: int | None, work: Path) -> list[dict[str, Any]]:
    run = work / f"gco-single-{time.monotonic_ns()}"
    argv = [
        PY,
        "-m",
        "gco.cli",
        "bench",
        "serve",
        "--base-url",
        server.url,
        "--prompts",
        str(write_prompts(work, count)),
        "--mode",
        "single",
        "--warmup",
        "2",
        "--max-tokens",
        str(TOKENS),
        "--run-dir",
        str(run),
    ]
    server.trace()
    subprocess.run(pinned(core, argv), check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    rows = [json.loads(line) for line in (run / "serve" / "requests.jsonl").read_text().splitlines()]
    return [serve_row(r) for r in rows]


async def _baseline(url: str, rate: float, count: int) -> list[dict[str, Any]]:
    import httpx

    body = {"model": "m", "prompt": "tell me about it", "max_tokens": TOKENS, "stream": True}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=1000)

    async def one(client: httpx.AsyncClient, planned: float) -> dict[str, Any]:
        sent = time.perf_counter()
        arrivals: list[float] = []
        try:
            async with client.stream("POST", url + "/v1/completions", json=body) as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        event = json.loads(line[6:])
                        if event.get("choices") and event["choices"][0].get("text"):
                            arrivals.append(time.perf_counter())
        except httpx.HTTPError:
            return {"ok": False, "ttft_s": None, "itl_s": None, "sent_clock_s": sent, "lag_s": sent - planned}
        gaps = [b - a for a, b in itertools.pairwise(arrivals)]
        return {
            "sent_clock_s": sent,
            "lag_s": max(0.0, sent - planned),
            "ok": bool(arrivals),
            "ttft_s": arrivals[0] - sent if arrivals else None,
            "itl_s": statistics.fmean(gaps) if gaps else None,
        }

    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        origin = time.perf_counter()
        tasks = []
        for i in range(count):
            delay = origin + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(client, origin + i / rate)))
        return list(await asyncio.gather(*tasks))


def baseline_client(
    server: Server, rate: float, count: int, core: int | None, work: Path
) -> list[dict[str, Any]]:
    """The same constant schedule from an httpx streaming client, in its own pinned process."""
    out = work / f"baseline-{time.monotonic_ns()}.json"
    argv = [
        PY,
        str(Path(__file__).resolve()),
        "--baseline-worker",
        server.url,
        str(rate),
        str(count),
        str(out),
    ]
    subprocess.run(pinned(core, argv), check=True, cwd=ROOT)
    return list(json.loads(out.read_text()))


Client = Callable[[Server, int, int, "int | None", Path], list[dict[str, Any]]]


def rate_of(times: list[float]) -> float:
    """Events per second over the span of `times` (0 for fewer than two, or no span)."""
    ordered = sorted(times)
    span = ordered[-1] - ordered[0] if len(ordered) > 1 else 0.0
    return (len(ordered) - 1) / span if span > 0 else 0.0


def paced(trace: list[dict[str, float]]) -> float | None:
    """The server's mean inter-token gap (ms) when it kept its pace (within `PACE_TOLERANCE` of
    `ITL_MS`), None when it did not or served nothing."""
    if not trace:
        return None
    gap = statistics.fmean(t["itl_s"] for t in trace) * 1000
    return gap if abs(gap - ITL_MS) <= PACE_TOLERANCE * ITL_MS else None


def judge(rate: float, client_rows: list[dict[str, Any]], trace: list[dict[str, float]]) -> dict[str, Any]:
    """Whether `rate` was generated faithfully: sent on schedule, seen and served at that rate by the
    server, nothing failed, and the client's timing honest.

    - Sent on schedule: the p99 of the client's own delay past each planned send time at most
      `LAG_LIMIT_MS` (where the client says when it sent: gco and the baseline; the peers do not).
    - Seen: the server's arrivals at the rate, within 5%.
    - Served: the server's last token writes at the rate, within 5%, and at its pace (`paced`).
      Without it a short level above the server's own ceiling passes: the server reads requests
      faster than it finishes them and drains the backlog after the level, and, behind its schedule,
      writes the rest of an answer at once, so the client reads fewer, larger bursts than at the
      server's pace. The rate then says more about the server than about the client, and can
      exceed the ceiling (last session's 1,024/s against wrk's 740-858).
    - Timing honest: the client's own delay in stamping a first token (mean of its send + TTFT minus
      the server's mean of arrival + TTFT, both on `time.perf_counter`) at most 5 ms. The TTFT gap
      (client's mean TTFT minus the server's own) would also count the time a busy server took to
      read the request, the server's queue, which the client rightly reports; it is the rule only
      for clients that do not give their sends on that clock (the peers).
    """
    arrived = sorted(row["arrived"] for row in trace)
    seen_rate = rate_of(arrived)
    served_rate = rate_of([row["arrived"] + row["ttft_s"] + row["itl_s"] * (TOKENS - 1) for row in trace])
    ok = [r for r in client_rows if r["ok"]]
    client_ttft = statistics.fmean(r["ttft_s"] for r in ok) if ok else float("inf")
    server_ttft = statistics.fmean(row["ttft_s"] for row in trace) if trace else float("inf")
    errors = len(client_rows) - len(ok)
    gap = client_ttft - server_ttft
    own = read_late = None
    if ok and trace and len(ok) == len(trace) and all(r.get("sent_clock_s") for r in ok):
        own = statistics.fmean(r["sent_clock_s"] + r["ttft_s"] for r in ok) - statistics.fmean(
            row["arrived"] + row["ttft_s"] for row in trace
        )
        read_late = statistics.fmean(arrived) - statistics.fmean(r["sent_clock_s"] for r in ok)
    lags = sorted(r["lag_s"] for r in client_rows if r.get("lag_s") is not None)
    lag_p99 = lags[round(0.99 * (len(lags) - 1))] if lags else None
    faithful = (
        errors == 0
        and (lag_p99 is None or lag_p99 * 1000 <= LAG_LIMIT_MS)
        and abs(seen_rate - rate) <= RATE_TOLERANCE * rate
        and served_rate >= (1 - RATE_TOLERANCE) * rate
        and paced(trace) is not None
        and abs(own if own is not None else gap) <= TTFT_TOLERANCE_S
    )
    return {
        "rate": rate,
        "seen_rate": seen_rate,
        "served_rate": served_rate,
        "server_itl_ms": statistics.fmean(t["itl_s"] for t in trace) * 1000 if trace else None,
        "lag_p99_ms": lag_p99 * 1000 if lag_p99 is not None else None,
        "ttft_gap_ms": gap * 1000,
        "client_delay_ms": own * 1000 if own is not None else None,
        "server_read_delay_ms": read_late * 1000 if read_late is not None else None,
        "errors": errors,
        "faithful": faithful,
    }


def wrk_script(directory: Path) -> Path:
    """The Lua script that makes wrk send the request `gco bench serve` sends (the same body)."""
    _, body = payload(ServeSettings(base_url="http://127.0.0.1", max_tokens=TOKENS), "tell me about it")
    path = directory / "post.lua"
    path.write_text(WRK_SCRIPT.format(body=json.dumps(json.dumps(body))))
    return path


def wrk_rate(output: str) -> float:
    """The `Requests/sec:` figure of wrk's report.

    Raises:
        ValueError: the report has none (wrk failed).
    """
    found = re.search(r"^Requests/sec:\s+([0-9.]+)", output, re.MULTILINE)
    if found is None:
        raise ValueError(f"no Requests/sec in wrk's output: {output.strip()[-200:]!r}")
    return float(found[1])


def wrk_level(wrk: str, server: Server, core: int | None, work: Path, connections: int) -> tuple[float, bool]:
    """One wrk closed-loop run of `WRK_SECONDS` at `connections` against a fresh server: the answers
    per second the server finished (from its trace) and whether it kept its pace. Raises ValueError
    when wrk's output has no rate."""
    argv = [wrk, "-t1", f"-c{connections}", f"-d{WRK_SECONDS}s", "-s", str(wrk_script(work))]
    server.fresh()
    done = subprocess.run(
        pinned(core, [*argv, server.url + "/v1/completions"]),
        capture_output=True,
        text=True,
        check=False,
        timeout=WRK_SECONDS * 10,
    )
    reported = wrk_rate(done.stdout)
    trace = server.trace()  # and wrk's requests are out of the next client's trace
    served = rate_of([t["arrived"] + t["ttft_s"] + t["itl_s"] * (TOKENS - 1) for t in trace])
    kept_pace = paced(trace) is not None
    mean_gap = statistics.fmean(t["itl_s"] for t in trace) * 1000 if trace else 0.0
    mean_ttft = statistics.fmean(t["ttft_s"] for t in trace) * 1000 if trace else 0.0
    print(
        f"  wrk       {connections:4d} connections: server finished {served:7.1f}/s "
        f"(wrk's Requests/sec {reported:7.1f}); its TTFT {mean_ttft:.1f} ms, ITL {mean_gap:.2f} ms"
        + ("" if kept_pace else ": behind its pace, not a ceiling"),
        flush=True,
    )
    return served, kept_pace


def server_ceiling(server: Server, core: int | None, work: Path) -> tuple[float, int] | str:
    """The fake server's own ceiling under wrk (closed loop): the most answers per second it finished
    while it kept its pace (`paced`), and at how many connections; or why it was not measured.

    The connections grow through `WRK_CONNECTIONS` until the server falls behind its pace, then the
    count is bisected between the last count it kept pace at and the first it did not, to within
    `WRK_CONNECTION_RESOLUTION`: the steps alone (192 then 256) left the ceiling up to a third below
    the rate the server really kept pace at (a quiet run: 591/s at 192, behind at 256, while an open
    loop at 838/s still found it at its pace).

    The rate is counted at the server, from its trace: finished answers over the span from the first
    to the last finish. wrk's own Requests/sec (printed beside it) divides the answers it completed
    by the whole run, so it also counts the first answer's latency, when nothing can finish yet,
    and the answers still streaming when it stops: several percent of a short run.
    """
    wrk = shutil.which("wrk")
    if wrk is None:
        return "server ceiling: not measured (wrk is not installed: apt-get install -y wrk)"
    best = (0.0, 0)
    good, bad = 0, None
    try:
        for connections in WRK_CONNECTIONS:
            served, kept_pace = wrk_level(wrk, server, core, work, connections)
            if not kept_pace:
                bad = connections
                break
            good, best = connections, max(best, (served, connections))
        while good and bad is not None and bad - good > WRK_CONNECTION_RESOLUTION:
            middle = (good + bad) // 2
            served, kept_pace = wrk_level(wrk, server, core, work, middle)
            if kept_pace:
                good, best = middle, max(best, (served, middle))
            else:
                bad = middle
    except ValueError as error:
        return f"server ceiling: wrk failed ({error})"
    if not best[1]:
        return "server ceiling: not measured (the server fell behind its pace at every connection count)"
    return best


def max_faithful_rate(
    name: str, client: Client, server: Server, core: int | None, work: Path, start: int, ceiling: int
) -> int:
    """Double the rate until a rate is not faithful, then bisect between the last good and the first bad."""
    good, bad, rate = 0, None, start
    for _ in range(30):
        if bad is not None and bad - good <= max(2, good // RESOLUTION):
            break
        count = max(MIN_REQUESTS, int(rate * SECONDS_PER_RATE))
        server.fresh()
        rows = client(server, rate, count, core, work)
        verdict = judge(rate, rows, server.trace())
        delays = (
            f" (client's own delay {verdict['client_delay_ms']:+.2f} ms, "
            f"server read {verdict['server_read_delay_ms']:+.2f} ms)"
            if verdict["client_delay_ms"] is not None
            else ""
        )
        lag = f", send lag p99 {verdict['lag_p99_ms']:.2f} ms" if verdict["lag_p99_ms"] is not None else ""
        print(
            f"  {name:9s} rate {rate:5d}/s: server saw {verdict['seen_rate']:7.1f}/s, served "
            f"{verdict['served_rate']:7.1f}/s (its ITL {verdict['server_itl_ms'] or 0:.2f} ms){lag}, "
            f"TTFT gap {verdict['ttft_gap_ms']:+7.2f} ms{delays}, "
            f"errors {verdict['errors']}: {'faithful' if verdict['faithful'] else 'NOT faithful'}",
            flush=True,
        )
        if verdict["faithful"]:
            good = rate
            if rate >= ceiling:
                break
            rate = min(ceiling, rate * 2) if bad is None else (good + bad) // 2
        else:
            bad = rate
            rate = (good + bad) // 2
            if rate <= good:
                break
    return good


def concurrency_one_error(
    client_rows: list[dict[str, Any]], trace: list[dict[str, float]]
) -> dict[str, float]:
    """Client minus server TTFT and ITL per request (in order), mean and p99 in ms.

    Where the client gives its sends on the machine's monotonic clock (gco, the baseline), the TTFT
    error is also split into its two legs: the request's (client's write to the server's read of it:
    the server's wake-up, which no client can remove) and the answer's (the server's write of the
    first token to the client's stamp of it: the client's own share).
    """
    pairs = list(
        zip([r for r in client_rows if r["ok"]], sorted(trace, key=lambda t: t["arrived"]), strict=False)
    )
    ttft = sorted((c["ttft_s"] - s["ttft_s"]) * 1000 for c, s in pairs)
    itl = sorted((c["itl_s"] - s["itl_s"]) * 1000 for c, s in pairs if c["itl_s"] is not None)

    def p99(values: list[float]) -> float:
        return values[min(len(values) - 1, round(0.99 * (len(values) - 1)))]

    error = {
        "ttft_mean_ms": statistics.fmean(ttft),
        "ttft_p99_ms": p99(ttft),
        "itl_mean_ms": statistics.fmean(itl),
        "itl_p99_ms": p99(itl),
        "n": len(pairs),
    }
    if pairs and all(c.get("sent_clock_s") for c, _ in pairs):
        request = sorted((s["arrived"] - c["sent_clock_s"]) * 1000 for c, s in pairs)
        answer = sorted(
            (c["sent_clock_s"] + c["ttft_s"] - s["arrived"] - s["ttft_s"]) * 1000 for c, s in pairs
        )
        error |= {
            "request_leg_mean_ms": statistics.fmean(request),
            "request_leg_p99_ms": p99(request),
            "answer_leg_mean_ms": statistics.fmean(answer),
            "answer_leg_p99_ms": p99(answer),
            "kernel_stamped": sum(1 for c, _ in pairs if c.get("kernel_stamps")),
        }
    return error


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--baseline-worker", nargs=4, metavar=("URL", "RATE", "COUNT", "OUT"), help=argparse.SUPPRESS
    )
    parser.add_argument("--peers-venv", type=Path, default=None)
    parser.add_argument("--tokenizer", type=Path, default=None, help="Local tokenizer dir for the peers.")
    parser.add_argument(
        "--install-peers",
        action="store_true",
        help="Create --peers-venv and pip install aiperf and guidellm into it first.",
    )
    parser.add_argument("--peer-start", type=int, default=8, help="First rate tried for the peers.")
    parser.add_argument("--ceiling", type=int, default=1024, help="Highest rate tried (req/s).")
    parser.add_argument("--single", type=int, default=200, help="Requests at concurrency 1.")
    parser.add_argument(
        "--skip-baseline", action="store_true", help="Leave out the httpx baseline (a shorter run)."
    )
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    if args.baseline_worker:
        url, rate, count, out = args.baseline_worker
        rows = asyncio.run(_baseline(url, float(rate), int(count)))
        Path(out).write_text(json.dumps(rows))
        return 0
    cores = os.cpu_count() or 1
    server_core, client_core = (0, 1) if cores >= 2 else (None, None)
    print(
        f"client capacity: fake server on core {server_core}, client on core {client_core}; streaming "
        f"/v1/completions, {TOKENS} tokens, 20 ms TTFT, 2 ms ITL",
        flush=True,
    )
    peers, note = prepare_peers(args, TOKENS, pinned)
    rates: dict[str, int] = {}
    errors: dict[str, dict[str, float]] = {}
    failed: dict[str, str] = {}
    server = Server(server_core)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            print("the server's own ceiling (wrk, closed loop, on the client's core):", flush=True)
            ceiling = server_ceiling(server, client_core, work)
            ceilings = [ceiling] if isinstance(ceiling, tuple) else []
            highest, start = args.ceiling, 16
            if isinstance(ceiling, tuple):
                highest = max(args.ceiling, int(ceiling[0] * 1.1))
                start = int(ceiling[0] * CEILING_TARGET)  # the target first: fewer probes
            print("highest faithful constant rate:", flush=True)
            rates["gco bench serve"] = max_faithful_rate(
                "gco", gco_client, server, client_core, work, start, highest
            )
            if isinstance(ceiling, tuple):  # again right after: on a shared machine the load moves
                print("the server's own ceiling again, after gco's search:", flush=True)
                after = server_ceiling(server, client_core, work)
                if isinstance(after, tuple):
                    ceilings.append(after)
            if not args.skip_baseline:
                rates["baseline (httpx)"] = max_faithful_rate(
                    "baseline", baseline_client, server, client_core, work, 16, highest
                )
            server.fresh()
            gco_rows = gco_single(server, args.single, client_core, work)
            errors["gco bench serve"] = concurrency_one_error(
                gco_rows, sorted(server.trace(), key=lambda t: t["arrived"])[2:]
            )
            server.fresh()
            if not args.skip_baseline:
                errors["baseline (httpx)"] = concurrency_one_error(
                    baseline_client(server, 3, 30, client_core, work), server.trace()
                )
            for peer in peers:
                try:
                    rates[peer.name] = max_faithful_rate(
                        peer.name, peer.run, server, client_core, work, args.peer_start, highest
                    )
                    server.fresh()
                    rows = peer.run(server, None, 60, client_core, work)
                    errors[peer.name] = concurrency_one_error(rows, server.trace())
                except (RuntimeError, subprocess.SubprocessError) as error:
                    failed[peer.name] = str(error)
    finally:
        server.close()
    capped = [name for name, rate in rates.items() if rate >= highest]
    report(rates, errors, failed, note, [peer.name for peer in peers], ceilings or str(ceiling), capped)
    return 0


if __name__ == "__main__":
    sys.exit(main())
