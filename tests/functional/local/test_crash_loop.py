"""An engine that crashes is restarted as a kubelet restarts a container, kept out of its Service while
not ready, and reported: the Region's status names the exit and the restarts, `status` prints them and
`deploy --wait` does not succeed while the replica crash-loops."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gco import engines
from gco.cli import main
from gco.endpoints import EndpointStore
from gco.local.demo.demo import explain_failure
from gco.local.moto.motoserver import MotoServer
from gco.local.region.cluster import LocalClusters
from gco.local.region.engines import FAKE_ENGINE, EngineTable
from gco.local.region.kubelet import LocalKubelet, Replica, RestartPolicy
from tests.functional.conftest import Deployed
from tests.functional.local.conftest import deployed_clusters, eventually
from tests.unit.reconcile.records import EAST, IMAGE

SPEC: dict[str, Any] = {"image": IMAGE, "model_id": "HuggingFaceTB/SmolLM2-135M", "model_revision": "a" * 40}
RESTART = RestartPolicy(initial=1.0, cap=2.0, reset_after=60.0)
SEGV_EXIT = "server exited 139 (SIGSEGV)"  # the container `server`; 128 + 11, as the runtime reports it


class HoldableClock:
    """The kubelet's clock: `time.monotonic` until `hold()`, then the moment it was held. A replica
    waits out its back-off until the clock passes the wait's end, so once held, a replica in its
    back-off stays there (and one running enters it at its next exit and stays): the test reads a
    state that lasts, not a window between two back-offs."""

    def __init__(self) -> None:
        self.held: float | None = None

    def __call__(self) -> float:
        return self.held if self.held is not None else time.monotonic()

    def hold(self) -> None:
        self.held = time.monotonic()


def crashing(*flags: str) -> EngineTable:
    argv = (*FAKE_ENGINE, "--style", "{framework}", "--port", "{port}", "--model", "{model}")
    return EngineTable(commands={f: (*argv, "--crash-signal", "SIGSEGV", *flags) for f in engines.names()})


@pytest.fixture
def clock() -> HoldableClock:
    return HoldableClock()


@pytest.fixture
def stack(
    request: pytest.FixtureRequest, deployed: Deployed, tmp_path: Path, clock: HoldableClock
) -> Iterator[LocalClusters]:
    """One Region run from the synthesized app, its engines crashing as `request.param` says."""
    with deployed_clusters(
        deployed,
        [EAST],
        tmp_path / "engines",
        wait=0.2,
        poll=0.02,
        proxy="python",
        table=crashing(*request.param),
        restart=RESTART,
        clock=clock,
    ) as clusters:
        clusters.start(sync_interval=0.05, poll_interval=0.05, sweep_interval=0.3)
        yield clusters


def recorded(kubelet: LocalKubelet) -> Replica:
    """The one replica the kubelet runs, as it recorded it (restarts, the back-off it waits out)."""
    ((_, replica, _),) = kubelet.engine_logs()
    return replica


def backing_off(store: EndpointStore, name: str) -> bool:
    return "CrashLoopBackOff" in str(status_of(store, name).get("reason") or "")


def status_of(store: EndpointStore, name: str) -> dict[str, Any]:
    record = store.get(name, consistent_read=True)
    status = record.region_status.get(EAST) if record else None
    return status.model_dump() if status else {}


@pytest.mark.slow
@pytest.mark.parametrize("stack", [("--crash-after", "1")], indirect=True)
def test_a_replica_that_crashes_on_a_request_is_restarted_with_back_off(
    store: EndpointStore, stack: LocalClusters
) -> None:
    kubelet = stack.kubelets[EAST]
    store.create("seg", SPEC, [EAST])
    eventually(lambda: status_of(store, "seg").get("state") == "running", "seg running")
    selector = {"gco.dev/endpoint": "seg"}
    assert len(kubelet.backends("gco-inference", selector)) == 1
    address = stack.services[EAST].address("gco-inference", "seg")
    answers = [
        httpx.post(f"http://{address}/v1/completions", json={"prompt": "x", "max_tokens": 2}, timeout=10)
        for _ in range(2)
    ]
    # `--crash-after 1`: it answers once, then dies by SIGSEGV on the next (the Service network says so).
    assert [answer.status_code >= 500 for answer in answers] == [False, True]
    pod = eventually(
        lambda: next(iter(kubelet.pods("gco-inference", "gco.dev/endpoint=seg")), None), "the Pod listed"
    )

    def last_state() -> dict[str, Any] | None:
        (listed,) = kubelet.pods("gco-inference", "gco.dev/endpoint=seg")
        return listed["status"]["containerStatuses"][0].get("lastState")  # type: ignore[no-any-return]

    crashed = eventually(last_state, "the exit recorded")
    assert crashed["terminated"]["signal"] == 11 and pod["metadata"]["name"].startswith("seg-")
    # Not ready while it waits: its Service sends nothing to it.
    assert kubelet.backends("gco-inference", selector) == []
    reported = eventually(lambda: (s := status_of(store, "seg")).get("reason") and s, "the crash reported")
    assert reported["state"] != "running" and reported["replicas_ready"] == 0
    assert reported["reason"] == f"{SEGV_EXIT}, CrashLoopBackOff"
    # Restarted after its back-off (1 s), ready again, and counted.
    eventually(lambda: status_of(store, "seg").get("state") == "running", "restarted and running")
    container = kubelet.pods("gco-inference", "gco.dev/endpoint=seg")[0]["status"]["containerStatuses"][0]
    assert container["restartCount"] == 1 and container["ready"]
    assert "reason" not in status_of(store, "seg")  # a running Region carries no trouble


@pytest.mark.slow
@pytest.mark.parametrize("stack", [("--crash-at-start",)], indirect=True)
def test_deploy_wait_fails_naming_the_crash_and_status_shows_it(
    store: EndpointStore,
    stack: LocalClusters,
    moto: MotoServer,
    clock: HoldableClock,
    capsys: pytest.CaptureFixture[str],
) -> None:
    flags = ["--endpoint-url", moto.url, "--table", store.table_name]
    deploy = ["inference", "deploy", "boom", "--image", IMAGE, "--region", EAST, *flags]
    assert main([*deploy, "--wait", "--timeout", "6"]) == 1
    err = capsys.readouterr().err
    assert "timed out after 6 s waiting for boom ready" in err.splitlines()[-1]
    assert SEGV_EXIT in err.splitlines()[-1] and "restarts" in err.splitlines()[-1]
    kubelet = stack.kubelets[EAST]
    eventually(lambda: recorded(kubelet).restarts >= 2, "two restarts recorded by the kubelet")
    # The Pod shows CrashLoopBackOff while the kubelet waits to restart the engine. Hold the kubelet's
    # clock: the back-off it is in (or the next one, at the engine's next exit) then never ends, so the
    # status is read inside a back-off however slowly this machine runs.
    clock.hold()
    eventually(lambda: recorded(kubelet).waiting_until is not None, "a back-off recorded by the kubelet")
    eventually(lambda: backing_off(store, "boom"), "the back-off reported")
    assert (status_of(store, "boom").get("restarts") or 0) >= 2
    assert main(["inference", "status", "boom", *flags]) == 0
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith(EAST))
    assert "0/1" in row and f"{SEGV_EXIT}, CrashLoopBackOff, restarts" in row, table
    # What the demo prints when a step fails: the Region's state with its reason, the engine's last lines.
    lines: list[str] = []
    explain_failure(lines.append, store, stack)
    assert any(line.startswith(f"  boom in {EAST}: creating 0/1 ready ({SEGV_EXIT}") for line in lines), lines
    assert "  | ERROR fake engine crashing at start on purpose" in lines
    assert sys.platform.startswith("linux")  # signals as Linux numbers them
