"""Evidence records: content-digest ids, schema validation on write, redaction, and the reports."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from gco.evidence import EvidenceRecord, InvalidEvidenceError, Metric, evidence_schema, validate
from gco.evidence.plots import MAX_HEIGHT_IN, distributions_svg, forest_svg, per_round_svg
from gco.evidence.record import RATIO_OF_MEDIANS, LimitationEntry
from gco.evidence.redact import REDACTED, redact_argv, redact_env, redact_text
from gco.evidence.report import render_html, render_markdown


def record(**update: Any) -> EvidenceRecord:
    base = EvidenceRecord(
        kind="bench.rounds",
        claim_class="derived",
        summary="2 engines x 4 rounds",
        created_at="2026-01-01T00:00:00Z",
        identity={
            "gpu": "not checked",
            "prompt_set_digest": "d" * 64,
            "workload": {"max_tokens": 32},
            "engines": [
                {
                    "label": "a",
                    "argv": ["serve", "--api-key", REDACTED],
                    "env": {"HF_TOKEN": REDACTED, "MODE": "x|y"},
                    "model": {"id": "org/model", "revision": "abc"},
                }
            ],
        },
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
                name="decode_tps_ratio_to_best",
                value=0.5,
                unit="ratio",
                statistic=RATIO_OF_MEDIANS,
                n=4,
                ci95=(0.45, 0.55),
                subject="b/all / a",
            ),
        ],
        limitations=[LimitationEntry(code="gpu_memory_not_checked", text="NVML unavailable <x>")],
        missing=["GPU memory check"],
        data={
            "series": [{"subject": "a/all decode_tps", "per_round": {"1": 99.0, "2": 101.0}}],
            "requests": [
                {"label": "a", "round": 1, "ttft_ms": [10.0, 12.0], "itl_ms": [2.0], "e2e_ms": [90.0]}
            ],
        },
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
    row = "| b/all / a | decode_tps_ratio_to_best | ratio_of_medians | 0.5 | [0.45, 0.55] | 4 | ratio |"
    assert row in markdown
    assert "**gpu_memory_not_checked**" in markdown
    assert "GPU memory check" in markdown
    assert "- prompt_set_digest: `" + "d" * 64 + "`" in markdown
    assert (
        "| a | org/model, revision abc | `serve --api-key <redacted>` | HF_TOKEN=<redacted>, MODE=x\\|y |"
        in (markdown)
    )
    page = render_html(sealed)
    for plot in ("per-round", "forest", "distributions"):
        assert page.count(f'data-plot="{plot}"') == 1
    assert "NVML unavailable &lt;x&gt;" in page
    assert page.index("Limitations") < page.index("Identity") < page.index("Per-round values")
    assert "<script" not in page and " src=" not in page and "<link" not in page
    assert all(target.startswith("#") for target in re.findall(r'href="([^"]*)"', page))  # nothing fetched
    assert "org/model, revision abc" in page and "serve --api-key &lt;redacted&gt;" in page
    assert per_round_svg([]) == "" and forest_svg([]) == "" and distributions_svg({}) == ""
    assert "none recorded" in render_markdown(record(limitations=[], metrics=[], data={}))
    assert "no request timings" in render_html(record(data={}))


def test_the_page_is_the_same_bytes_for_the_same_record() -> None:
    first, second = render_html(record()), render_html(record())
    assert first == second
    ids = re.findall(r' id="([^"]+)"', first)
    assert ids and len(ids) == len(set(ids))  # two inlined plots never share an id
    assert "<dc:date>" not in first


def test_many_per_round_panels_share_one_screen_high_figure() -> None:
    series = [
        {"metric": metric, "bucket": bucket, "label": label, "per_round": {"1": 1.0, "2": 2.0}}
        for metric in ("ttft_ms", "itl_ms", "e2e_ms", "decode_tps")
        for bucket in ("short", "long", "all")
        for label in ("engine-a", "engine-b")
    ]
    svg = per_round_svg(series)
    height = re.search(r'<svg[^>]* height="([0-9.]+)pt"', svg)
    assert height and float(height.group(1)) <= MAX_HEIGHT_IN * 72  # points: 72 per inch
    assert svg.count('<g id="per-round-axes_') == 12  # every panel drawn


def _with_metrics(*metrics: Metric, **update: Any) -> dict[str, Any]:
    """A record's JSON with `metrics` (sealed by hand, as another writer of the schema would)."""
    document: dict[str, Any] = json.loads(record().to_json())
    document.update({"metrics": [m.model_dump(mode="json") for m in metrics], **update})
    body = {key: value for key, value in document.items() if key != "id"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    document["id"] = hashlib.sha256(canonical).hexdigest()
    return document


def test_a_metric_name_appears_once_per_subject() -> None:
    twice = [
        Metric(name="x_ratio_to_best", value=v, unit="ratio", statistic=s, n=4, subject="b/all / a")
        for v, s in ((0.5, RATIO_OF_MEDIANS), (0.52, "median_of_paired_ratios"))
    ]
    with pytest.raises(InvalidEvidenceError, match="x_ratio_to_best appears twice for subject 'b/all / a'"):
        validate(_with_metrics(*twice))
    # The same name for other subjects, or under its own name, is fine.
    other = twice[1].model_copy(update={"subject": "c/all / a"})
    assert validate(_with_metrics(twice[0], other)).metrics[1].subject == "c/all / a"
    renamed = twice[1].model_copy(update={"name": "x_paired_ratio_to_best"})
    assert len(validate(_with_metrics(twice[0], renamed)).metrics) == 2


def test_a_record_of_schema_version_1_stays_readable() -> None:
    """Written before the rules: a duplicate name, a matrix record without its builds."""
    twice = [Metric(name="x", value=v, unit="s", statistic="single", n=1, subject="s") for v in (1.0, 2.0)]
    assert validate(_with_metrics(*twice, schema_version=1)).schema_version == 1
    old_matrix = _with_metrics(kind="matrix", schema_version=1)
    assert validate(old_matrix).kind == "matrix"
    with pytest.raises(InvalidEvidenceError, match="validated_builds"):
        validate(_with_metrics(kind="matrix"))


def test_a_matrix_record_names_its_builds_by_digest() -> None:
    builds: dict[str, Any] = {
        "region": "us-east-1",
        "images": [{"framework": "vllm", "image": "r/v@sha256:" + "a" * 64, "digest": "sha256:" + "a" * 64}],
    }
    document = _with_metrics(kind="matrix", data={"validated_builds": builds})
    assert validate(document).data["validated_builds"] == builds
    builds["images"][0]["digest"] = "latest"
    document = _with_metrics(kind="matrix", data={"validated_builds": builds})
    with pytest.raises(InvalidEvidenceError, match="validated_builds/images/0/digest"):
        validate(document)
    schema = evidence_schema()
    assert schema["properties"]["data"]["properties"]["validated_builds"]["$ref"].endswith("ValidatedBuilds")
