"""The local walk-through: a moto server, the Regional clusters, and the real `gco` commands.

Each step runs the real `gco` command in a subprocess against the local endpoint and prints the
command line and what it printed, so the transcript is exactly what a user would see. The
clusters run in this process (`LocalClusters`: per Region the stand-in API server, reconciler,
engines, autoscaler and proxy), so the demo can show what each Region holds between steps.

The walk: first two rollouts of an endpoint whose images run the fake engine, decided by a paired
comparison (one build promoted Region by Region, one half again as slow rolled back, each with its evidence's
report page), and the lifecycle of another such endpoint (list, scale, stop, start, update, move a
Region, refuse a stale delete, delete and purge: `demo_lifecycle`) with the global address in front of
it (`demo_global`); then, on the demo's engine, deploy to two Regions from a spec file, invoke both,
a canary at a weight with the split observed through the proxy, promote, refuse bad input, delete;
then `gco bench rounds` of two local engines in Williams order with the evidence written to the run
directory and the local S3 bucket, and its report page. The fake engine's part comes first because
it needs no CPU engine: a first `make demo` starts the walk-through while llama.cpp still compiles
(`gco.local.llama.setup_env`), and the walk waits for the engine (`engine_ready`) only before its
first step on it.
Every wait prints a progress line; at the end every process it started is gone and its ports
are free, which it checks and prints.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from gco import aws
from gco.bench.rounds.lock import GPU_LOCK_ENV
from gco.endpoints import EndpointStore, default_table_name
from gco.endpoints.names import object_name
from gco.endpoints.observed_state import region_note
from gco.env import ENDPOINT_URL_ENV, EVIDENCE_BUCKET_ENV, HOME_REGION_ENV
from gco.inference.invoke import INVOKE_CA_BUNDLE_ENV, INVOKE_URLS_ENV
from gco.local.assembly import CloudAssembly
from gco.local.assembly.deployed import (
    RUNTIME_SDK_DIR,
    DeployedApp,
    function_python,
    make_identities,
    signing_as,
)
from gco.local.assembly.invoke import FunctionRuntime
from gco.local.assembly.runtime_sdk import runtime_sdk
from gco.local.assembly.synth import local_assembly
from gco.local.demo import demo_bench, demo_global, demo_lifecycle, demo_rollout, run_step
from gco.local.demo.demo_lifecycle import cluster_summary
from gco.local.errors import AssemblyError, DemoStepError, SetupError
from gco.local.llama import engine_ready
from gco.local.moto.motoserver import MotoServer
from gco.local.region.cluster import LocalClusters
from gco.local.region.engines import EngineTable
from gco.local.region.reconcilers import LocalReconcilers
from gco.local.region.services import UPSTREAM_HEADER
from gco.local.stack import EVIDENCE_BUCKET
from gco.processes.proc import group_members
from gco.reconcile.objects import ENDPOINT_LABEL, MANAGED_BY, MANAGER
from gco.reconcile.proxy.route_shards import SHARD_PREFIX

DEMO_SPEC = """\
# A whole endpoint spec; command-line flags override its fields.
image: vllm/vllm-openai:v0.6.3
framework: vllm
model_id: HuggingFaceTB/SmolLM2-135M-Instruct
gpu_count: 1
replicas: 1
resources:
  requests: {cpu: "4", memory: 16Gi}
env:
  VLLM_LOGGING_LEVEL: INFO
