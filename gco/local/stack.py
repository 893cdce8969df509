"""`gco local up|env|status|down`: the embedded stack as background processes tracked by pid.

`up` starts, each in its own session so that a terminal's signals do not reach them:

- the moto server (DynamoDB with streams, S3, Step Functions) on a loopback port, then creates the
  endpoint table with its stream and the evidence bucket in it;
- per Region a `gco.local.region.node` process: stand-in cluster, reconciler, engines, autoscaler, proxy;
- the global address, a `gco.local.front.process` in front of every Region's proxy (bearer keys from
  the keys table it creates, `gco-api-keys`; docs/local.md).

and records them in `<state-dir>/stack.json` (parts with pid and URL, the environment to use).
The state directory is per user (`$XDG_STATE_HOME/gco/local`, else `~/.local/state/gco/local`)
unless `--state-dir` names another; every command takes the same option.

`down` stops every part by pid (SIGTERM to its group, SIGKILL after a timeout) and then every
engine or nginx group the Regions reported (their `.children` files), so a crashed part leaves
nothing behind; a second `up` while one runs, or while one is starting (`statelock`: a lock on
the state directory), is refused and changes nothing; `down` also stops every process an `up`
recorded starting, so an `up` that died half-way leaves nothing running either.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import botocore.exceptions
import httpx
from pydantic import BaseModel, ConfigDict, Field

from gco import aws
from gco.bench.process import group_members, stopped
from gco.endpoints import init_table
from gco.endpoints.names import region_list
from gco.env import (
    CLUSTER_URLS_ENV,
    DEFAULT_REGION_ENV,
    DEFAULT_TABLE,
    ENDPOINT_URL_ENV,
    EVIDENCE_BUCKET_ENV,
    HOME_REGION_ENV,
    TABLE_ENV,
)
from gco.global_access.key_store import DEFAULT_KEYS_TABLE, KEYS_TABLE_ENV, create_keys_table
from gco.invoke import GLOBAL_URL_ENV, INVOKE_CA_BUNDLE_ENV, INVOKE_URLS_ENV
from gco.local.errors import LocalStackError
from gco.local.front import process as front_process
from gco.local.processes import statelock
from gco.local.processes.listen import free_port
from gco.local.region import faults
from gco.local.region.nginx import nginx_path, self_signed
from gco.local.region.node import TLS_DIR_NAME, children_path, report_path
from gco.reconcile.proxy.routes import HEALTH_PATH

STATE_FILE = "stack.json"
EVIDENCE_BUCKET = "gco-local-evidence"
DEFAULT_REGIONS = ("us-east-1", "us-west-2")
START_TIMEOUT_S = 60.0
ANSWER_TIMEOUT_S = 2.0  # how long `status` waits for each part to answer
STOP_TIMEOUT_S = 10.0
POLL_S = 0.1


class Part(BaseModel):
    """One background process of the stack."""

    model_config = ConfigDict(frozen=True)

    name: str
    pid: int
    url: str
    log: str


class StackState(BaseModel):
    """What `up` started and what `env` prints."""

    model_config = ConfigDict(frozen=True)

    endpoint_url: str
    table: str
    home_region: str
    regions: list[str]
    evidence_bucket: str
    parts: list[Part]
    invoke_urls: dict[str, str]
    cluster_urls: dict[str, str] = Field(default_factory=dict)  # each Region's stand-in API server
    ca_bundle: str | None = None
    global_url: str | None = None  # the global address in front of every Region's proxy
    keys_table: str = DEFAULT_KEYS_TABLE


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gco" / "local"


def read_state(state_dir: Path) -> StackState | None:
    path = state_dir / STATE_FILE
    if not path.exists():
        return None
    return StackState.model_validate_json(path.read_text(encoding="utf-8"))


def alive(pid: int) -> bool:
    return bool(group_members(pid))


def _spawn(argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )


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
) -> StackState:
    """Start the stack in the background and record it, holding the state directory's lock.

    The table (and its stream) lives in `home_region`, by default the first of `regions`: the
    Region `gco local env` exports as the home Region, where every client of the stack looks for it.

    Raises:
        GcoInputError: the state directory cannot be created or written (`--state-dir`).
        StackBusyError: another `up` is starting a stack from this state directory.
        LocalStackError: it already runs from this state directory, or a part did not start.
        InvalidSpecError: a Region is not a valid Region name.
    """
    state_dir = state_dir or default_state_dir()
    chosen = region_list(regions, "--regions")
    home = region_list([home_region], "--home-region")[0] if home_region else chosen[0]
    with statelock.holding(state_dir):
        return _start(chosen, home, state_dir, engine)


def _start(chosen: list[str], home: str, state_dir: Path, engine: str) -> StackState:
    """`up` once it holds the lock: refuse a running stack, clear a stale one, start every part."""
    current = read_state(state_dir)
    if current is not None:
        running = [part for part in current.parts if alive(part.pid)]
        if running:
            raise LocalStackError(
                f"the local stack already runs from {state_dir} (pid {running[0].pid}); "
                "`gco local down` first"
            )
        down(state_dir)  # a stale record: clear what is left of it
    elif statelock.started(state_dir):
        down(state_dir)  # an `up` that died before recording the stack: stop what it started
    port = free_port()
    endpoint_url = f"http://127.0.0.1:{port}"
    parts: list[Part] = []
    moto_log = state_dir / "moto.log"
    moto = _spawn(
        [sys.executable, "-m", "gco.local.moto.moto_app", "--host", "127.0.0.1", "--port", str(port)],
        moto_log,
    )
    statelock.record_started(state_dir, moto.pid)
    parts.append(Part(name="moto", pid=moto.pid, url=endpoint_url, log=str(moto_log)))
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        if not _until(lambda: moto.poll() is None and _answers(f"{endpoint_url}/moto-api/"), deadline):
            raise LocalStackError(f"the moto server did not answer on {endpoint_url} (see {moto_log})")
        # moto keeps each Region's tables apart, as AWS does: the table is made where clients look.
        init_table(aws.client("dynamodb", region=home, endpoint_url=endpoint_url), DEFAULT_TABLE)
        create_keys_table(aws.client("dynamodb", region=home, endpoint_url=endpoint_url), DEFAULT_KEYS_TABLE)
        _evidence_bucket(aws.client("s3", region=home, endpoint_url=endpoint_url), home)
        if nginx_path() is not None:
            self_signed(state_dir / TLS_DIR_NAME)  # made once here: the Regions share it
        nodes = {}
        for region in chosen:
            report_path(state_dir, region).unlink(missing_ok=True)
            log = state_dir / f"region-{region}.log"
            argv = [
                sys.executable,
                "-m",
                "gco.local.region.node",
                "--region",
                region,
                "--endpoint-url",
                endpoint_url,
            ]
            argv += ["--table", DEFAULT_TABLE, "--home-region", home, "--state-dir", str(state_dir)]
            argv += ["--engine", engine]
            nodes[region] = (_spawn(argv, log), log)
            statelock.record_started(state_dir, nodes[region][0].pid)
            parts.append(Part(name=f"region {region}", pid=nodes[region][0].pid, url="", log=str(log)))
        reports = {}
        for region, (process, log) in nodes.items():
            path = report_path(state_dir, region)
            if not _until(lambda p=process, f=path: p.poll() is None and f.exists(), deadline):  # type: ignore[misc]
                raise LocalStackError(f"Region {region} did not start (see {log})")
            reports[region] = json.loads(path.read_text(encoding="utf-8"))
        front = _start_front(state_dir, endpoint_url, home, reports, deadline)
        parts.append(front)
    except BaseException:
        if not _stop_groups([part.pid for part in parts]):
            statelock.forget_started(state_dir)
        raise
    parts = [
        part.model_copy(update={"url": reports[part.name.split(" ", 1)[1]]["proxy_url"]})
        if part.name.startswith("region ")
        else part
        for part in parts
    ]
    state = StackState(
        endpoint_url=endpoint_url,
        table=DEFAULT_TABLE,
        home_region=home,
        regions=chosen,
        evidence_bucket=EVIDENCE_BUCKET,
        parts=parts,
        invoke_urls={region: report["invoke_url"] for region, report in reports.items()},
        cluster_urls={region: report["api_url"] for region, report in reports.items()},
        ca_bundle=next((r["ca_bundle"] for r in reports.values() if r.get("ca_bundle")), None),
        global_url=front.url,
    )
    (state_dir / STATE_FILE).write_text(state.model_dump_json(indent=2), encoding="utf-8")
    return state


def _start_front(
    state_dir: Path, endpoint_url: str, home: str, reports: dict[str, Any], deadline: float
) -> Part:
    """Start the global address in front of the Regions' proxies (nearest first: the order given).

    Raises:
        LocalStackError: it did not report serving before `deadline`.
    """
    path = front_process.report_path(state_dir)
    path.unlink(missing_ok=True)
    log = state_dir / "front.log"
    proxies = {region: report["proxy_url"] for region, report in reports.items()}
    argv = [sys.executable, "-m", "gco.local.front.process", "--endpoint-url", endpoint_url]
    argv += ["--home-region", home, "--table", DEFAULT_TABLE, "--keys-table", DEFAULT_KEYS_TABLE]
    argv += ["--proxies", json.dumps(proxies), "--state-dir", str(state_dir)]
    bundle = next((r["ca_bundle"] for r in reports.values() if r.get("ca_bundle")), None)
    argv += ["--ca-bundle", bundle] if bundle else []
    process = _spawn(argv, log)
    statelock.record_started(state_dir, process.pid)
    if not _until(lambda: process.poll() is None and path.exists(), deadline):
        process.terminate()
        raise LocalStackError(f"the global address did not start (see {log})")
    url = json.loads(path.read_text(encoding="utf-8"))["url"]
    return Part(name="front", pid=process.pid, url=url, log=str(log))


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


def environment(state: StackState) -> dict[str, str]:
    """The variables that point the CLI (and boto3) at the local stack."""
    env = {
        ENDPOINT_URL_ENV: state.endpoint_url,
        "AWS_ACCESS_KEY_ID": aws.LOCAL_CREDENTIALS["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": aws.LOCAL_CREDENTIALS["aws_secret_access_key"],
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
    if state.global_url:
        env[GLOBAL_URL_ENV] = state.global_url
        env[KEYS_TABLE_ENV] = state.keys_table
    return env


def require(state_dir: Path | None) -> StackState:
    """The state of the stack running from `state_dir` (the default one when None).

    Raises:
        LocalStackError: no stack is up there.
    """
    state = read_state(state_dir or default_state_dir())
    if state is None:
        raise LocalStackError(
            f"the local stack is not up in {state_dir or default_state_dir()}; run `gco local up`"
        )
    return state


def status(state: StackState, timeout: float = ANSWER_TIMEOUT_S) -> list[dict[str, object]]:
    """Every part: pid, whether the process lives (and is not stopped), and whether it answers.

    A part answers when each of its URLs gives an HTTP answer within `timeout` s: the moto
    server its API, a Region both its proxy's `/healthz` and its stand-in API server (served by
    the Region's own process: the proxy may be an nginx of its own that answers while the Region's
    process is stopped or hung). `alive` is false for a process stopped by a signal (SIGSTOP).
    """
    rows: list[dict[str, object]] = []
    for part in state.parts:
        region = part.name.removeprefix("region ") if part.name != "moto" else None
        checks = (
            [(part.url + "/moto-api/", None)]
            if region is None
            else [(part.url + HEALTH_PATH, state.ca_bundle)]
        )
        if region is not None and region in state.cluster_urls:
            checks.append((state.cluster_urls[region], None))
        living = alive(part.pid) and not stopped(part.pid)
        answers = living and all(_answers(url, verify, timeout) for url, verify in checks)
        rows.append(
            {"part": part.name, "pid": part.pid, "alive": living, "answers": answers, "url": part.url}
        )
    return rows


def _stop_groups(groups: Sequence[int]) -> list[int]:
    """SIGTERM each group, SIGKILL what is left after the timeout; returns the groups that survived."""
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    _until(lambda: not any(group_members(pgid) for pgid in groups), deadline)
    for pgid in groups:
        if group_members(pgid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
    _until(lambda: not any(group_members(pgid) for pgid in groups), time.monotonic() + STOP_TIMEOUT_S)
    return [pgid for pgid in groups if group_members(pgid)]


def down(state_dir: Path | None = None) -> list[str]:
    """Stop every part and every group the Regions reported; returns what was stopped (names).

    Raises:
        LocalStackError: a process group survived SIGKILL.
    """
    state_dir = state_dir or default_state_dir()
    state = read_state(state_dir)
    started = statelock.started(state_dir)  # what an `up` started, recorded or not in stack.json
    if state is None and not started:
        return []
    parts = state.parts if state is not None else []
    recorded = {part.pid for part in parts}
    unrecorded = [pid for pid in started if pid not in recorded]
    nodes = [part.pid for part in parts if part.name != "moto"] + unrecorded
    survivors = _stop_groups(nodes)  # each Region stops its engines and nginx on SIGTERM
    reported: list[int] = []
    # Without a record, every Region's children file there is (`children_path` with `*` is a glob).
    regions = state.regions if state is not None else []
    files = [children_path(state_dir, r) for r in regions] or sorted(
        state_dir.glob(children_path(Path(), "*").name)
    )
    for path in files:
        if path.exists():
            reported += [int(line) for line in path.read_text(encoding="utf-8").split() if line.isdigit()]
        path.unlink(missing_ok=True)
    for region in regions:
        report_path(state_dir, region).unlink(missing_ok=True)
        faults.forget(state_dir, region)
    front_process.report_path(state_dir).unlink(missing_ok=True)
    survivors += _stop_groups(reported)  # what a crashed Region left
    survivors += _stop_groups([part.pid for part in parts if part.name == "moto"])
    if survivors:
        raise LocalStackError(f"process groups {survivors} survived SIGKILL; the state stays in {state_dir}")
    (state_dir / STATE_FILE).unlink(missing_ok=True)
    statelock.forget_started(state_dir)
    return [part.name for part in parts] + [f"pid {pid} (started, not recorded)" for pid in unrecorded]
