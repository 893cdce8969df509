"""Validated builds through `gco inference` against the moto server: the policy in its SSM parameter,
the evidence index in S3, tags resolved by the local registry stand-in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gco import aws
from gco.admission.images import LocalImageResolver
from gco.admission.policy import PolicySetting, SsmPolicySource
from gco.endpoints import EndpointStore
from gco.env import LOCAL_REGISTRY_ENV, VALIDATION_POLICY_ENV
from gco.evidence import EvidenceRecord, S3EvidenceStore
from gco.evidence.index import S3EvidenceIndex
from gco.inference.invoke import INVOKE_URLS_ENV
from gco.local.moto.motoserver import MotoServer
from tests.functional.cli.test_inference_cli import Cli, table_items
from tests.unit.evidence.matrix_sample import VLLM, matrix_record

BUCKET = "gco-evidence"
IMAGE = "vllm/vllm-openai:v1"


class Deployment:
    """The parts a deployment has: the policy parameter, the evidence bucket, a registry."""

    def __init__(self, moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.s3 = aws.client("s3", endpoint_url=moto.url)
        self.s3.create_bucket(Bucket=BUCKET)
        self.ssm = SsmPolicySource(aws.client("ssm", endpoint_url=moto.url))
        self.registry = LocalImageResolver(tmp_path / "registry.json")
        self.registry.push(IMAGE, VLLM)  # the tag names the validated build
        monkeypatch.setenv(LOCAL_REGISTRY_ENV, str(self.registry.path))
        monkeypatch.delenv(VALIDATION_POLICY_ENV, raising=False)

    def policy(self, policy: str) -> None:
        self.ssm.write(PolicySetting.model_validate({"policy": policy, "evidence_bucket": BUCKET}))

    def validated(self, region: str) -> EvidenceRecord:
        """A passing matrix run of the vLLM build in `region`, stored and indexed as the matrix does."""
        record = matrix_record(region=region)
        S3EvidenceStore(BUCKET, client=self.s3).put(record)
        S3EvidenceIndex(BUCKET, client=self.s3).add(record)
        return record


@pytest.fixture
def cli(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto, capsys)


@pytest.fixture
def deployment(moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    return Deployment(moto, tmp_path, monkeypatch)


def deploy(cli: Cli, image: str, *extra: str, code: int = 0) -> tuple[str, str]:
    return cli("inference", "deploy", "chat", "--image", image, "--region", "us-east-1", *extra, code=code)


def admissions(cli: Cli) -> Any:
    return cli.json("inference", "status", "chat")["admissions"]


def test_an_unvalidated_image_is_refused_under_enforce_and_nothing_is_written(
    cli: Cli, deployment: Deployment, store: EndpointStore
) -> None:
    deployment.policy("enforce")
    _, err = deploy(cli, "vllm/vllm-openai:v2", code=1)
    line = err.strip()
    assert "\n" not in line and "no passing matrix evidence in us-east-1" in line
    assert "gco matrix run SETTINGS --consent" in line and "selected_region: us-east-1" in line
    assert table_items(store) == []


def test_an_unvalidated_image_is_warned_under_warn(cli: Cli, deployment: Deployment) -> None:
    deployment.policy("warn")
    _, err = deploy(cli, "vllm/vllm-openai:v2")
    assert "warning: vllm/vllm-openai:v2 (sha256:" in err and "no passing matrix evidence in us-east-1" in err
    entry = admissions(cli)["us-east-1"]["primary"]
    assert (entry["outcome"], entry["policy"]) == ("warned", "warn") and "evidence_id" not in entry


def test_an_unvalidated_image_is_admitted_with_a_reason_kept_in_the_record(
    cli: Cli, deployment: Deployment
) -> None:
    deployment.policy("enforce")
    deploy(cli, "vllm/vllm-openai:v2", "--allow-unvalidated", "hotfix for INC-42")
    entry = admissions(cli)["us-east-1"]["primary"]
    assert (entry["outcome"], entry["reason"], entry["image"]) == (
        "allowed",
        "hotfix for INC-42",
        "vllm/vllm-openai:v2",
    )
    assert entry["by"] and entry["at"].endswith("Z")
    out, _ = cli("inference", "status", "chat")
    assert "admitted:      us-east-1 primary vllm/vllm-openai:v2" in out and "'hotfix for INC-42'" in out
    _, err = deploy(cli, "x:1", "--allow-unvalidated", "", code=2)
    assert "--allow-unvalidated" in err


def test_a_later_change_keeping_the_image_keeps_its_admission_and_reason(
    cli: Cli, deployment: Deployment
) -> None:
    """Under `enforce`, a scale or an update of another field keeps the image its admission names: no
    second --allow-unvalidated is asked, and the reason first given stays; a new image is decided."""
    deployment.policy("enforce")
    deploy(cli, "vllm/vllm-openai:v2", "--allow-unvalidated", "hotfix for INC-42")
    first = admissions(cli)["us-east-1"]["primary"]
    cli("inference", "update", "chat", "--replicas", "3")
    cli("inference", "scale", "chat", "--replicas", "2")
    assert admissions(cli)["us-east-1"]["primary"] == first  # the same entry: its reason, who and when
    _, err = cli("inference", "update", "chat", "--image", "vllm/vllm-openai:v3", code=1)
    assert "no passing matrix evidence in us-east-1" in err
    cli("inference", "update", "chat", "--image", "vllm/vllm-openai:v3", "--allow-unvalidated", "INC-43")
    assert admissions(cli)["us-east-1"]["primary"]["reason"] == "INC-43"


def test_a_validated_digest_is_admitted_with_its_evidence_per_region(
    cli: Cli, deployment: Deployment
) -> None:
    deployment.policy("enforce")
    east, west = deployment.validated("us-east-1"), deployment.validated("us-west-2")
    assert east.id != west.id
    cli("inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--region", "us-west-2")
    found = admissions(cli)
    assert {region: roles["primary"]["evidence_id"] for region, roles in found.items()} == {
        "us-east-1": east.id,
        "us-west-2": west.id,
    }
    assert found["us-east-1"]["primary"]["digest"] == VLLM
    assert found["us-east-1"]["primary"]["outcome"] == "validated"
    out, _ = cli("inference", "status", "chat")
    assert f"us-west-2 primary {IMAGE} (sha256:aaaaaaaaaaaa): validated by evidence {west.id}" in out


def test_a_moved_tag_is_a_different_build(cli: Cli, deployment: Deployment, store: EndpointStore) -> None:
    deployment.policy("enforce")
    deployment.validated("us-east-1")
    deploy(cli, IMAGE)
    before = store.get("chat", consistent_read=True)
    deployment.registry.push(IMAGE)  # someone pushed another build under the same tag
    _, err = cli("inference", "update", "chat", "--replicas", "3", code=1)
    assert "no passing matrix evidence in us-east-1" in err and VLLM not in err
    assert store.get("chat", consistent_read=True) == before  # nothing written


def test_regions_add_of_a_region_without_evidence_is_refused(
    cli: Cli, deployment: Deployment, store: EndpointStore
) -> None:
    deployment.policy("enforce")
    east = deployment.validated("us-east-1")
    deploy(cli, IMAGE)
    before = store.get("chat", consistent_read=True)
    _, err = cli("inference", "regions", "chat", "--add", "us-west-2", code=1)
    assert "in us-west-2 (validation policy enforce)" in err and "selected_region: us-west-2" in err
    assert store.get("chat", consistent_read=True) == before
    west = deployment.validated("us-west-2")
    cli("inference", "regions", "chat", "--add", "us-west-2")
    found = admissions(cli)
    assert {r: roles["primary"]["evidence_id"] for r, roles in found.items()} == {
        "us-east-1": east.id,
        "us-west-2": west.id,
    }
    cli("inference", "regions", "chat", "--remove", "us-west-2")
    assert set(admissions(cli)) == {"us-east-1"}


def test_a_canary_is_checked_and_promote_carries_its_admission(
    cli: Cli, deployment: Deployment, store: EndpointStore
) -> None:
    deployment.policy("enforce")
    deployment.validated("us-east-1")
    deploy(cli, IMAGE)
    _, err = cli("inference", "canary", "chat", "--image", "vllm/vllm-openai:v2", "--weight", "10", code=1)
    assert "vllm/vllm-openai:v2" in err and "us-east-1" in err
    cli("inference", "canary", "chat", "--image", "vllm/vllm-openai:v2", "--weight", "10",
        "--allow-unvalidated", "canary of a nightly")  # fmt: skip
    roles = admissions(cli)["us-east-1"]
    assert roles["primary"]["outcome"] == "validated" and roles["canary"]["reason"] == "canary of a nightly"
    cli("inference", "promote", "chat")
    roles = admissions(cli)["us-east-1"]
    assert list(roles) == ["primary"] and roles["primary"]["image"] == "vllm/vllm-openai:v2"


def test_the_environment_can_tighten_the_policy_never_loosen_it(
    cli: Cli, deployment: Deployment, monkeypatch: pytest.MonkeyPatch, store: EndpointStore
) -> None:
    deployment.policy("enforce")
    monkeypatch.setenv(VALIDATION_POLICY_ENV, "off")
    deploy(cli, "vllm/vllm-openai:v2", code=1)
    deployment.policy("off")
    monkeypatch.setenv(VALIDATION_POLICY_ENV, "enforce")
    deploy(cli, "vllm/vllm-openai:v2", code=1)
    monkeypatch.setenv(VALIDATION_POLICY_ENV, "sometimes")
    _, err = deploy(cli, "vllm/vllm-openai:v2", code=1)
    assert "GCO_VALIDATION_POLICY: 'sometimes' is not one of off, warn, enforce" in err
    assert table_items(store) == []


def test_off_checks_nothing_and_a_deployment_without_the_parameter_is_off(
    cli: Cli, deployment: Deployment, store: EndpointStore
) -> None:
    deploy(cli, "vllm/vllm-openai:v2")  # no parameter at all
    assert "admissions" not in cli.json("inference", "status", "chat")
    item = table_items(store)[0]
    assert "admissions" not in item
    assert json.loads(json.dumps(item))  # the item as before the policy existed


def test_a_rollout_s_canary_is_checked_as_a_canary_is(
    cli: Cli, deployment: Deployment, store: EndpointStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    deployment.policy("enforce")
    deployment.validated("us-east-1")
    deploy(cli, IMAGE)
    # A Region's way in is named (nothing answers there: the refusal comes before any request).
    monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps({"us-east-1": "http://127.0.0.1:9"}))
    run_dir = str(tmp_path / "rollout")
    _, err = cli(
        "inference", "rollout", "chat", "--image", "vllm/vllm-openai:v2", "--run-dir", run_dir, code=1
    )
    assert "vllm/vllm-openai:v2" in err and "us-east-1" in err
    assert cli.json("inference", "status", "chat")["spec"].get("canary") is None  # nothing written