"""


DEMO_REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
DEFAULT_RUN_DIR = Path("gco-demo")  # the benchmark's run directory and report page (kept)
CANARY_IMAGE = "vllm/vllm-openai:v0.6.4"
CANARY_WEIGHT = 30
SPLIT_REQUESTS = 60
DEMO_CANARY = object_name("demo-chat", "canary")  # the Service the canary's answers come from
WAIT_S = 180.0
PROGRESS_EVERY_S = 2.0


def _run_gco(
    arguments: Sequence[str], env: dict[str, str], echo: Callable[[str], None]
) -> subprocess.CompletedProcess[str]:
    return run_step.run_gco(arguments, env, echo)


def wait_for(
    check: Callable[[], bool], what: str, echo: Callable[[str], None], timeout: float = WAIT_S
) -> None:
    """Poll `check` (bounded), printing a progress line when it starts and every few seconds.

    Raises:
        DemoStepError: `what` did not happen within `timeout` seconds.
    """
    started = time.monotonic()
    echo(f"  ... waiting for {what}")
    last = started
    while not check():
        now = time.monotonic()
        if now - started > timeout:
            raise DemoStepError(f"timed out after {timeout:.0f} s waiting for {what}")
        if now - last >= PROGRESS_EVERY_S:
            echo(f"  ... still waiting for {what} ({now - started:.0f} s)")
            last = now
        time.sleep(0.2)
    echo(f"  ... {what}: done in {time.monotonic() - started:.1f} s")


def shared_summary(reconcilers: LocalReconcilers) -> list[str]:
    """One line per Region: gco's shared objects there (namespaces, the inference proxy, and its
    route shards counted rather than listed)."""
    lines = []
    for region, local in reconcilers.regions.items():
        shared, shards = [], 0
        for obj in local.api.objects():
            labels = obj["metadata"].get("labels") or {}
            if labels.get(MANAGED_BY) != MANAGER or ENDPOINT_LABEL in labels:
                continue
            if obj["metadata"]["name"].startswith(SHARD_PREFIX):
                shards += 1
            else:
                shared.append(f"{obj['kind']}/{obj['metadata']['name']}")
        if shards:
            shared.append(f"ConfigMap/{SHARD_PREFIX}* ({shards} route shards)")
        lines.append(f"  {region} shared: {', '.join(sorted(shared))}")
    return lines


def walkthrough(
    echo: Callable[[str], None] = print,
    *,
    engine: str = "fake",
    run_dir: Path = DEFAULT_RUN_DIR,
    engine_ready_file: Path | None = None,
    from_source: bool = False,
) -> None:
    """Run the walk-through against a fresh local moto server and Regional clusters, then stop all.

    The clusters run the synthesized app (`_deployed_app`: the Regional functions, the rollout wing and
    the global address's authorizer from their assets, IAM enforced) unless `from_source`.

    Parameters:
        engine: the engines behind the endpoints and in the benchmark (`fake` or `llama`).
        run_dir: the benchmark's run directory (emptied first; the report page stays there).
        engine_ready_file: where the set-up that started this walk marks the CPU engine installed
            (`engine_ready`); the walk waits for it after the rollouts. None: installed already.
        from_source: the reconcilers of the source tree, in this process (no synth).

    Raises:
        DemoStepError: a step did not end as it should, or the engine's set-up failed (the message
            names it).
        AssemblyError: the app cannot be synthesized (the message names the synth's log).
    """
    base = EngineTable.of_kind(engine)
    table = base.model_copy(update={"image_args": {**base.image_args, **demo_rollout.IMAGE_ARGS}})
    bench_dir = run_dir.resolve() / "bench"
    shutil.rmtree(bench_dir, ignore_errors=True)
    with (
        MotoServer() as server,
        tempfile.TemporaryDirectory(prefix="gco-demo-") as scratch,
        contextlib.ExitStack() as signing,
    ):
        spec_file = Path(scratch) / "demo-spec.yaml"
        spec_file.write_text(DEMO_SPEC, encoding="utf-8")
        env = {
            **os.environ,
            ENDPOINT_URL_ENV: server.url,
            HOME_REGION_ENV: "us-east-1",
            EVIDENCE_BUCKET_ENV: EVIDENCE_BUCKET,
            GPU_LOCK_ENV: str(Path(scratch) / "gpu.lock"),
        }
        echo(f"# local AWS endpoint (moto server) on {server.url}; {ENDPOINT_URL_ENV} points gco at it")

        def step(title: str, *arguments: str, expect: int = 0) -> str:
            echo(f"\n# {title}\n$ gco {' '.join(arguments)}")
            result = _run_gco(arguments, env, echo)  # its lines echoed as they come
            if result.returncode != expect:
                raise DemoStepError(
                    f"gco {' '.join(arguments)} exited {result.returncode}, expected {expect}"
                )
            echo(f"  (exit {result.returncode})")
            return result.stdout

        step("create the endpoint table with its stream", "inference", "init-table")
        aws.client("s3", endpoint_url=server.url).create_bucket(Bucket=EVIDENCE_BUCKET)
        echo(f"# the local evidence bucket: s3://{EVIDENCE_BUCKET}")
        app = None if from_source else _deployed_app(server, Path(scratch), env, echo)
        if app is not None and app.credentials is not None:
            signing.enter_context(signing_as(app.credentials))  # this process's clients too
        store = EndpointStore(aws.client("dynamodb", endpoint_url=server.url), default_table_name())
        clusters = LocalClusters(
            store,
            DEMO_REGIONS,
            endpoint_url=server.url,
            log_dir=Path(scratch) / "engines",
            table=table,
            app=app,
            evidence_bucket=EVIDENCE_BUCKET if app is not None else None,
        )
        env[INVOKE_URLS_ENV] = json.dumps(clusters.invoke_urls(), sort_keys=True)
        if clusters.ca_bundle is not None:
            env[INVOKE_CA_BUNDLE_ENV] = str(clusters.ca_bundle)
        _describe(echo, clusters, engine)
        ports = _ports(server.url, clusters)
        engine_groups: set[int] = set()
        try:
            with clusters.start(poll_interval=0.2, sweep_interval=5.0):
                try:
                    one_address = lambda name: demo_global.global_address(  # noqa: E731
                        step, echo, env, clusters, store, name
                    )
                    _on_fake_engines(step, echo, clusters, run_dir.resolve() / "rollout", one_address)
                    if engine_ready_file is not None:
                        _await_engine(echo, engine_ready_file)
                    _walk(step, echo, clusters, spec_file, engine_groups)
                except Exception:
                    explain_failure(echo, store, clusters)
                    raise
        finally:
            engine_groups.update(pgid for kubelet in clusters.kubelets.values() for pgid in kubelet.pids())
        _none_refused(echo, clusters)
        _bench(step, echo, env, bench_dir, engine)
    _nothing_left(echo, engine_groups, ports)
    echo("\n# done: the clusters, their engines and proxies, and the local server are stopped")


def _none_refused(echo: Callable[[str], None], clusters: LocalClusters) -> None:
    """Say how many requests the stand-in clusters refused as outside the reconciler's grant.

    Raises:
        DemoStepError: there were some.
    """
    refused = sum(len(local.api.forbidden) for local in clusters.reconcilers.regions.values())
    echo(f"\n# requests the stand-in clusters refused as outside the reconciler's grant: {refused}")
    if refused:
        raise DemoStepError(f"{refused} request(s) were outside the reconciler's grant")


def _describe(echo: Callable[[str], None], clusters: LocalClusters, engine: str) -> None:
    echo(
        f"# Regional clusters for {', '.join(DEMO_REGIONS)}: each reconciler reads the table's stream "
        "and applies to its own stand-in Kubernetes API on loopback, which allows only what the "
        f"reconciler's RBAC grant allows; each replica runs a {engine} engine process; each Region's "
        "proxy routes /inference/<name>"
    )
    for region, url in clusters.invoke_urls().items():
        echo(f"  {region} invoke URL: {url}")
    for line in shared_summary(clusters.reconcilers):
        echo(line)


def _deployed_app(
    server: MotoServer, scratch: Path, env: dict[str, str], echo: Callable[[str], None]
) -> DeployedApp:
    """The app synthesized for the walk's Regions (kept: synthesized once per source tree), its
    identities made in IAM, then moto's IAM enforcement on; `env` (the steps') signs as the operator.

    Raises:
        AssemblyError: the app cannot be synthesized or read.
    """
    echo(f"# the app synthesized for {', '.join(DEMO_REGIONS)} (`cdk synth`, kept until the source changes)")
    directory = local_assembly(DEMO_REGIONS, DEMO_REGIONS[0])
    assembly = CloudAssembly.open(directory)
    python = function_python(assembly)
    if python is None:
        raise AssemblyError(f"{directory}: no Python for its functions here")
    operator, service = make_identities(aws.client("iam", endpoint_url=server.url))
    server.enforce_iam()
    env.update(operator)
    echo(
        f"# {directory}: every Region's reconciler and sweep, the rollout wing and the global address's "
        "authorizer run from their assets under their own roles; the moto server enforces IAM"
    )
    packages = runtime_sdk(scratch / RUNTIME_SDK_DIR)
    return DeployedApp(
        assembly,
        FunctionRuntime(python, packages),
        server.url,
        scratch / "functions",
        credentials=operator,
        lambda_service=service,
    )


def _on_fake_engines(
    step: Callable[..., str],
    echo: Callable[[str], None],
    clusters: LocalClusters,
    rollout_dir: Path,
    global_address: Callable[[str], None],
) -> None:
    """The walk's part that needs no CPU engine (its images run the fake engine): the rollouts, then
    an endpoint's global address and lifecycle. A first `make demo` runs it while llama.cpp still
    compiles."""
    demo_rollout.rollouts(step, echo, rollout_dir)
    demo_lifecycle.lifecycle(step, echo, clusters.reconcilers, global_address)


def _await_engine(echo: Callable[[str], None], ready: Path) -> None:
    echo("\n# the CPU engine: the set-up installs it beside these first steps")
    try:
        engine_ready.await_engine(ready, echo)
    except SetupError as error:
        raise DemoStepError(str(error)) from error


LOG_TAIL_LINES = 8


def explain_failure(echo: Callable[[str], None], store: EndpointStore, clusters: LocalClusters) -> None:
    """What a failed step leaves to look at: each endpoint's state per Region (with why its replicas
    are not ready) and the last lines of each engine's log that is not ready or has restarted."""
    echo("\n# the step failed; what the Regions report:")
    for record in store.scan().records:
        for region in record.cleanup_regions:
            status = record.region_status.get(region)
            if status is None:
                echo(f"  {record.endpoint_name} in {region}: pending (no status yet)")
                continue
            why = region_note(status)
            echo(
                f"  {record.endpoint_name} in {region}: {status.state} "
                f"{status.replicas_ready}/{status.replicas_desired} ready{f' ({why})' if why else ''}"
            )
    for region, kubelet in clusters.kubelets.items():
        for name, replica, path in kubelet.engine_logs():
            if replica.ready and not replica.restarts:
                continue
            state = "ready" if replica.ready else "not ready"
            echo(f"# {region} engine {name} ({state}, restarts {replica.restarts}): last lines of {path}")
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.exists() else []
            for line in lines[-LOG_TAIL_LINES:] or ["(empty)"]:
                echo(f"  | {line}")


