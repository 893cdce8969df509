"""The admission decision with the local registry stand-in and a local evidence index; the policy."""

from __future__ import annotations

from pathlib import Path

import pytest

from gco.admission import admit
from gco.admission.admit import Admitter, check_reason, refusal
from gco.admission.errors import ImageResolveError, PolicyError, UnvalidatedImageError
from gco.admission.images import LocalImageResolver, ResolvedImage
from gco.admission.policy import PolicySetting, effective, parse_setting, stricter
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.record import EndpointRecord
from gco.endpoints.spec import parse_spec
from gco.env import EVIDENCE_BUCKET_ENV, VALIDATION_POLICY_ENV
from gco.evidence import LocalEvidenceStore
from gco.evidence.index import LocalEvidenceIndex
from tests.unit.evidence.matrix_sample import VLLM, matrix_record

IMAGE = "vllm/vllm-openai:v1"
EAST, WEST = "us-east-1", "us-west-2"


class Unreachable:
    """A resolver whose registry never answers."""

    def resolve(self, image: str) -> ResolvedImage:
        raise ImageResolveError(f"cannot resolve {image}: ConnectError")


@pytest.fixture
def index(tmp_path: Path) -> LocalEvidenceIndex:
    record = matrix_record(region=EAST)
    LocalEvidenceStore(tmp_path / "evidence").put(record)
    found = LocalEvidenceIndex(tmp_path / "evidence")
    found.add(record)
    return found


@pytest.fixture
def registry(tmp_path: Path) -> LocalImageResolver:
    local = LocalImageResolver(tmp_path / "registry.json")
    local.push(IMAGE, VLLM)
    return local


def test_enforce_names_the_first_region_and_the_others(
    index: LocalEvidenceIndex, registry: LocalImageResolver
) -> None:
    with pytest.raises(UnvalidatedImageError) as refused:
        admit({"primary": IMAGE}, [EAST, WEST, "eu-west-1"], policy="enforce", resolver=registry, index=index)
    line = str(refused.value)
    assert f"{IMAGE} ({VLLM}) has no passing matrix evidence in {WEST} (and eu-west-1)" in line
    assert f"vllm/vllm-openai@{VLLM}" in line  # the image the matrix's settings would pin


def test_a_reason_or_evidence_admits_and_off_checks_nothing(
    index: LocalEvidenceIndex, registry: LocalImageResolver
) -> None:
    decided = admit(
        {"primary": IMAGE},
        [EAST, WEST],
        policy="enforce",
        resolver=registry,
        index=index,
        reason="r",
        by="me",
    )
    east, west = decided.entries[EAST]["primary"], decided.entries[WEST]["primary"]
    assert (east.outcome, east.reason, west.outcome, west.reason) == ("validated", None, "allowed", "r")
    assert decided.warnings == []
    assert admit({"primary": IMAGE}, [WEST], policy="off", resolver=Unreachable(), index=None).entries == {}


def test_an_unresolvable_tag_is_refused_under_enforce_and_warned_under_warn(
    index: LocalEvidenceIndex,
) -> None:
    with pytest.raises(ImageResolveError, match="ConnectError"):
        admit({"primary": IMAGE}, [EAST], policy="enforce", resolver=Unreachable(), index=index)
    warned = admit({"primary": IMAGE}, [EAST], policy="warn", resolver=Unreachable(), index=index)
    assert warned.entries[EAST]["primary"].digest is None
    assert any("let in unchecked" in line for line in warned.warnings)


def test_no_evidence_bucket_refuses_under_enforce(registry: LocalImageResolver) -> None:
    with pytest.raises(UnvalidatedImageError, match="no evidence bucket to look in"):
        admit({"primary": IMAGE}, [EAST], policy="enforce", resolver=registry, index=None)


def test_the_hook_of_a_canary_checks_the_canary_and_keeps_the_primary(
    index: LocalEvidenceIndex, registry: LocalImageResolver
) -> None:
    spec = parse_spec({"image": IMAGE})
    deployed = Admitter("deploy", "enforce", registry, index)(None, spec, [EAST])
    assert deployed is not None and deployed[EAST]["primary"].evidence_id
    with_canary = parse_spec({"image": IMAGE, "canary": {"image": "other:1", "weight": 10, "replicas": 1}})
    hook = Admitter("canary", "warn", registry, index, by="me")
    current = EndpointRecord(endpoint_name="chat", spec=spec, target_regions=[EAST], admissions=deployed)
    written = hook(current, with_canary, [EAST])
    assert written is not None
    assert written[EAST]["primary"] == deployed[EAST]["primary"]
    assert written[EAST]["canary"].outcome == "warned" and len(hook.warnings) == 1
    assert Admitter("update", "off", registry, index)(current, spec, [EAST]) == {}  # cleared under off


def test_the_policy_is_the_stricter_and_names_its_bad_values() -> None:
    assert stricter("warn", "enforce") == "enforce" and stricter("enforce", "off") == "enforce"
    parameter = PolicySetting(policy="enforce", evidence_bucket="bucket-a")
    assert effective(parameter, {VALIDATION_POLICY_ENV: "off"}).policy == "enforce"
    assert effective(None, {VALIDATION_POLICY_ENV: "warn", EVIDENCE_BUCKET_ENV: "b-1"}) == PolicySetting(
        policy="warn", evidence_bucket="b-1"
    )
    with pytest.raises(PolicyError, match="/gco/validation-policy: policy: Input should be 'off', 'warn'"):
        parse_setting('{"policy": "always"}', "/gco/validation-policy")
    with pytest.raises(InvalidSpecError, match="--allow-unvalidated"):
        check_reason(" ")
    with pytest.raises(InvalidSpecError, match="--allow-unvalidated"):
        check_reason("x" * 257)


def test_the_refusal_pins_the_repository_not_a_registry_port() -> None:
    line = refusal("localhost:5000/engines/vllm", "sha256:" + "d" * 64, EAST, [], index=True)
    assert "the runtime's image: localhost:5000/engines/vllm@sha256:dddd" in line
    line = refusal("localhost:5000/engines/vllm:v3", "sha256:" + "d" * 64, EAST, [], index=True)
    assert "the runtime's image: localhost:5000/engines/vllm@sha256:dddd" in line
