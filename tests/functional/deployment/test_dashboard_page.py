"""The dashboards rendered as pages (gco.deployment.dashboard_page) and opened in Debian's headless
chromium like the report page: every metric widget is drawn, legible (a legend row per line it asks
for) and inside the viewport; a screenshot of each is kept. Skipped with the reason where chromium is
absent on a developer's machine; CI (.ci/run installs chromium) fails instead."""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest

from gco.deployment.dashboard_page import metric_lines, render_dashboard_html
from gco.deployment.dashboards import global_dashboard, regional_dashboard
from tests.functional.evidence.chromium import VIEWPORT, inspect_page
from tests.functional.evidence.test_report_page import needs_chromium

BODIES = {
    "gco-us-east-1": regional_dashboard(
        region="us-east-1",
        api_name="gco-inference-us-east-1",
        stage="v1",
        access_log_group="/gco-inference-us-east-1/api-access-1a2b3c4d",
        cluster_name="gco-us-east-1",
    ),
    "gco-regions": global_dashboard(
        api_names={"us-east-1": "gco-inference-us-east-1", "us-west-2": "gco-inference-us-west-2"},
        cluster_names={"us-east-1": "gco-us-east-1", "us-west-2": "gco-us-west-2"},
        stage="v1",
    ),
}


def test_the_page_holds_every_widget_and_line_and_is_the_same_each_time() -> None:
    for name, body in BODIES.items():
        page = render_dashboard_html(name, body)
        assert page == render_dashboard_html(name, body)
        assert len(re.findall(r'data-widget="\d+"', page)) == len(body["widgets"])
        metric_widgets = [w for w in body["widgets"] if w["type"] == "metric"]
        assert page.count('class="plot"') == len(metric_widgets)
        for widget in metric_widgets:
            assert all(line and html.escape(line) in page for line in metric_lines(widget)), widget
        assert "<script" not in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")


@pytest.mark.parametrize("name", sorted(BODIES))
def test_the_dashboard_page_in_chromium(name: str, tmp_path: Path) -> None:
    needs_chromium()
    body: dict[str, Any] = BODIES[name]
    page = tmp_path / f"{name}.html"
    page.write_text(render_dashboard_html(name, body), encoding="utf-8")
    layout = inspect_page(page, tmp_path / "profile", f"dashboard-{name}.png")
    widgets = [w for w in body["widgets"] if w["type"] == "metric"]
    plots = {plot["name"]: plot for plot in layout["plots"]}
    assert set(plots) == {f"widget-{i}" for i, w in enumerate(body["widgets"]) if w["type"] == "metric"}
    assert layout["scrollWidth"] <= layout["width"] == VIEWPORT[0]  # nothing overflows sideways
    for index, widget in enumerate(body["widgets"]):
        if widget["type"] != "metric":
            continue
        plot = plots[f"widget-{index}"]
        assert plot["width"] > 200 and plot["height"] > 60, plot
        assert plot["x"] >= 0 and plot["x"] + plot["width"] <= layout["width"], plot
        # Title, Region line and one text and one swatch per legend row.
        assert plot["shapes"] >= 2 + 2 * len(metric_lines(widget)), plot
        assert plot["colours"] > 3 and 0.005 < plot["ink"] < 0.9, plot  # drawn, not blank
    assert len(widgets) >= 4
    assert Path(str(layout["screenshot"])).stat().st_size > 5_000