def _ports(moto_url: str, clusters: LocalClusters) -> list[int]:
    """The loopback ports the demo's servers listen on: moto, each stand-in API server, each proxy."""
    urls = [moto_url, *(local.api.url for local in clusters.reconcilers.regions.values())]
    urls += [proxy.url for proxy in clusters.proxies.values()]
    return sorted({int(urlsplit(url).port or 0) for url in urls} - {0})


def port_free(port: int) -> bool:
    """True when nothing accepts connections on loopback `port`."""
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _nothing_left(echo: Callable[[str], None], groups: set[int], ports: Sequence[int]) -> None:
    left = sorted(pgid for pgid in groups if group_members(pgid))
    busy = [port for port in ports if not port_free(port)]
    echo(
        f"\n# nothing left running: engine process groups seen {sorted(groups)}, "
        f"{len(left)} left; ports {', '.join(map(str, ports))}: {'in use ' + str(busy) if busy else 'free'}"
    )
    if left or busy:
        raise DemoStepError(f"left running: process groups {left}, ports in use {busy}")


def observed_split(clusters: LocalClusters, region: str, name: str, requests: int) -> Counter[str]:
    """How many of `requests` through `region`'s proxy each Service answered (the Service network
    names it in a response header), each on a fresh connection."""
    verify: ssl.SSLContext | bool = True
    if clusters.ca_bundle is not None:
        verify = ssl.create_default_context(cafile=str(clusters.ca_bundle))
    seen: Counter[str] = Counter()
    url = f"{clusters.invoke_urls()[region]}/{name}/v1/completions"
    body = {"prompt": "Say hi.", "max_tokens": 1, "temperature": 0}
    for _ in range(requests):
        try:
            answer = httpx.post(url, json=body, verify=verify, timeout=60, headers={"Connection": "close"})
            seen[answer.headers.get(UPSTREAM_HEADER, f"HTTP {answer.status_code}")] += 1
        except httpx.TransportError as error:
            seen[type(error).__name__] += 1
    return seen


