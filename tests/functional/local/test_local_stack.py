"""`gco local up|env|status|down` as a user runs them: real background processes, the user's own
deploy and invoke, a second `up` refused, `down` after a killed part leaving no pid and no port."""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
from functools import partial
from pathlib import Path
from urllib.parse import urlparse

import pytest

from gco.cli import main
from gco.endpoints.namespaces import SYSTEM_NAMESPACE
from gco.env import CLUSTER_URLS_ENV, LOCAL_REGISTRY_ENV, VALIDATION_POLICY_ENV
from gco.local.processes import statefiles
from gco.local.processes.statefiles import RegionChildren
from gco.local.region.node import children_path
from gco.processes.proc import group_members
from gco.reconcile.objects import HPA
from gco.reconcile.proxy.render_proxy import PROXY_HPA
from gco.validation.connect import environment_clusters
from tests.functional.local.conftest import eventually
from tests.unit.validation.sample import VLLM_IMAGE, settings

IMAGE = "vllm/vllm-openai:v0.6.3"
MODEL = "HuggingFaceTB/SmolLM2-135M"
REGIONS = ("us-east-1", "us-west-2")


class Gco:
    """Runs `gco` in-process (as the console script does), capturing its output."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *args: str, code: int = 0) -> str:
        self.capsys.readouterr()
        status = main(list(args))
        out, err = self.capsys.readouterr()
        assert status == code, (args, status, out, err)
        return out + err


def reported(state_dir: Path, region: str) -> list[int]:
    """The engine and nginx groups a Region's process reported."""
    children = statefiles.read(children_path(state_dir, region), RegionChildren)
    return [group.pid for group in children.groups] if children is not None else []


def port_free(url: str) -> bool:
    parsed = urlparse(url)
    with socket.socket() as probe:
        return probe.connect_ex((parsed.hostname or "127.0.0.1", parsed.port or 0)) != 0


def test_up_use_down_after_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    gco = Gco(capsys)
    state_dir = tmp_path / "state"
    flag = ("--state-dir", str(state_dir))
    gco("local", "up", "--regions", ",".join(REGIONS), *flag)
    try:
        second = gco("local", "up", *flag, code=1)
        assert "already runs" in second and second.count("\n") == 1
        # Each part's answer is awaited up to 30 s, not the default 2 s: a loaded machine is slow, not down.
        status = json.loads(gco("local", "status", "-o", "json", "--timeout", "30", *flag))
        assert [row["part"] for row in status] == ["moto", *(f"region {r}" for r in REGIONS), "front"]
        assert all(row["alive"] and row["answers"] for row in status)

        for line in gco("local", "env", *flag).splitlines():
            if line.startswith("#"):
                continue  # how to make a key for the global address (tests/functional/local/front/)
            name, _, value = line.removeprefix("export ").partition("=")
            monkeypatch.setenv(name, shlex.split(value)[0])
        deploy = ["inference", "deploy", "smol", "--image", IMAGE, "--model-id", MODEL]
        gco(*deploy, "--region", REGIONS[0], "--region", REGIONS[1], "--wait", "--timeout", "60")
        for region in REGIONS:
            answer = json.loads(gco("inference", "invoke", "smol", "--region", region, "-o", "json"))
            assert answer["status"] == 200 and answer["body"]["model"] == MODEL
        # The matrix reads each Region's cluster through the URLs `env` exports.
        assert sorted(json.loads(os.environ[CLUSTER_URLS_ENV])) == sorted(REGIONS)
        reader = environment_clusters(REGIONS[1]).reader(REGIONS[1])
        assert reader.get(HPA, SYSTEM_NAMESPACE, PROXY_HPA) is not None

        state = json.loads((state_dir / "stack.json").read_text())
        engines = [
            pgid for region in REGIONS for pgid in eventually(partial(reported, state_dir, region), "engines")
        ]
        assert len(engines) >= 2 and all(group_members(pgid) for pgid in engines)
        crashed = next(part for part in state["parts"] if part["name"] == f"region {REGIONS[1]}")
        os.killpg(crashed["pid"], signal.SIGKILL)  # a Region's process dies; its engines live on
        eventually(lambda: not group_members(crashed["pid"]), "the crashed part gone")
        failing = gco("local", "status", *flag, code=1)
        assert f"error: not answering: region {REGIONS[1]} (its process is gone" in failing
        # its engines (and nginx) live on: named, as `down` will stop them
        left = [pgid for pgid in reported(state_dir, REGIONS[1]) if group_members(pgid)]
        assert left and f"live on as groups {', '.join(map(str, left))}: gco local down" in failing
        rows = json.loads(gco("local", "status", "-o", "json", *flag, code=1).split("\nerror:")[0])
        assert next(r for r in rows if r["part"] == f"region {REGIONS[1]}")["orphans"] == left
    finally:
        out = gco("local", "down", *flag)
    assert out.startswith("stopped moto")
    groups = [part["pid"] for part in state["parts"]] + engines
    assert [pgid for pgid in groups if group_members(pgid)] == []
    assert all(port_free(part["url"]) for part in state["parts"])
    assert not (state_dir / "stack.json").exists()
    assert gco("local", "down", *flag).strip() == "the local stack was not up"
    assert "not up" in gco("local", "env", *flag, code=1)


