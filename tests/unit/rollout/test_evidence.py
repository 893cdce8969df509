"""The rollout's evidence record: schema-checked, each block's values kept, drawn by the report page."""

from __future__ import annotations

import json

from gco.evidence.page import render_html
from gco.evidence.record import validate
from gco.rollout.decision import Rule, decide
from gco.rollout.evidence import KIND, RATIO_SUFFIX, rollout_record
from gco.rollout.state import RegionAnalysis, RolloutSettings, RolloutState
from tests.unit.rollout.test_decision import blocks_of


def state() -> RolloutState:
    blocks = blocks_of(1.2, 5)
    east = RegionAnalysis(region="us-east-1", phase="failed", blocks=blocks, decision=decide(blocks, Rule()))
    return RolloutState(
        settings=RolloutSettings(endpoint="smol", image="registry.example.com/chat:1.2", waves=True),
        lifecycle_id="a" * 64,
        primary_image="registry.example.com/chat:1.0",
        started_at="2026-12-03T17:00:00Z",
        regions=[east, RegionAnalysis(region="us-west-2")],
        outcome="rolled_back",
        reason="us-east-1: latency_ms ratio lies above 1.05",
    )


def test_the_record_validates_and_keeps_every_block() -> None:
    record = rollout_record(state(), created_at="2026-12-03T17:05:00Z")
    assert validate(json.loads(record.to_json())) == record
    assert record.kind == KIND and "rolled_back" in record.summary
    assert {(m.subject, m.name) for m in record.metrics} == {
        ("us-east-1", f"ttft_ms{RATIO_SUFFIX}"),
        ("us-east-1", f"latency_ms{RATIO_SUFFIX}"),
    }
    assert all(m.ci95 is not None and m.ci95[0] > 1.05 for m in record.metrics)
    east = record.data["regions"][0]
    assert len(east["blocks"]) == 5 and east["decision"]["verdict"] == "rollback"
    assert record.data["look_level"] == Rule().level
    assert [item.code for item in record.limitations] == ["analysis-traffic", "regions-untouched"]
    # the same state gives the same record (a content id), a later state another
    assert rollout_record(state(), created_at="2026-12-03T17:05:00Z").id == record.id


def test_the_report_page_draws_each_block_per_version() -> None:
    record = rollout_record(state(), created_at="2026-12-03T17:05:00Z")
    series = record.data["series"]
    assert {(item["label"], item["bucket"], item["metric"]) for item in series} == {
        (version, "us-east-1", metric)
        for version in ("primary", "canary")
        for metric in ("ttft_ms", "latency_ms")
    }
    assert all(sorted(item["per_round"], key=int) == ["1", "2", "3", "4", "5"] for item in series)
    page = render_html(record)
    assert "<svg" in page.split("Per-round values")[1].split("<h2>")[0]
