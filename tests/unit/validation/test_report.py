"""The matrix's evidence record: the builds by digest and Region, one metric name per subject."""

from __future__ import annotations

from pathlib import Path

from gco.evidence import validate
from gco.evidence.index import entries_of
from gco.validation.checkpoint import Checkpoint, Step, Verdict
from gco.validation.identity import identity
from gco.validation.report import evidence_record
from gco.validation.settings import parse_settings
from tests.unit.validation.sample import SETTINGS, TGI_IMAGE, VLLM_IMAGE


def _step(step: str, verdict: Verdict, seconds: float) -> Step:
    return Step.model_validate(
        {"step": step, "endpoint": "mx-r-vllm-hpa", "verdict": verdict, "started_at": "t",
         "seconds": seconds, "detail": ""}
    )  # fmt: skip


def test_a_step_tried_again_is_one_metric_and_the_builds_are_named(tmp_path: Path) -> None:
    """A resumed run's `ready` failed, then passed: its metric is the last try's; both stay in the data."""
    checkpoint = Checkpoint(
        run_id="r",
        settings_path="/s.json",
        identity=identity(parse_settings({**SETTINGS, "selected_region": "eu-west-1"})),
        created_at="t",
        endpoints=[],
        steps=[_step("ready", "fail", 600.0), _step("ready", "pass", 42.0)],
    )
    record = evidence_record(checkpoint, "pass", tmp_path)
    assert validate(record.model_dump(mode="json")) == record
    assert [(m.name, m.value) for m in record.metrics] == [("ready_seconds", 42.0)]
    assert len(record.data["steps"]) == 2
    builds = record.data["validated_builds"]
    assert builds["region"] == "eu-west-1"
    assert [(i["framework"], i["image"], i["digest"]) for i in builds["images"]] == [
        ("vllm", VLLM_IMAGE, "sha256:" + "1" * 64),
        ("tgi", TGI_IMAGE, "sha256:" + "2" * 64),
    ]
    assert [(e.region, e.digest) for e in entries_of(record)] == [
        ("eu-west-1", "sha256:" + "1" * 64),
        ("eu-west-1", "sha256:" + "2" * 64),
    ]
    assert (
        entries_of(evidence_record(checkpoint, "fail", tmp_path)) == []
    )  # a failing run vouches for nothing
