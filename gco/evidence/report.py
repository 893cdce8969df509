"""Human reports of an evidence record: markdown, and an HTML page with inline SVG plots.

Pure renderers: per-round values (`data.series`) and ratio-to-best intervals (metrics with a ratio statistic).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from gco.evidence.record import EvidenceRecord, Metric

PLOT_WIDTH = 640
ROW_HEIGHT = 22


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}"


def _ci(metric: Metric) -> str:
    return f"[{_fmt(metric.ci95[0])}, {_fmt(metric.ci95[1])}]" if metric.ci95 else "-"


def render_markdown(record: EvidenceRecord) -> str:
    """The record as markdown: summary, identity, metrics table, limitations, missing, artifacts."""
    lines = [
        f"# {record.kind}: evidence {record.id[:12]}",
        "",
        f"**{record.summary}**",
        "",
        f"- claim class: {record.claim_class}",
        f"- created: {record.created_at}",
        "",
    ]
    lines += [
        "## Metrics",
        "",
        "| subject | metric | statistic | value | 95% CI | n | unit |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {m.subject} | {m.name} | {m.statistic} | {_fmt(m.value)} | {_ci(m)} | {m.n} | {m.unit} |"
        for m in record.metrics
    ]
    lines += ["", "## Limitations", ""]
    lines += [f"- **{item.code}**: {item.text}" for item in record.limitations] or ["- none recorded"]
    if record.missing:
        lines += ["", "## Missing", "", *[f"- {item}" for item in record.missing]]
    if record.artifacts:
        lines += [
            "",
            "## Artifacts",
            "",
            *[f"- `{a.path}` ({a.role}) sha256 {a.sha256[:16]}" for a in record.artifacts],
        ]
    return "\n".join(lines) + "\n"


def _svg_open(rows: int) -> str:
    return f'<svg xmlns="http://www.w3.org/2000/svg" width="{PLOT_WIDTH}" height="{ROW_HEIGHT * (rows + 1)}">'


def _scale(value: float, low: float, high: float, width: float) -> float:
    return 0.0 if high <= low else (value - low) / (high - low) * width


def ratio_svg(metrics: Sequence[Metric]) -> str:
    """Horizontal interval plot of ratio-to-best CIs, one row per subject."""
    rows = [m for m in metrics if m.statistic == "ratio_to_best"]
    if not rows:
        return ""
    points = [v for m in rows for v in ([m.value, *(m.ci95 or ())])]
    low, high = min([*points, 1.0]) * 0.95, max([*points, 1.0]) * 1.05
    left, plot = 220, PLOT_WIDTH - 240
    parts = [_svg_open(len(rows))]
    one = left + _scale(1.0, low, high, plot)
    parts.append(f'<line x1="{one:.1f}" y1="0" x2="{one:.1f}" y2="{ROW_HEIGHT * len(rows)}" stroke="#999"/>')
    for i, m in enumerate(rows):
        y = ROW_HEIGHT * i + ROW_HEIGHT / 2
        label = html.escape(f"{m.subject} {m.name}")
        parts.append(f'<text x="0" y="{y + 4:.1f}" font-size="11">{label}</text>')
        if m.ci95:
            x1, x2 = (left + _scale(v, low, high, plot) for v in m.ci95)
            parts.append(
                f'<line x1="{x1:.1f}" y1="{y:.1f}" x2="{x2:.1f}" y2="{y:.1f}" '
                'stroke="#36c" stroke-width="3"/>'
            )
        parts.append(
            f'<circle cx="{left + _scale(m.value, low, high, plot):.1f}" cy="{y:.1f}" r="4" fill="#c33"/>'
        )
    parts.append("</svg>")
    return "".join(parts)


def rounds_svg(series: Sequence[dict[str, Any]]) -> str:
    """Per-round values as dots, one row per subject x metric, x = value."""
    rows = [s for s in series if s.get("per_round")]
    if not rows:
        return ""
    values = [float(v) for s in rows for v in s["per_round"].values()]
    low, high = min(values) * 0.95, max(values) * 1.05
    left, plot = 220, PLOT_WIDTH - 240
    parts = [_svg_open(len(rows))]
    for i, s in enumerate(rows):
        y = ROW_HEIGHT * i + ROW_HEIGHT / 2
        parts.append(
            f'<text x="0" y="{y + 4:.1f}" font-size="11">{html.escape(str(s.get("subject", "")))}</text>'
        )
        for round_no, value in s["per_round"].items():
            x = left + _scale(float(value), low, high, plot)
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="#393">'
                f"<title>round {html.escape(str(round_no))}: "
                f"{_fmt(float(value))}</title></circle>"
            )
    parts.append("</svg>")
    return "".join(parts)


def render_html(record: EvidenceRecord) -> str:
    """A self-contained HTML page: the markdown content as tables plus the two plots."""
    rows = "".join(
        f"<tr><td>{html.escape(m.subject)}</td><td>{html.escape(m.name)}</td><td>{html.escape(m.statistic)}</td>"
        f"<td>{_fmt(m.value)}</td><td>{html.escape(_ci(m))}</td><td>{m.n}</td><td>{html.escape(m.unit)}</td></tr>"
        for m in record.metrics
    )
    limits = "".join(
        f"<li><b>{html.escape(i.code)}</b>: {html.escape(i.text)}</li>" for i in record.limitations
    )
    series = record.data.get("series", [])
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(record.kind)} {record.id[:12]}</title></head><body>"
        f"<h1>{html.escape(record.kind)}: evidence {record.id[:12]}</h1>"
        f"<p><b>{html.escape(record.summary)}</b></p>"
        f"<p>claim class: {record.claim_class}; created {html.escape(record.created_at)}</p>"
        "<h2>Per-round values</h2>"
        + rounds_svg(series if isinstance(series, list) else [])
        + "<h2>Ratio to best (95% CI)</h2>"
        + ratio_svg(record.metrics)
        + "<h2>Metrics</h2><table border='1' cellspacing='0' cellpadding='3'>"
        "<tr><th>subject</th><th>metric</th>"
        f"<th>statistic</th><th>value</th><th>95% CI</th><th>n</th><th>unit</th></tr>{rows}</table>"
        f"<h2>Limitations</h2><ul>{limits or '<li>none recorded</li>'}</ul></body></html>\n"
    )
