"""A rollout watches the endpoint it changes: stopped, scaled to zero, or its canary removed or
replaced by someone else, it ends at its next step, rolled back with a reason naming the change (the
CLI's exit 1), its own canary removed and another's kept. Against the moto server's table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from gco.endpoints import EndpointStore, canary, operations
from gco.evidence.store import LocalEvidenceStore
from gco.inference.invoke import INVOKE_URLS_ENV
from gco.local.moto.motoserver import MotoServer
from gco.processes.interpreter import python_module
from gco.rollout.blocks import Sample, Version
from gco.rollout.state import RolloutSettings
from gco.rollout.steps import INTERRUPTED, Ports, begin, step
from tests.functional.local.conftest import eventually
from tests.unit.reconcile.records import EAST, IMAGE, WEST

CANARY = "registry.example.com/vllm:next"
OTHER = "registry.example.com/vllm:other"


class Unreached:
    """The traffic port where no request may be sent: the canary is never counted ready here."""

    def send(self, region: str, version: Version) -> Sample:
        raise AssertionError(f"no request expected ({region}, {version})")


def _replace_canary(store: EndpointStore) -> None:
    canary.rollback(store, "smol")
    canary.set_canary(store, "smol", OTHER, 10)


CHANGES: dict[str, tuple[Callable[[EndpointStore], object], str, str | None]] = {
    "stopped": (lambda store: operations.stop(store, "smol"), "smol was stopped during the rollout", None),
    "scaled to zero": (
        lambda store: operations.scale(store, "smol", 0),
        "smol was scaled to zero during the rollout",
        None,
    ),
    "canary removed": (
        lambda store: canary.rollback(store, "smol"),
        f"smol's canary ({CANARY}) was removed during the rollout",
        None,
    ),
    "canary replaced": (
        _replace_canary,
        f"smol's canary was replaced during the rollout (now {OTHER})",
        OTHER,
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_rollout_ends_at_its_next_step_when_the_endpoint_changes_under_it(
    store: EndpointStore, tmp_path: Path, change: str
) -> None:
    act, reason, canary_left = CHANGES[change]
    store.create("smol", {"image": IMAGE, "replicas": 2}, [EAST, WEST])
    ports = Ports(store=store, traffic=Unreached(), evidence=[LocalEvidenceStore(tmp_path)])
    state = begin(RolloutSettings(endpoint="smol", image=CANARY, waves=True), ports)
    waiting = step(state, ports)
    assert not waiting.done and waiting.regions[0].phase == "waiting"  # nothing changed: it waits on
    act(store)
    ended = step(waiting, ports)
    assert (ended.outcome, ended.reason) == ("rolled_back", reason)
    assert [r.phase for r in ended.regions] == ["failed", "pending"]
    record = operations.fresh(store, "smol")
    left = record.spec.canary
    assert (left.image if left is not None else None) == canary_left  # its own removed, another's kept
    assert record.rollout_evidence == ended.evidence_ids[-1]  # the end is on the record, with its reason
    assert LocalEvidenceStore(tmp_path).get(ended.evidence_ids[-1]).kind == "rollout"


def test_a_rollout_sent_sigterm_rolls_back_and_says_so(
    store: EndpointStore, moto: MotoServer, tmp_path: Path
) -> None:
    """`gco inference rollout` as its own process, waiting for its canary, is sent SIGTERM (a `kill`,
    a cancelled CI job): it removes its canary, records why on the endpoint, and exits 1 saying so,
    so the next rollout is not refused for a canary nobody owns."""
    store.create("smol", {"image": IMAGE}, [EAST])
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": moto.url,
        INVOKE_URLS_ENV: json.dumps({EAST: "http://127.0.0.1:9"}),  # never asked: the canary never serves
    }
    command = python_module(
        "gco.cli",
        "inference",
        "rollout",
        "smol",
        "--image",
        CANARY,
        "--run-dir",
        str(tmp_path),
        "--table",
        store.table_name,
    )
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as cli:
        try:
            eventually(lambda: operations.fresh(store, "smol").spec.canary is not None, "the canary set")
            cli.send_signal(signal.SIGTERM)
            out, err = cli.communicate(timeout=60)
        finally:
            cli.kill()
    assert cli.returncode == 1, (out, err)
    assert err.strip().endswith(f"error: smol: rolled_back: {INTERRUPTED}; its canary removed")
    record = operations.fresh(store, "smol")
    assert record.spec.canary is None and record.rollout_evidence is not None
    ended = LocalEvidenceStore(tmp_path / "evidence").get(record.rollout_evidence)
    assert INTERRUPTED in json.dumps(ended.model_dump(mode="json"))