def _walk(
    step: Callable[..., str],
    echo: Callable[[str], None],
    clusters: LocalClusters,
    spec_file: Path,
    engine_groups: set[int],
) -> None:
    reconcilers = clusters.reconcilers
    step(
        "deploy to two Regions from a spec file, overriding replicas, and wait until both run it",
        "inference",
        "deploy",
        "demo-chat",
        "--spec",
        str(spec_file),
        "--replicas",
        "2",
        "--region",
        "us-east-1",
        "--region",
        "us-west-2",
        "--label",
        "team=ml-platform",
        "--wait",
        "--timeout",
        "60",
    )
    echo("# what the reconcilers applied:")
    for line in cluster_summary(reconcilers):
        echo(line)
    for region in ("us-east-1", "us-west-2"):
        step(
            f"invoke it in {region}: one request through that Region's proxy to an engine",
            "inference",
            "invoke",
            "demo-chat",
            "--region",
            region,
            "--prompt",
            "The capital of France is",
        )
    _canary(step, echo, clusters, engine_groups)
    step(
        "bad input is refused with one line naming the field; nothing is written",
        "inference",
        "deploy",
        "Bad_Name",
        "--image",
        "vllm/vllm-openai:v0.6.3",
        "--region",
        "us-east-1",
        expect=2,
    )
    step("list endpoints", "inference", "list")
    step(
        "delete it; every Region acknowledges, then the record is purged",
        *("inference", "delete", "demo-chat", "--wait", "--timeout", "60"),
    )
    echo("# after the purge:")
    for line in cluster_summary(reconcilers):
        echo(line)


