"""Build evidence records for `bench serve`, `bench clip` and `bench rounds`, write them with their reports.

Identity carries redacted argv/env, the prompt- or clip-set digest and a digest (never the text) of
--serve-cmd. Claim classes: medians of client timings are observed (single, clip); load values and every
ratio are derived.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gco.bench.clients.records import (
    DEFINITIONS,
    HIGHER_IS_BETTER,
    MEDIAN_OF_PAIRED_RATIOS,
    PAIRED_RATIO_TO_BEST,
    RATIO_TO_BEST,
    STATISTICS,
    UNITS,
    ClipResult,
    RequestRecord,
    ServeResult,
)
from gco.bench.clients.serve import overridden_fields
from gco.bench.rounds.manifest import Engine, Workload
from gco.bench.rounds.summary import MetricSummary, Summary, claim_class
from gco.evidence.record import (
    RATIO_OF_MEDIANS,
    Artifact,
    EvidenceRecord,
    LimitationEntry,
    Metric,
    file_sha256,
    now_iso,
)
from gco.evidence.redact import redact_argv, redact_env
from gco.evidence.report import render_html, render_markdown
from gco.evidence.store import EvidenceStore, LocalEvidenceStore


def engine_identity(engine: Engine) -> dict[str, Any]:
    """An engine as the evidence names it, with secret-looking values redacted."""
    return {
        "label": engine.label,
        "argv": redact_argv(engine.argv),
        "env": redact_env(engine.env),
        "port": engine.port,
        "model": engine.model.model_dump(),
    }


def artifacts(paths: Sequence[tuple[Path, str]], root: Path) -> list[Artifact]:
    """Artifacts for the files that exist, paths relative to the run directory."""
    out = []
    for path, role in paths:
        if path.is_file():
            out.append(
                Artifact(
                    path=str(path.relative_to(root)) if path.is_relative_to(root) else str(path),
                    sha256=file_sha256(path),
                    role=role,
                )
            )
    return out


AT_N_STAR = "all at N*"


def serve_record(result: ServeResult, *, settings: dict[str, Any], files: list[Artifact]) -> EvidenceRecord:
    """The evidence of one `bench serve` call: per-bucket medians over requests (observed) or N* (derived)."""
    metrics = [
        Metric(
            name=m,
            value=v,
            unit=UNITS.get(m, ""),
            statistic="median_over_requests",
            n=int(values.get("requests", 0)),
            subject=bucket,
        )
        for bucket, values in result.buckets.items()
        for m, v in values.items()
        if m in UNITS
    ]
    metrics += [
        # Their own subject: the level N*, not every request (bucket `all` has a ttft_ms of its own).
        Metric(name=m, value=v, unit=UNITS.get(m, ""), statistic="at_n_star", n=1, subject=AT_N_STAR)
        for m, v in result.at_n_star.items()
    ]
    limitations = []
    if result.failed:
        limitations.append(
            LimitationEntry(
                code="failed_requests", text=f"{result.failed} of {result.requests} request(s) failed"
            )
        )
    if result.client.lagged:
        limitations.append(
            LimitationEntry(
                code="client_lagged", text=f"client schedule delay p99 {result.client.lag_p99_ms:.1f} ms"
            )
        )
    if settings.get("extra_body"):
        overrides = overridden_fields(settings["extra_body"])
        text = "an extra request body was sent"
        if overrides:
            text += f"; it overrides measured fields: {', '.join(overrides)}"
        limitations.append(LimitationEntry(code="extra_request_body", text=text))
    if result.mode == "load" and result.n_star is None:
        limitations.append(LimitationEntry(code="no_capacity", text="no load level was sustained"))
    line = (
        f"bench serve {result.mode} on {result.base_url}: {result.requests} requests, {result.failed} failed"
    )
    if result.mode == "single" and "all" in result.buckets and "decode_tps" in result.buckets["all"]:
        line += f", median decode {result.buckets['all']['decode_tps']:.1f} tok/s"
    if result.n_star is not None:
        line += f", N* {result.n_star}"
    return EvidenceRecord(
        kind="bench.serve",
        claim_class="observed" if result.mode == "single" else "derived",
        summary=line,
        created_at=now_iso(),
        identity={"settings": settings, "prompt_set_digest": result.prompt_digest},
        metrics=metrics,
        artifacts=files,
        limitations=limitations,
        data={"client": result.client.model_dump(), "levels": [lv.model_dump() for lv in result.levels]},
    ).sealed()


def clip_record(result: ClipResult, *, settings: dict[str, Any], files: list[Artifact]) -> EvidenceRecord:
    """The evidence of one `bench clip` call: per-shape median e2e and clips per minute (observed)."""
    metrics = [
        Metric(
            name=m,
            value=v,
            unit=UNITS[m],
            statistic="median_over_clips" if m == "e2e_ms" else "rate_over_clips",
            n=int(values.get("clips", 0)),
            subject=shape,
        )
        for shape, values in result.shapes.items()
        for m, v in values.items()
        if m in UNITS
    ]
    limitations = []
    if result.failed:
        failed = ", ".join(
            f"{shape} {n}" for shape, n in result.failed_by_shape.items() if n and shape != "all"
        )
        limitations.append(
            LimitationEntry(
                code="failed_requests", text=f"{result.failed} of {result.clips} clip(s) failed: {failed}"
            )
        )
    line = f"bench clip on {result.base_url}: {result.clips} clips, {result.failed} failed"
    overall = result.shapes.get("all", {})
    if "clips_per_min" in overall:
        line += f", {overall['clips_per_min']:.1f} clips/min"
    return EvidenceRecord(
        kind="bench.clip",
        claim_class="observed",
        summary=line,
        created_at=now_iso(),
        identity={"settings": settings, "clip_set_digest": result.clip_digest},
        metrics=metrics,
        artifacts=files,
        limitations=limitations,
        data={"failed_by_shape": result.failed_by_shape, "warmup_e2e_s": result.warmup_e2e_s},
    ).sealed()


def _ratio_metrics(m: MetricSummary, subject: str) -> list[Metric]:
    """`<metric>_ratio_to_best`, the ratio of medians (n = paired rounds), and, under a name of its own,
    `<metric>_paired_ratio_to_best`, the median of the paired ratios (one name per statistic)."""
    if m.ratio_to_best is None or m.ratio_n is None:
        return []
    out = [
        Metric(
            name=f"{m.metric}{RATIO_TO_BEST}",
            value=m.ratio_to_best,
            unit="ratio",
            statistic=RATIO_OF_MEDIANS,
            n=m.ratio_n,
            ci95=m.ratio_ci95,
            subject=subject,
        )
    ]
    if m.paired_ratio_median is not None:
        out.append(
            Metric(
                name=f"{m.metric}{PAIRED_RATIO_TO_BEST}",
                value=m.paired_ratio_median,
                unit="ratio",
                statistic=MEDIAN_OF_PAIRED_RATIOS,
                n=m.ratio_n,
                ci95=m.paired_ratio_ci95,
                subject=subject,
            )
        )
    return out


def rounds_record(
    summary: Summary,
    *,
    engines: Sequence[Engine],
    workload: Workload,
    prompt_digest: str,
    gpu: str | None,
    serve_cmd: str | None,
    files: list[Artifact],
    missing: list[str],
    cells: list[dict[str, Any]],
    reference: dict[str, Any] | None = None,
    requests: list[dict[str, Any]] | None = None,
    settings: dict[str, Any] | None = None,
    extra_data: dict[str, Any] | None = None,
) -> EvidenceRecord:
    """The evidence of a rounds run: medians over rounds and ratios of medians to the best engine.

    `requests` (from `cell_requests`) are each cell's request timings, which the report page draws
    as distributions per engine; `settings` (timeouts, warm-up, tolerance: the manifest's values and
    the flags') join the identity; `extra_data` (failures, resolved configurations) joins the data.
    """
    metrics: list[Metric] = []
    series = []
    for m in summary.metrics:
        subject = f"{m.label}/{m.bucket}"
        metrics.append(
            Metric(
                name=m.metric,
                value=m.median,
                unit=m.unit,
                statistic="median_over_rounds",
                n=m.n,
                ci95=m.ci95,
                subject=subject,
            )
        )
        metrics += _ratio_metrics(m, f"{subject} / {m.best_label}")
        series.append(
            {
                "subject": f"{subject} {m.metric}",
                "label": m.label,
                "bucket": m.bucket,
                "metric": m.metric,
                "per_round": {str(k): v for k, v in m.per_round.items()},
            }
        )
    identity = {
        "gpu": gpu or "not checked",
        "engines": [engine_identity(e) for e in engines],
        "workload": workload.model_dump(mode="json"),
        "prompt_set_digest": prompt_digest,
        "mode": summary.mode,
        "serve_cmd_sha256": hashlib.sha256(serve_cmd.encode()).hexdigest() if serve_cmd else None,
    }
    if reference is not None:
        identity["load_reference"] = reference
    if settings is not None:
        identity["run_settings"] = settings
    return EvidenceRecord(
        kind="bench.rounds",
        claim_class=claim_class(summary.mode),
        summary=summary.line,
        created_at=now_iso(),
        identity=identity,
        metrics=metrics,
        artifacts=files,
        missing=missing,
        limitations=[LimitationEntry(code=item.code, text=item.text) for item in summary.limitations],
        data={
            "series": series,
            "claim_classes": {
                f"{summary.mode} medians": claim_class(summary.mode),
                "ratios to the best engine": "derived",
            },
            "cells": cells,
            "requests": requests or [],
            "adaptive": summary.adaptive.model_dump() if summary.adaptive else None,
            "metric_definitions": metric_definitions(summary),
            **(extra_data or {}),
        },
    ).sealed()


def metric_definitions(summary: Summary) -> dict[str, Any]:
    """What each metric and statistic of the record means, with its unit and claim class."""
    names = sorted({m.metric for m in summary.metrics})
    return {
        "metrics": {
            name: {
                "definition": DEFINITIONS.get(name, ""),
                "unit": UNITS.get(name, ""),
                "higher_is_better": HIGHER_IS_BETTER.get(name, False),
                "claim_class": claim_class(summary.mode),
            }
            for name in names
        },
        "ratio_to_best": {
            "name": f"<metric>{RATIO_TO_BEST}",
            "definition": "the engine's value relative to the best ranked engine's (1 for the best)",
            "statistic": RATIO_OF_MEDIANS,
            "unit": "ratio",
            "claim_class": "derived",
        },
        "paired_ratio_to_best": {
            "name": f"<metric>{PAIRED_RATIO_TO_BEST}",
            "definition": "the median over the paired rounds of the engine's value over the best engine's",
            "statistic": MEDIAN_OF_PAIRED_RATIOS,
            "unit": "ratio",
            "claim_class": "derived",
        },
        "statistics": STATISTICS,
    }


def cell_requests(label: str, round_no: int, requests_path: Path) -> dict[str, Any] | None:
    """One cell's successful requests as the record keeps them: TTFT, mean ITL and e2e in ms.

    Read from the `requests.jsonl` that `bench serve` wrote in the cell's directory; None when the
    cell left none (it failed before serving, or a --serve-cmd wrote elsewhere).
    """
    if not requests_path.is_file():
        return None
    out: dict[str, Any] = {"label": label, "round": round_no, "ttft_ms": [], "itl_ms": [], "e2e_ms": []}
    for line in requests_path.read_text(encoding="utf-8").splitlines():
        request = RequestRecord.model_validate_json(line)
        if not request.ok:
            continue
        for key, seconds in (
            ("ttft_ms", request.ttft_s),
            ("itl_ms", request.itl_mean_s),
            ("e2e_ms", request.e2e_s),
        ):
            if seconds is not None:
                out[key].append(round(seconds * 1000, 3))
    return out


def write_record(record: EvidenceRecord, run_dir: Path, extra: Sequence[EvidenceStore] = ()) -> Path:
    """Write `<run_dir>/evidence/<id>.json` with its .md and .html beside it, then to every extra store."""
    store = LocalEvidenceStore(run_dir / "evidence")
    path = Path(store.put(record))
    path.with_suffix(".md").write_text(render_markdown(record), encoding="utf-8")
    path.with_suffix(".html").write_text(render_html(record), encoding="utf-8")
    for other in extra:
        other.put(record)
    return path


def dump_json(path: Path, data: Any) -> None:
    """Write JSON atomically (temp file then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(path.suffix + ".partial")
    partial.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    partial.replace(path)
