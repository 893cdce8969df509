"""The report page as a person sees it: opened in Debian's headless chromium, every plot is drawn,
non-empty and inside the viewport's width; a screenshot is kept; one record renders to one set of bytes."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from gco.evidence import EvidenceRecord, LimitationEntry, Metric
from gco.evidence.page import render_html
from gco.evidence.record import RATIO_OF_MEDIANS
from tests.functional.evidence.chromium import VIEWPORT, chromium_path, inspect_page

PLOTS = {"per-round", "forest", "distributions"}


def needs_chromium() -> None:
    """Skip where chromium is absent on a developer's machine; in CI (.ci/run installs it) fail."""
    if chromium_path() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed; .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run does this in CI)")


def rounds_record() -> EvidenceRecord:
    """A rounds record of two engines x 4 rounds with per-request timings, as `bench rounds` writes."""
    rng = random.Random(7)
    series, metrics, requests = [], [], []
    for label, tps in (("engine-a", 100.0), ("engine-b", 72.0)):
        for metric, base in (("decode_tps", tps), ("ttft_ms", 2000 / tps)):
            per_round = {str(r): base * (1 + rng.uniform(-0.04, 0.04)) for r in range(1, 5)}
            series.append(
                {
                    "subject": f"{label}/all {metric}",
                    "label": label,
                    "bucket": "all",
                    "metric": metric,
                    "per_round": per_round,
                }
            )
        ratio = tps / 100
        metrics.append(
            Metric(
                name="decode_tps_ratio_to_best",
                value=ratio,
                unit="ratio",
                statistic=RATIO_OF_MEDIANS,
                n=4,
                ci95=(ratio - 0.04, min(ratio + 0.04, 1.0)),
                subject=f"{label}/all / engine-a",
            )
        )
        for round_no in range(1, 5):
            requests.append(
                {
                    "label": label,
                    "round": round_no,
                    "ttft_ms": [rng.gauss(2000 / tps, 2) for _ in range(6)],
                    "itl_ms": [rng.gauss(1000 / tps, 0.5) for _ in range(6)],
                    "e2e_ms": [rng.gauss(16000 / tps, 10) for _ in range(6)],
                }
            )
    return EvidenceRecord(
        kind="bench.rounds",
        claim_class="derived",
        summary="2 engines x 4 rounds, 8/8 cells ok, balanced",
        created_at="2026-01-01T00:00:00Z",
        identity={
            "gpu": "not checked",
            "prompt_set_digest": "e" * 64,
            "workload": {"max_tokens": 16},
            "engines": [
                {
                    "label": "engine-a",
                    "argv": ["serve", "--api-key", "<redacted>"],
                    "env": {},
                    "model": {"id": "org/model"},
                }
            ],
        },
        metrics=metrics,
        limitations=[LimitationEntry(code="gpu_memory_not_checked", text="NVML unavailable")],
        data={"series": series, "requests": requests},
    ).sealed()


def check_page(page: Path, user_data: Path, artifact: str) -> dict[str, object]:
    layout = inspect_page(page, user_data, artifact)
    plots = {plot["name"]: plot for plot in layout["plots"]}
    assert set(plots) == PLOTS, layout
    assert layout["scrollWidth"] <= layout["width"] == VIEWPORT[0]  # nothing overflows sideways
    for name, plot in plots.items():
        assert plot["width"] > 200 and plot["height"] > 80, (name, plot)
        assert plot["x"] >= 0 and plot["x"] + plot["width"] <= layout["width"], (name, plot)
        assert plot["height"] <= VIEWPORT[1], (name, plot)  # one plot fits in one screen
        assert plot["shapes"] > 10, (name, plot)
        assert plot["colours"] > 8 and 0.01 < plot["ink"] < 0.9, (name, plot)  # drawn, not blank
    assert Path(str(layout["screenshot"])).stat().st_size > 10_000
    return layout


def test_the_page_in_chromium(tmp_path: Path) -> None:
    needs_chromium()
    record = rounds_record()
    page = tmp_path / f"{record.id}.html"
    page.write_text(render_html(record), encoding="utf-8")
    assert render_html(rounds_record()).encode() == page.read_bytes()  # the same record, the same bytes
    check_page(page, tmp_path / "profile", "report-page.png")