def _canary(
    step: Callable[..., str], echo: Callable[[str], None], clusters: LocalClusters, engine_groups: set[int]
) -> None:
    """A canary at CANARY_WEIGHT, its split observed through the proxy, then promoted."""
    step(
        f"a canary of a new image taking {CANARY_WEIGHT}% of requests (one replica)",
        "inference",
        "canary",
        "demo-chat",
        "--image",
        CANARY_IMAGE,
        "--weight",
        str(CANARY_WEIGHT),
        "--replicas",
        "1",
    )
    wait_for(
        lambda: DEMO_CANARY in observed_split(clusters, "us-east-1", "demo-chat", 5),
        "the us-east-1 proxy to route to the canary",
        echo,
    )
    engine_groups.update(clusters.kubelets["us-east-1"].pids())
    echo(f"\n# the split observed: {SPLIT_REQUESTS} requests through the us-east-1 proxy")
    seen = observed_split(clusters, "us-east-1", "demo-chat", SPLIT_REQUESTS)
    for service, count in sorted(seen.items()):
        echo(f"  {service}: {count} ({100 * count / SPLIT_REQUESTS:.0f}%)")
    share = 100 * seen[DEMO_CANARY] / SPLIT_REQUESTS
    echo(f"  canary share observed {share:.0f}%, set {CANARY_WEIGHT}%")
    step("promote: the canary's image becomes the endpoint's", "inference", "promote", "demo-chat")
    wait_for(
        lambda: (
            not _canary_objects(clusters)
            and set(observed_split(clusters, "us-east-1", "demo-chat", 10)) == {"demo-chat"}
        ),
        "one version to answer in us-east-1 (the promoted image, the canary removed)",
        echo,
    )


def _canary_objects(clusters: LocalClusters) -> list[str]:
    """The canary's objects any Region still holds."""
    return [
        obj["metadata"]["name"]
        for local in clusters.reconcilers.regions.values()
        for obj in local.api.endpoint_objects()
        if obj["metadata"]["name"] == DEMO_CANARY
    ]


def _bench(
    step: Callable[..., str], echo: Callable[[str], None], env: dict[str, str], bench_dir: Path, engine: str
) -> None:
    """`gco bench rounds` of two local engines; the evidence checked and its report page named."""
    manifest, prompts = demo_bench.write_inputs(bench_dir / "inputs", engine)
    echo(f"\n# a benchmark of two {engine} engines: manifest {manifest}, prompts {prompts}")
    echo("  ... waiting for the rounds (a progress line per finished cell)")
    output = step(
        f"two engines in Williams order ({demo_bench.ROUNDS} rounds: AB, BA), the evidence to the run "
        "directory and the local bucket",
        *demo_bench.rounds_arguments(manifest, prompts, bench_dir / "run", EVIDENCE_BUCKET),
    )
    evidence = next(
        (line.split(": ", 1)[1] for line in output.splitlines() if line.startswith("evidence: ")), None
    )
    if evidence is None:
        raise DemoStepError("gco bench rounds printed no evidence path")
    step("the evidence validates against its schema and digest", "bench", "report", evidence)
    record_id = Path(evidence).stem
    bucket = aws.client("s3", endpoint_url=env[ENDPOINT_URL_ENV])
    keys = [item["Key"] for item in bucket.list_objects_v2(Bucket=EVIDENCE_BUCKET).get("Contents", [])]
    stored = [key for key in keys if record_id in key]
    echo(f"# in s3://{EVIDENCE_BUCKET}: {', '.join(stored) if stored else '(not found)'}")
    if not stored:
        raise DemoStepError(f"evidence {record_id} is not in s3://{EVIDENCE_BUCKET}")
    echo(f"# the report page: {Path(evidence).with_suffix('.html')}")
