"""The rollout state machine's step admits the canary's image as `gco inference rollout` does: the
deployment's policy in its SSM parameter and the evidence index in S3, against the moto server, with
the step Lambda's own admission hook (`lambdas/rollout.py`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gco.admission.errors import UnvalidatedImageError
from gco.endpoints import EndpointStore, operations
from gco.evidence.store import LocalEvidenceStore
from gco.local.moto.motoserver import MotoServer
from gco.rollout import execution
from gco.rollout.service import advance
from gco.rollout.state import RolloutSettings, parse_settings
from gco.rollout.steps import Ports
from lambdas.rollout import FUNCTION_NAME_ENV, admission_for
from tests.functional.admission.test_admission_cli import Deployment
from tests.functional.rollout.test_service import Unreached
from tests.unit.evidence.matrix_sample import VLLM

EAST = "us-east-1"
PRIMARY = "vllm/vllm-openai:v0"
CANARY = "vllm/vllm-openai:v1"  # the Deployment's registry resolves it to the matrix sample's build


@pytest.fixture
def deployment(moto: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Deployment:
    monkeypatch.setenv(FUNCTION_NAME_ENV, "gco-rollout-step")
    return Deployment(moto, tmp_path, monkeypatch)


def begin(store: EndpointStore, tmp_path: Path, settings: RolloutSettings) -> None:
    lifecycle = operations.fresh(store, settings.endpoint).lifecycle_id or ""

    def ports_for(given: RolloutSettings) -> Ports:
        evidence = [LocalEvidenceStore(tmp_path)]
        return Ports(store=store, traffic=Unreached(), evidence=evidence, admit=admission_for(given))

    advance(execution.execution_input(settings, lifecycle), ports_for)


def test_an_unvalidated_canary_is_refused_under_enforce_and_nothing_is_written(
    store: EndpointStore, deployment: Deployment, tmp_path: Path
) -> None:
    store.create("chat", {"image": PRIMARY}, [EAST])
    deployment.policy("enforce")
    with pytest.raises(UnvalidatedImageError, match="no passing matrix evidence in us-east-1"):
        begin(store, tmp_path, RolloutSettings(endpoint="chat", image=CANARY))
    assert operations.fresh(store, "chat").spec.canary is None


def test_a_validated_canary_begins_and_its_admission_names_the_state_machine(
    store: EndpointStore, deployment: Deployment, tmp_path: Path
) -> None:
    store.create("chat", {"image": PRIMARY}, [EAST])
    deployment.policy("enforce")
    evidence = deployment.validated(EAST)
    begin(store, tmp_path, RolloutSettings(endpoint="chat", image=CANARY))
    record = operations.fresh(store, "chat")
    assert record.spec.canary is not None and record.spec.canary.image == CANARY
    admitted = record.admissions[EAST]["canary"]
    assert admitted.outcome == "validated" and admitted.digest == VLLM
    assert admitted.evidence_id == evidence.id
    assert admitted.by == "rollout state machine (gco-rollout-step)"


def test_a_reason_lets_an_unvalidated_canary_in_and_is_kept_with_it(
    store: EndpointStore, deployment: Deployment, tmp_path: Path
) -> None:
    store.create("chat", {"image": PRIMARY}, [EAST])
    deployment.policy("enforce")
    settings = RolloutSettings(endpoint="chat", image=CANARY, allow_unvalidated="hotfix, matrix tonight")
    begin(store, tmp_path, settings)
    admitted = operations.fresh(store, "chat").admissions[EAST]["canary"]
    assert admitted.reason == "hotfix, matrix tonight" and admitted.policy == "enforce"


def test_the_execution_input_carries_a_reason_only_when_given() -> None:
    plain = execution.execution_input(RolloutSettings(endpoint="chat", image=CANARY), "0" * 64)
    assert "allow_unvalidated" not in plain["settings"]  # the input of older rollouts, unchanged
    reasoned = RolloutSettings(endpoint="chat", image=CANARY, allow_unvalidated="hotfix")
    carried = execution.execution_input(reasoned, "0" * 64)["settings"]
    assert parse_settings(carried).allow_unvalidated == "hotfix"
