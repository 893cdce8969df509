"""`gco local up|env|status|down`: the embedded stack as background processes tracked by pid.

`up` starts, each in its own session so that a terminal's signals do not reach them:

- the moto server (DynamoDB with streams, S3, SSM, Step Functions) on a loopback port, then creates
  the endpoint table with its stream, the evidence bucket and the validation policy's parameter
  (`--validation-policy`, as the global stack writes it in AWS: `gco.admission.policy`) in it;
- per Region a `gco.local.region.node` process: stand-in cluster, reconciler, engines, autoscaler, proxy;
- the global address, a `gco.local.front.process` in front of every Region's proxy (bearer keys from
  the keys table it creates, `gco-api-keys`; docs/local.md).

and records them in `<state-dir>/stack.json` (parts with pid and URL, the environment to use).
The state directory is per user (`$XDG_STATE_HOME/gco/local`, else `~/.local/state/gco/local`)
unless `--state-dir` names another; every command takes the same option.

`down` stops every part (SIGTERM to its group, SIGKILL after a timeout) and then every engine or
nginx group the Regions reported (their `.children` files), so a crashed part leaves nothing
behind; each only while its recorded pid still names the process started (its start time, read
when it was spawned, checked before every signal: `gco.processes`), so a reused pid is skipped and
said so; a second `up` while one runs, or while one is starting (`statelock`: a lock on
the state directory), is refused and changes nothing; `down` also stops every process an `up`
recorded starting, so an `up` that died half-way leaves nothing running either.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import botocore.exceptions
import httpx
from pydantic import BaseModel, ConfigDict, Field

from gco import aws
from gco.admission.policy import PolicySetting, SsmPolicySource
from gco.endpoints import EndpointStore, init_table
from gco.endpoints.admissions import Policy
from gco.endpoints.names import region_list
from gco.env import (
    CLUSTER_URLS_ENV,
    DEFAULT_REGION_ENV,
    DEFAULT_TABLE,
    ENDPOINT_URL_ENV,
    EVIDENCE_BUCKET_ENV,
    HOME_REGION_ENV,
    LOCAL_REGISTRY_ENV,
    TABLE_ENV,
    VALIDATION_POLICY_ENV,
)
from gco.global_access.key_store import DEFAULT_KEYS_TABLE, KEYS_TABLE_ENV, create_keys_table
from gco.inference.invoke import GLOBAL_URL_ENV, INVOKE_CA_BUNDLE_ENV, INVOKE_URLS_ENV
from gco.local.assembly.deployed import (
    LAMBDA_SERVICE_ENV,
    RUNTIME_SDK_DIR,
    client_as,
    make_identities,
)
from gco.local.assembly.rollouts import SFN_ENDPOINT_ENV
from gco.local.assembly.runtime_sdk import runtime_sdk
from gco.local.assembly.synth import local_assembly
from gco.local.errors import LocalStackError, StateFileError
from gco.local.front import process as front_process
from gco.local.moto.motoserver import enforce_iam
from gco.local.processes import statefiles, statelock
from gco.local.processes.listen import free_port
from gco.local.processes.statefiles import (
    STATE_FILE,
    FrontReport,
    NodeReport,
    Part,
    RegionChildren,
    StackState,
)
from gco.local.region import faults
from gco.local.region.nginx import nginx_path, self_signed
from gco.local.region.node import TLS_DIR_NAME, children_path, report_path
from gco.processes.identity import Started, record, running
from gco.processes.interpreter import python_module
from gco.processes.proc import is_stopped
from gco.processes.signals import stop_groups
from gco.reconcile.proxy.routes import HEALTH_PATH

# The registry stand-in's tags (`gco.admission.images.LocalImageResolver`), in the state directory.
REGISTRY_FILE = "registry.json"
EVIDENCE_BUCKET = "gco-local-evidence"
DEFAULT_REGIONS = ("us-east-1", "us-west-2")
START_TIMEOUT_S = 60.0
ANSWER_TIMEOUT_S = 2.0  # how long `status` waits for each part to answer
STOP_TIMEOUT_S = 10.0
POLL_S = 0.1


class PartStatus(BaseModel):
    """One row of `gco local status`: a part, whether its process lives and whether it answers."""

    model_config = ConfigDict(frozen=True)

    part: str
    pid: int
    alive: bool
    answers: bool
    url: str
    # A Region whose process is gone: the groups it reported (engines, nginx) that live on as orphans,
    # which may still pass health checks and relay errors; `down` stops them.
    orphans: list[int] = Field(default_factory=list)


class DownReport(BaseModel):
    """What `down` stopped (the parts' names) and what it skipped, each with why."""

    model_config = ConfigDict(frozen=True)

    stopped: list[str]
    skipped: list[str]


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gco" / "local"


def read_state(state_dir: Path) -> StackState | None:
    """The stack recorded in `state_dir`; None when none is.

    Raises:
        StateFileError: `stack.json` is not one gco wrote.
    """
    return statefiles.read(state_dir / STATE_FILE, StackState)


def _spawn(
    argv: Sequence[str], log: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], Started]:
    """Start `argv` in a session of its own (with `env`, else this process's environment); its start
    time is read while it is still our unreaped child, so its pid cannot yet name another process."""
    with log.open("ab") as out:
        process = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
    return process, record(process.pid)