def test_bad_regions_start_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = Gco(capsys)(
        "local", "up", "--regions", "us-east-1,Us_East", "--state-dir", str(tmp_path / "s"), code=2
    )
    assert out == "error: --regions[1]: 'Us_East' is not an AWS Region name (for example us-east-1)\n"
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_a_single_region_that_is_not_the_default_finds_its_own_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One Region, not us-east-1: the table lives where `env` says, and the CLI and the matrix find it
    (they look in `DYNAMODB_REGION`; a table made in another Region is `ResourceNotFoundException`)."""
    gco = Gco(capsys)
    region = "eu-west-1"
    state_dir = tmp_path / "state"
    flag = ("--state-dir", str(state_dir))
    monkeypatch.delenv("DYNAMODB_REGION", raising=False)  # what a fresh shell has
    gco("local", "up", "--regions", region, "--from-source", *flag)
    try:
        exported = dict(
            line.removeprefix("export ").split("=", 1)
            for line in gco("local", "env", *flag).splitlines()
            if not line.startswith("#")  # how to make a key for the global address
        )
        assert exported["DYNAMODB_REGION"] == region
        for name, value in exported.items():
            monkeypatch.setenv(name, shlex.split(value)[0])
        assert json.loads(gco("inference", "list", "-o", "json")) == []
        deploy = ["inference", "deploy", "solo", "--image", IMAGE, "--model-id", MODEL, "--region", region]
        gco(*deploy, "--wait", "--timeout", "60")
        answer = json.loads(gco("inference", "invoke", "solo", "-o", "json"))
        assert (answer["region"], answer["status"], answer["body"]["model"]) == (region, 200, MODEL)
        gco("inference", "delete", "solo", "--wait", "--timeout", "60")
        settings_file = tmp_path / "settings.json"
        settings_file.write_text(json.dumps(settings(selected_region=region)), encoding="utf-8")
        run_dir = tmp_path / "run"
        gco("matrix", "run", str(settings_file), "--consent", "--run-dir", str(run_dir))
        checkpoint = json.loads((run_dir / "matrix" / "checkpoint.json").read_text())
        assert checkpoint["verdict"] == "pass", checkpoint
        assert json.loads(gco("inference", "list", "-o", "json")) == []
    finally:
        gco("local", "down", *flag)


@pytest.mark.slow
def test_a_build_the_matrix_validated_is_admitted_under_enforce(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`up --validation-policy enforce`: a deploy of a build no matrix ran is refused, naming the
    command; once `gco matrix run` passed in the Region (its evidence and index in the stack's
    bucket), the same deploy is admitted and the record names that evidence."""
    gco = Gco(capsys)
    region = REGIONS[0]
    state_dir = tmp_path / "state"
    flag = ("--state-dir", str(state_dir))
    gco("local", "up", "--regions", region, "--validation-policy", "enforce", "--from-source", *flag)
    try:
        exported = dict(
            line.removeprefix("export ").split("=", 1) for line in gco("local", "env", *flag).splitlines()
        )
        assert exported[VALIDATION_POLICY_ENV] == "enforce" and LOCAL_REGISTRY_ENV in exported
        for name, value in exported.items():
            monkeypatch.setenv(name, shlex.split(value)[0])
        deploy = ["inference", "deploy", "checked", "--image", VLLM_IMAGE, "--model-id", MODEL]
        refused = gco(*deploy, "--region", region, code=1)
        assert f"no passing matrix evidence in {region}" in refused and "gco matrix run" in refused
        assert json.loads(gco("inference", "list", "-o", "json")) == []
        settings_file = tmp_path / "settings.json"
        settings_file.write_text(json.dumps(settings(selected_region=region)), encoding="utf-8")
        run_dir = tmp_path / "run"
        gco("matrix", "run", str(settings_file), "--consent", "--run-dir", str(run_dir))
        checkpoint = json.loads((run_dir / "matrix" / "checkpoint.json").read_text())
        assert checkpoint["verdict"] == "pass", checkpoint
        gco(*deploy, "--region", region)
        record = json.loads(gco("inference", "status", "checked", "-o", "json"))
        entry = record["admissions"][region]["primary"]
        assert (entry["outcome"], entry["evidence_id"]) == ("validated", checkpoint["evidence_id"])
        gco("inference", "delete", "checked", "--wait", "--timeout", "60")
    finally:
        gco("local", "down", *flag)
