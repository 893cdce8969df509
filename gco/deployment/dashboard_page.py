"""A dashboard body as a page to look at before it is deployed, in the report page's style
(`gco.evidence.page`): one self-contained HTML file, no script, no network.

Each metric widget is drawn as an SVG card at its place in CloudWatch's 24-column grid: its title, its
Region, and one legend row per line it will draw (namespace, metric, dimensions, statistic, or the
SEARCH expression), each with its own colour. No value is drawn: the page shows what the dashboard
asks CloudWatch for, not data. Log widgets show their Logs Insights query, text widgets their text.
"""

from __future__ import annotations

import html
import json
from typing import Any

from gco.evidence.page import STYLE

GRID = 24
CARD_WIDTH = 600
ROW_HEIGHT = 22
# Distinct legend colours (the first lines of CloudWatch's own palette).
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def _e(value: object) -> str:
    return html.escape(str(value))


def metric_lines(widget: dict[str, Any]) -> list[str]:
    """One line of text per metric or expression of a metric widget."""
    properties = widget["properties"]
    lines = []
    for line in properties.get("metrics", []):
        for item in line:
            if isinstance(item, dict) and "expression" in item:
                lines.append(f"{item.get('label', item['id'])}: {item['expression']}")
        plain = [part for part in line if isinstance(part, str)]
        if plain:
            options = next((part for part in line if isinstance(part, dict)), {})
            dims = ", ".join(f"{k}={v}" for k, v in zip(plain[2::2], plain[3::2], strict=True))
            stat = options.get("stat", properties.get("stat", ""))
            lines.append(f"{plain[0]} {plain[1]} [{dims}] {stat}".strip())
    return lines


def metric_svg(index: int, widget: dict[str, Any]) -> str:
    """A metric widget as an SVG card: title, Region, a legend row per line."""
    properties = widget["properties"]
    lines = metric_lines(widget)
    height = 56 + ROW_HEIGHT * len(lines)
    rows = []
    for row, text in enumerate(lines):
        y = 56 + ROW_HEIGHT * row
        colour = PALETTE[row % len(PALETTE)]
        rows.append(
            f'<path d="M12 {y - 5} h28" stroke="{colour}" stroke-width="4"/>'
            f'<text x="48" y="{y}" font-size="12">{_e(text)}</text>'
        )
    return (
        f'<svg class="plot" data-plot="widget-{index}" viewBox="0 0 {CARD_WIDTH} {height}" '
        f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{_e(properties["title"])}">'
        f'<rect x="1" y="1" width="{CARD_WIDTH - 2}" height="{height - 2}" fill="none" stroke="#bbb"/>'
        f'<text x="12" y="22" font-size="15" font-weight="bold">{_e(properties["title"])}</text>'
        f'<text x="12" y="40" font-size="11" fill="#555">{_e(properties["region"])}, '
        f"period {_e(properties.get('period', ''))} s, {_e(properties.get('view', ''))}</text>"
        f"{''.join(rows)}</svg>"
    )


def widget_html(index: int, widget: dict[str, Any]) -> str:
    width = 100 * int(widget.get("width", GRID)) / GRID
    properties = widget["properties"]
    if widget["type"] == "metric":
        inner = metric_svg(index, widget)
    elif widget["type"] == "log":
        inner = (
            f"<h3>{_e(properties['title'])}</h3><p>{_e(properties['region'])}, Logs Insights</p>"
            f"<pre>{_e(properties['query'])}</pre>"
        )
    else:
        inner = f"<pre>{_e(properties.get('markdown', ''))}</pre>"
    return (
        f'<div class="widget" data-widget="{index}" data-type="{_e(widget["type"])}" '
        f'style="box-sizing:border-box;display:inline-block;vertical-align:top;width:{width:.4g}%;'
        f'padding:4px">{inner}</div>'
    )


def render_dashboard_html(name: str, body: dict[str, Any]) -> str:
    """The page of dashboard `name`: its widgets in order, then its body as JSON."""
    widgets = "".join(widget_html(i, w) for i, w in enumerate(body["widgets"]))
    source = json.dumps(body, indent=1, sort_keys=True)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(name)}</title>'
        f"<style>{STYLE}</style></head><body><h1>Dashboard {_e(name)}</h1>"
        f"<p>{len(body['widgets'])} widgets, as CloudWatch will lay them out (24 columns).</p>"
        f"<div>{widgets}</div><h2>Body</h2><pre>{_e(source)}</pre></body></html>"
    )