def _until(check: Callable[[], bool], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(POLL_S)
    return check()


def _answers(url: str, verify: str | None = None, timeout: float = ANSWER_TIMEOUT_S) -> bool:
    """Whether `url` gives any HTTP answer within `timeout` s (a 401 or 404 answers too)."""
    try:
        context: ssl.SSLContext | bool = ssl.create_default_context(cafile=verify) if verify else True
        httpx.get(url, timeout=timeout, verify=context)
        return True
    except (httpx.HTTPError, OSError):
        return False


def up(
    regions: Sequence[str] = DEFAULT_REGIONS,
    state_dir: Path | None = None,
    *,
    engine: str = "fake",
    home_region: str | None = None,
    validation_policy: Policy = "off",
    assembly: Path | None = None,
    synthesize: bool = False,
) -> StackState:
    """Start the stack in the background and record it, holding the state directory's lock.

    With `assembly` (a synthesized app: `gco.local.assembly.synth`), the stack runs the app's functions
    from their assets (`_deployed`): every Region's stream function and sweep, the global address's
    authorizer; moto's IAM enforcement is on, the functions sign as their roles, and the stack's own
    parts and its CLI (`gco local env`) as an operator user allowed everything. With `synthesize`
    (and no `assembly`), the app is synthesized for the Regions once it holds the lock (`local_assembly`:
    once per source tree, then kept).

    The table (and its stream) lives in `home_region`, by default the first of `regions`: the
    Region `gco local env` exports as the home Region, where every client of the stack looks for it.
    `validation_policy` is written where the CLI reads it (the SSM parameter, in the home Region)
    and exported by `gco local env`.

    Raises:
        GcoInputError: the state directory cannot be created or written (`--state-dir`).
        StackBusyError: another `up` is starting a stack from this state directory.
        LocalStackError: it already runs from this state directory, or a part did not start.
        InvalidSpecError: a Region is not a valid Region name.
        AssemblyError: the app cannot be synthesized (its log named), or `assembly` cannot be read.
    """
    state_dir = state_dir or default_state_dir()
    chosen = region_list(regions, "--regions")
    home = region_list([home_region], "--home-region")[0] if home_region else chosen[0]
    with statelock.holding(state_dir):
        if synthesize and assembly is None:
            assembly = local_assembly(chosen, home)
        app = assembly.resolve() if assembly is not None else None  # the parts run from elsewhere
        return _start(chosen, home, state_dir, engine, validation_policy, app)


def _deployed(endpoint_url: str, state_dir: Path) -> tuple[dict[str, str], dict[str, str]]:
    """For a stack from the assembly, before its parts start: the operator and the Lambda service
    stand-in made in IAM, the runtime's packages (`runtime_sdk`), then moto's IAM enforcement on.
    The operator's credentials, and the variables the parts get (both identities)."""
    operator, service = make_identities(aws.client("iam", endpoint_url=endpoint_url))
    runtime_sdk(state_dir / RUNTIME_SDK_DIR)
    enforce_iam(endpoint_url)
    return operator, {**os.environ, **operator, LAMBDA_SERVICE_ENV: json.dumps(service)}


def _start(
    chosen: list[str], home: str, state_dir: Path, engine: str, policy: Policy, assembly: Path | None
) -> StackState:
    """`up` once it holds the lock: refuse a running stack, clear a stale one, start every part."""
    current = read_state(state_dir)
    if current is not None:
        running_parts = [part for part in current.parts if running(part.process)]
        if running_parts:
            raise LocalStackError(
                f"the local stack already runs from {state_dir} (pid {running_parts[0].pid}); "
                "`gco local down` first"
            )
        down(state_dir)  # a stale record: clear what is left of it
    elif statelock.started(state_dir):
        down(state_dir)  # an `up` that died before recording the stack: stop what it started
    port = free_port()
    endpoint_url = f"http://127.0.0.1:{port}"
    parts: list[Part] = []
    moto_log = state_dir / "moto.log"
    moto, moto_started = _spawn(
        python_module("gco.local.moto.moto_app", "--host", "127.0.0.1", "--port", str(port)),
        moto_log,
    )
    statelock.record_started(state_dir, moto_started)
    parts.append(
        Part(
            kind="moto",
            pid=moto.pid,
            start_ticks=moto_started.start_ticks,
            url=endpoint_url,
            log=str(moto_log),
        )
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        if not _until(lambda: moto.poll() is None and _answers(f"{endpoint_url}/moto-api/"), deadline):
            raise LocalStackError(f"the moto server did not answer on {endpoint_url} (see {moto_log})")
        _seed(endpoint_url, home, policy)
        credentials: dict[str, str] = {}
        env: dict[str, str] | None = None
        if assembly is not None:
            credentials, env = _deployed(endpoint_url, state_dir)
        if nginx_path() is not None:
            self_signed(state_dir / TLS_DIR_NAME)  # made once here: the Regions share it
        nodes = {}
        for region in chosen:
            report_path(state_dir, region).unlink(missing_ok=True)
            log = state_dir / f"region-{region}.log"
            argv = python_module("gco.local.region.node", "--region", region, "--endpoint-url", endpoint_url)
            argv += ["--table", DEFAULT_TABLE, "--home-region", home, "--state-dir", str(state_dir)]
            argv += ["--engine", engine]
            argv += ["--assembly", str(assembly), "--evidence-bucket", EVIDENCE_BUCKET] if assembly else []
            process, started = _spawn(argv, log, env)
            nodes[region] = (process, log)
            statelock.record_started(state_dir, started)
            parts.append(
                Part(
                    kind="region",
                    region=region,
                    pid=process.pid,
                    start_ticks=started.start_ticks,
                    url="",
                    log=str(log),
                )
            )
        reports = _reports(state_dir, nodes, deadline)
        front = _start_front(state_dir, endpoint_url, home, reports, deadline, assembly, env)
        parts.append(front)
    except BaseException:
        if not stop_groups([part.process for part in parts], STOP_TIMEOUT_S).survivors:
            statelock.forget_started(state_dir)
        raise
    parts = [
        part.model_copy(update={"url": reports[part.region].proxy_url}) if part.region is not None else part
        for part in parts
    ]
    state = StackState(
        endpoint_url=endpoint_url,
        table=DEFAULT_TABLE,
        home_region=home,
        regions=chosen,
        evidence_bucket=EVIDENCE_BUCKET,
        parts=parts,
        invoke_urls={region: report.invoke_url for region, report in reports.items()},
        cluster_urls={region: report.api_url for region, report in reports.items()},
        ca_bundle=next((r.ca_bundle for r in reports.values() if r.ca_bundle), None),
        validation_policy=policy,
        registry=str(state_dir / REGISTRY_FILE),
        global_url=front.url,
        assembly=str(assembly) if assembly is not None else None,
        credentials=credentials,
        states_url=next((r.states_url for r in reports.values() if r.states_url), None),
        rollout_machine=next((r.rollout_machine for r in reports.values() if r.rollout_machine), None),
    )
    statefiles.write(state_dir / STATE_FILE, state)
    return state


def _reports(
    state_dir: Path, nodes: dict[str, tuple[subprocess.Popen[bytes], Path]], deadline: float
) -> dict[str, NodeReport]:
    """Each Region's report, once its process wrote it (before `deadline`).

    Raises:
        LocalStackError: a Region's process ended or did not report in time.
        StateFileError: a report is not one gco wrote.
    """
    reports: dict[str, NodeReport] = {}
    for region, (process, log) in nodes.items():
        path = report_path(state_dir, region)
        if not _until(lambda p=process, f=path: p.poll() is None and f.exists(), deadline):  # type: ignore[misc]
            raise LocalStackError(f"Region {region} did not start (see {log})")
        report = statefiles.read(path, NodeReport)
        if report is None:
            raise LocalStackError(f"Region {region} did not report (see {log})")
        reports[region] = report
    return reports


def _seed(endpoint_url: str, home: str, policy: Policy) -> None:
    """What the stacks create in AWS, made on the moto server: the endpoint table with its stream, the
    keys table, the evidence bucket and the validation policy's parameter, all in the home Region
    (moto keeps each Region's tables apart, as AWS does: each is made where clients look)."""
    init_table(aws.client("dynamodb", region=home, endpoint_url=endpoint_url), DEFAULT_TABLE)
    create_keys_table(aws.client("dynamodb", region=home, endpoint_url=endpoint_url), DEFAULT_KEYS_TABLE)
    _evidence_bucket(aws.client("s3", region=home, endpoint_url=endpoint_url), home)
    SsmPolicySource(aws.client("ssm", region=home, endpoint_url=endpoint_url)).write(
        PolicySetting(policy=policy, evidence_bucket=EVIDENCE_BUCKET)
    )


def _start_front(
    state_dir: Path,
    endpoint_url: str,
    home: str,
    reports: dict[str, NodeReport],
    deadline: float,
    assembly: Path | None = None,
    env: dict[str, str] | None = None,
) -> Part:
    """Start the global address in front of the Regions' proxies (nearest first: the order given).

    Raises:
        LocalStackError: it did not report serving before `deadline`.
        StateFileError: its report is not one gco wrote.
    """
    path = front_process.report_path(state_dir)
    path.unlink(missing_ok=True)
    log = state_dir / "front.log"
    proxies = {region: report.proxy_url for region, report in reports.items()}
    argv = python_module("gco.local.front.process", "--endpoint-url", endpoint_url)
    argv += ["--home-region", home, "--table", DEFAULT_TABLE, "--keys-table", DEFAULT_KEYS_TABLE]
    argv += ["--proxies", json.dumps(proxies), "--state-dir", str(state_dir)]
    bundle = next((r.ca_bundle for r in reports.values() if r.ca_bundle), None)
    argv += ["--ca-bundle", bundle] if bundle else []
    argv += ["--assembly", str(assembly)] if assembly is not None else []
    process, started = _spawn(argv, log, env)
    statelock.record_started(state_dir, started)
    part = Part(kind="front", pid=process.pid, start_ticks=started.start_ticks, url="", log=str(log))
    if not _until(lambda: process.poll() is None and path.exists(), deadline):
        stop_groups([part.process], STOP_TIMEOUT_S)
        raise LocalStackError(f"the global address did not start (see {log})")
    report = statefiles.read(path, FrontReport)
    if report is None:
        raise LocalStackError(f"the global address did not report (see {log})")
    return part.model_copy(update={"url": report.url})


def _evidence_bucket(s3: Any, region: str) -> None:
    """The evidence bucket in `region`: outside us-east-1 S3 needs the Region as its location
    constraint (CreateBucket's API reference), and moto refuses the call without it as S3 does."""
    location = {} if region == aws.DEFAULT_REGION else {"LocationConstraint": region}
    try:
        s3.create_bucket(
            Bucket=EVIDENCE_BUCKET, **({"CreateBucketConfiguration": location} if location else {})
        )
    except botocore.exceptions.ClientError as error:
        if error.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
            raise


def credentials(state: StackState) -> dict[str, str]:
    """The access key to use the stack with: the operator's where IAM is enforced (a stack from the
    app), else the local server's fixed one."""
    return state.credentials or {
        "AWS_ACCESS_KEY_ID": aws.LOCAL_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": aws.LOCAL_CREDENTIALS["aws_secret_access_key"],
    }


def environment(state: StackState) -> dict[str, str]:
    """The variables that point the CLI (and boto3) at the local stack."""
    env = {
        ENDPOINT_URL_ENV: state.endpoint_url,
        **credentials(state),
        DEFAULT_REGION_ENV: state.home_region,
        HOME_REGION_ENV: state.home_region,
        TABLE_ENV: state.table,
        EVIDENCE_BUCKET_ENV: state.evidence_bucket,
        INVOKE_URLS_ENV: json.dumps(state.invoke_urls, sort_keys=True),
    }
    if state.cluster_urls:
        env[CLUSTER_URLS_ENV] = json.dumps(state.cluster_urls, sort_keys=True)
    if state.ca_bundle:
        env[INVOKE_CA_BUNDLE_ENV] = state.ca_bundle
    env[VALIDATION_POLICY_ENV] = state.validation_policy
    if state.registry:
        env[LOCAL_REGISTRY_ENV] = state.registry
    if state.states_url:  # the rollout state machine's (a stack from the app): `--via-step-functions`
        env[SFN_ENDPOINT_ENV] = state.states_url
    if state.global_url:
        env[GLOBAL_URL_ENV] = state.global_url
        env[KEYS_TABLE_ENV] = state.keys_table
    return env


def store(state: StackState) -> EndpointStore:
    """The endpoint store of the stack `state` describes (`credentials`)."""
    dynamodb = client_as("dynamodb", state.home_region, state.endpoint_url, credentials(state))
    return EndpointStore(dynamodb, state.table)


def require(state_dir: Path | None) -> StackState:
    """The state of the stack running from `state_dir` (the default one when None).

    Raises:
        LocalStackError: no stack is up there.
        StateFileError: its `stack.json` is not one gco wrote.
    """
    state = read_state(state_dir or default_state_dir())
    if state is None:
        raise LocalStackError(
            f"the local stack is not up in {state_dir or default_state_dir()}; run `gco local up`"
        )
    return state


def status(
    state: StackState, timeout: float = ANSWER_TIMEOUT_S, state_dir: Path | None = None
) -> list[PartStatus]:
    """Every part: pid, whether the process lives (and is not stopped), and whether it answers; for a
    Region whose process is gone, the groups it reported that still run (`orphans`, read from its
    children file in `state_dir`, the default one when None).

    A part answers when each of its URLs gives an HTTP answer within `timeout` s: the moto
    server its API, a Region both its proxy's `/healthz` and its stand-in API server (served by
    the Region's own process: the proxy may be an nginx of its own that answers while the Region's
    process is stopped or hung). `alive` is false for a process stopped by a signal (SIGSTOP), and
    for a pid that now names another process than the one started.
    """
    rows: list[PartStatus] = []
    for part in state.parts:
        by_kind: dict[str, list[tuple[str, str | None]]] = {
            "region": [(part.url + HEALTH_PATH, state.ca_bundle)],
            "front": [(part.url + HEALTH_PATH, None)],  # the global address is plain HTTP on loopback
            "moto": [(part.url + "/moto-api/", None)],
        }
        checks = by_kind[part.kind]
        if part.region is not None and part.region in state.cluster_urls:
            checks.append((state.cluster_urls[part.region], None))
        living = running(part.process) and not is_stopped(part.pid)
        answers = living and all(_answers(url, verify, timeout) for url, verify in checks)
        orphans = []
        if part.region is not None and not running(part.process):
            orphans = _orphans(children_path(state_dir or default_state_dir(), part.region))
        rows.append(
            PartStatus(
                part=part.name, pid=part.pid, alive=living, answers=answers, url=part.url, orphans=orphans
            )
        )
    return rows


def _orphans(children: Path) -> list[int]:
    """The process groups a Region's children file names that still run (their leader's pid)."""
    try:
        reported = statefiles.read(children, RegionChildren)
    except StateFileError:
        return []  # not a file gco wrote: nothing is claimed of it (`down` refuses it, saying so)
    return [group.pid for group in reported.groups if running(group)] if reported is not None else []


def down(state_dir: Path | None = None) -> DownReport:
    """Stop every part and every group the Regions reported, each only while its recorded pid still
    names the process started; returns what was stopped (names) and what was skipped (and why).

    Raises:
        StateFileError: a state file is not one gco wrote (nothing is signalled).
        LocalStackError: a process group survived SIGKILL.
    """
    state_dir = state_dir or default_state_dir()
    state = read_state(state_dir)
    started = statelock.started(state_dir)  # what an `up` started, recorded or not in stack.json
    # Without a record, every Region's children file there is (`children_path` with `*` is a glob).
    regions = state.regions if state is not None else []
    files = [children_path(state_dir, r) for r in regions] or sorted(
        state_dir.glob(children_path(Path(), "*").name)
    )
    if state is None and not started:
        return DownReport(stopped=[], skipped=[])
    reported: list[Started] = []
    for path in files:  # every file read before anything is signalled: a hostile one stops it all
        children = statefiles.read(path, RegionChildren)
        reported += children.groups if children is not None else []
    parts = state.parts if state is not None else []
    recorded = {part.pid for part in parts}
    unrecorded = [process for process in started if process.pid not in recorded]
    nodes = [part.process for part in parts if part.kind != "moto"] + unrecorded
    first = stop_groups(nodes, STOP_TIMEOUT_S)  # each Region stops its engines and nginx on SIGTERM
    for path in files:
        path.unlink(missing_ok=True)
    for region in regions:
        report_path(state_dir, region).unlink(missing_ok=True)
        faults.forget(state_dir, region)
    front_process.report_path(state_dir).unlink(missing_ok=True)
    left = stop_groups(reported, STOP_TIMEOUT_S)  # what a crashed Region left
    moto = stop_groups([part.process for part in parts if part.kind == "moto"], STOP_TIMEOUT_S)
    survivors = first.survivors + left.survivors + moto.survivors
    if survivors:
        raise LocalStackError(f"process groups {survivors} survived SIGKILL; the state stays in {state_dir}")
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    statelock.forget_started(state_dir)
    skipped = {s.pid: s.why for stop in (first, left, moto) for s in stop.skipped}
    names = {group.pid: f"group {group.pid}" for group in reported}  # an engine's or nginx's
    names |= {p.pid: f"pid {p.pid} (started, not recorded)" for p in unrecorded}
    names |= {part.pid: part.name for part in parts}
    return DownReport(
        stopped=[
            names[p]
            for p in [*(part.pid for part in parts), *(p.pid for p in unrecorded)]
            if p not in skipped
        ],
        skipped=[f"{names.get(pid, f'pid {pid}')}: {why}" for pid, why in skipped.items()],
    )
