"""The HTML report page of an evidence record: one self-contained file, no script, no network.

A pure renderer: the same record gives the same bytes (the plots are deterministic SVG, see
`gco.evidence.plots`; nothing here reads a clock or draws a random id). The page reads top down
as a reviewer should: the summary, then what limits the claim (limitations and missing evidence)
before any number, then the run's identity (GPU, engines with their redacted argv and env,
models, workload, prompt-set digest), then the numbers: per-round values per engine, the ratio
to the best engine with its interval (a forest plot), the request-level TTFT / ITL / e2e
distributions per engine, and the metrics table. Styles are inline; images are inline SVG.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

from gco.evidence.plots import distributions_svg, forest_svg, per_round_svg
from gco.evidence.record import RATIO_OF_MEDIANS, EvidenceRecord, Metric

STYLE = (
    "body{font-family:sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#222}"
    "table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #bbb;padding:2px 6px;"
    "text-align:left;vertical-align:top;font-size:.85rem}code,pre{font-size:.8rem;white-space:pre-wrap;"
    "word-break:break-all}.limits{background:#fff4e5;border-left:4px solid #e69500;padding:.3rem 1rem}"
    "svg.plot{display:block;max-width:100%;height:auto}"
)


def fmt(value: float | None) -> str:
    """A number as the reports print it (4 significant digits; '-' for none)."""
    return "-" if value is None else f"{value:.4g}"


def ci_text(metric: Metric) -> str:
    return f"[{fmt(metric.ci95[0])}, {fmt(metric.ci95[1])}]" if metric.ci95 else "-"


def _e(value: object) -> str:
    return html.escape(str(value))


def _code(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return f"<code>{_e(text)}</code>"


def identity_rows(identity: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The identity as (field, plain text) rows, engines apart; shared by the markdown report."""
    rows = []
    for key in ("gpu", "mode", "prompt_set_digest", "clip_set_digest", "serve_cmd_sha256"):
        if identity.get(key) is not None:
            rows.append((key, str(identity[key])))
    for key, value in sorted(identity.items()):
        if key not in {"gpu", "mode", "prompt_set_digest", "clip_set_digest", "serve_cmd_sha256", "engines"}:
            rows.append((key, json.dumps(value, sort_keys=True)))
    return rows


def engines_of(identity: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    engines = identity.get("engines")
    return [e for e in engines if isinstance(e, Mapping)] if isinstance(engines, list) else []


def model_text(engine: Mapping[str, Any]) -> str:
    model = engine.get("model") or {}
    if not isinstance(model, Mapping):
        return str(model)
    parts = [str(model.get("id", ""))]
    parts += [f"{key} {model[key]}" for key in ("revision", "precision") if model.get(key)]
    return ", ".join(part for part in parts if part)


def _identity_html(identity: Mapping[str, Any]) -> str:
    engines = engines_of(identity)
    out = ["<h2>Identity</h2><table>"]
    out += [f"<tr><th>{_e(k)}</th><td>{_code(v)}</td></tr>" for k, v in identity_rows(identity)]
    out.append("</table>")
    if engines:
        out.append("<h3>Engines</h3><table><tr><th>label</th><th>model</th><th>argv</th><th>env</th></tr>")
        out += [
            f"<tr><td>{_e(e.get('label', ''))}</td><td>{_e(model_text(e))}</td>"
            f"<td>{_code(' '.join(map(str, e.get('argv') or [])))}</td>"
            f"<td>{_code(e.get('env') or {})}</td></tr>"
            for e in engines
        ]
        out.append("</table>")
    return "".join(out)


def _series(record: EvidenceRecord) -> list[Mapping[str, Any]]:
    """Per-round series with label, bucket and metric (older records carry only `subject`)."""
    series = record.data.get("series")
    out: list[Mapping[str, Any]] = []
    for item in series if isinstance(series, list) else []:
        if not isinstance(item, Mapping):
            continue
        if "label" not in item:
            subject, _, metric = str(item.get("subject", "")).partition(" ")
            label, _, bucket = subject.partition("/")
            out.append({**item, "label": label, "bucket": bucket, "metric": metric})
        else:
            out.append(item)
    return out


def forest_rows(metrics: Sequence[Metric]) -> list[tuple[str, float, tuple[float, float] | None]]:
    return [(f"{m.subject} {m.name}", m.value, m.ci95) for m in metrics if m.statistic == RATIO_OF_MEDIANS]


def request_samples(record: EvidenceRecord) -> dict[str, dict[str, list[float]]]:
    """Per engine label, every successful request's TTFT, ITL and e2e (ms) over its cells."""
    samples: dict[str, dict[str, list[float]]] = {}
    requests = record.data.get("requests")
    for cell in requests if isinstance(requests, list) else []:
        if not isinstance(cell, Mapping):
            continue
        values = samples.setdefault(str(cell.get("label", "")), {})
        for metric in ("ttft_ms", "itl_ms", "e2e_ms"):
            values.setdefault(metric, []).extend(float(v) for v in cell.get(metric) or [])
    return samples


def _section(title: str, svg: str, empty: str) -> str:
    return f"<h2>{_e(title)}</h2>" + (svg or f"<p>{_e(empty)}</p>")


def render_html(record: EvidenceRecord) -> str:
    """The record as one self-contained page (see the module docstring for its order)."""
    limits = "".join(f"<li><b>{_e(i.code)}</b>: {_e(i.text)}</li>" for i in record.limitations)
    missing = "".join(f"<li>{_e(item)}</li>" for item in record.missing)
    rows = "".join(
        f"<tr><td>{_e(m.subject)}</td><td>{_e(m.name)}</td><td>{_e(m.statistic)}</td>"
        f"<td>{fmt(m.value)}</td><td>{_e(ci_text(m))}</td><td>{m.n}</td><td>{_e(m.unit)}</td></tr>"
        for m in record.metrics
    )
    artifacts = "".join(
        f"<tr><td>{_code(a.path)}</td><td>{_e(a.role)}</td><td>{_code(a.sha256)}</td></tr>"
        for a in record.artifacts
    )
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e(record.kind)} {record.id[:12]}</title><style>{STYLE}</style></head><body>",
        f"<h1>{_e(record.kind)}: evidence {record.id[:12]}</h1>",
        f"<p><b>{_e(record.summary)}</b></p>",
        f"<p>claim class: {_e(record.claim_class)}; created {_e(record.created_at)}; "
        f"id {_code(record.id)}</p>",
        f"<div class='limits'><h2>Limitations</h2><ul>{limits or '<li>none recorded</li>'}</ul>",
        f"<h3>Missing</h3><ul>{missing}</ul></div>" if missing else "</div>",
        _identity_html(record.identity),
        _section("Per-round values per engine", per_round_svg(_series(record)), "no per-round values"),
        _section("Ratio to the best engine (95% CI)", forest_svg(forest_rows(record.metrics)), "no ratios"),
        _section(
            "Request distributions per engine (TTFT, ITL, e2e)",
            distributions_svg(request_samples(record)),
            "no request timings in this record",
        ),
        "<h2>Metrics</h2><table><tr><th>subject</th><th>metric</th><th>statistic</th><th>value</th>",
        f"<th>95% CI</th><th>n</th><th>unit</th></tr>{rows}</table>",
    ]
    if artifacts:
        parts.append(
            f"<h2>Artifacts</h2><table><tr><th>path</th><th>role</th><th>sha256</th></tr>{artifacts}</table>"
        )
    parts.append("</body></html>\n")
    return "".join(parts)
