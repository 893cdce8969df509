"""Evidence records: content-digest ids, schema validation on write, redaction, and the reports."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gco.evidence import EvidenceRecord, InvalidEvidenceError, Metric, evidence_schema, validate
from gco.evidence.record import LimitationEntry
from gco.evidence.redact import REDACTED, redact_argv, redact_env, redact_text
from gco.evidence.report import ratio_svg, render_html, render_markdown, rounds_svg


def record(**update: Any) -> EvidenceRecord:
    base = EvidenceRecord(
        kind="bench.rounds",
        claim_class="derived",
        summary="2 engines x 4 rounds",
        created_at="2026-01-01T00:00:00Z",
        identity={"gpu": "not checked"},
        metrics=[
            Metric(
                name="decode_tps",
                value=100.0,
                unit="tok/s",
                statistic="median_over_rounds",
                n=4,
                ci95=(90.0, 110.0),
                subject="a/all",
            ),
            Metric(
                name="decode_tps",
                value=0.5,
                unit="ratio",
                statistic="ratio_to_best",
                n=4,
                ci95=(0.45, 0.55),
                subject="b/all / a",
            ),
        ],
        limitations=[LimitationEntry(code="gpu_memory_not_checked", text="NVML unavailable <x>")],
        missing=["GPU memory check"],
        data={"series": [{"subject": "a/all decode_tps", "per_round": {"1": 99.0, "2": 101.0}}]},
    )
    return base.model_copy(update=update).sealed()


def test_id_is_the_content_digest() -> None:
    sealed = record()
    assert len(sealed.id) == 64
    assert sealed.id == sealed.digest()
    assert record(summary="other").id != sealed.id
    assert validate(json.loads(sealed.to_json())) == sealed


def test_validation_names_the_first_error() -> None:
    document = json.loads(record().to_json())
    document["claim_class"] = "guessed"
    with pytest.raises(InvalidEvidenceError, match="claim_class"):
        validate(document)
    tampered = json.loads(record().to_json())
    tampered["summary"] = "better numbers"
    with pytest.raises(InvalidEvidenceError, match="digest"):
        validate(tampered)
    assert evidence_schema()["$schema"].endswith("2020-12/schema")


def test_redaction_of_env_argv_and_text() -> None:
    env = redact_env({"HF_TOKEN": "abc", "PLAIN": "AKIA" + "A" * 16, "MODEL": "m", "INHERITED_SECRET": None})
    assert env == {"HF_TOKEN": REDACTED, "PLAIN": REDACTED, "MODEL": "m", "INHERITED_SECRET": None}
    argv = redact_argv(["serve", "--api-key", "s3cret", "--hf-token=abc", "--model", "m", "hf_" + "z" * 24])
    assert argv == ["serve", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--model", "m", REDACTED]
    assert redact_text("token sk-" + "q" * 30 + " here") == f"token {REDACTED} here"


def test_markdown_and_html_reports() -> None:
    sealed = record()
    markdown = render_markdown(sealed)
    assert sealed.summary in markdown
    assert "| b/all / a | decode_tps | ratio_to_best | 0.5 | [0.45, 0.55] | 4 | ratio |" in markdown
    assert "**gpu_memory_not_checked**" in markdown
    assert "GPU memory check" in markdown
    page = render_html(sealed)
    assert page.count("<svg") == 2
    assert "NVML unavailable &lt;x&gt;" in page
    assert ratio_svg([]) == ""
    assert rounds_svg([]) == ""
    assert "none recorded" in render_markdown(record(limitations=[], metrics=[], data={}))
