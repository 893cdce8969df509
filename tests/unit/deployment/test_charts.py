"""The pinned charts' documented Kubernetes ranges, and the config refusing a version a chart it
installs does not document."""

from __future__ import annotations

from datetime import date

import pytest

from gco.deployment.charts import (
    BASE_CHARTS,
    CHART_RELEASES,
    LOAD_BALANCER_CONTROLLER,
    ChartRelease,
    installed_charts,
    unsupported,
)
from gco.deployment.config import ConfigError, parse_config
from gco.reconcile import addons

DAY = date(2026, 12, 2)


def release(low: str, high: str | None) -> ChartRelease:
    return ChartRelease("https://example.test/charts", "demo", "1.0.0", "1.0.0", low, high, "a test row")


def test_a_range_holds_its_ends_and_nothing_past_them() -> None:
    window = release("1.33", "1.35")
    assert [window.supports(v) for v in ("1.32", "1.33", "1.35", "1.36")] == [False, True, True, False]
    assert window.support_range == "1.33-1.35"
    floor = release("1.22", None)
    assert not floor.supports("1.21") and floor.supports("1.22") and floor.supports("1.40")
    assert floor.support_range == "1.22 and newer"
    with pytest.raises(ValueError, match=r"'2\.1' is not a Kubernetes 1\.x version"):
        floor.supports("2.1")


def test_every_row_names_its_source_and_a_range_that_reads_forwards() -> None:
    assert set(CHART_RELEASES) == {*BASE_CHARTS, *addons.SCALING_ADDONS}
    for name, row in CHART_RELEASES.items():
        assert row.chart == name and row.source and row.repository.startswith("https://")
        assert row.supports(row.kubernetes_min)
        if row.kubernetes_max is not None:
            assert row.supports(row.kubernetes_max)
            assert not row.supports(f"1.{int(row.kubernetes_max.split('.')[1]) + 1}")


def test_keda_is_the_chart_that_leaves_1_36_out() -> None:
    assert unsupported("1.36", installed_charts(scaling=True)) == [addons.KEDA]
    assert unsupported("1.36", installed_charts(scaling=False)) == []
    assert unsupported("1.35", installed_charts(scaling=True)) == []
    assert installed_charts(scaling=False) == (
        addons.DEVICE_PLUGIN, addons.CLUSTER_AUTOSCALER, LOAD_BALANCER_CONTROLLER,
    )  # fmt: skip


@pytest.mark.parametrize(
    "raw",
    [
        {"kubernetes_version": "1.36"},
        {"kubernetes_version": "1.36", "regions": ["us-east-1", "us-west-2"], "keda_regions": ["us-west-2"]},
    ],
)
def test_config_refuses_a_version_a_chart_it_installs_does_not_document(raw: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, today=DAY)
    assert str(caught.value) == (
        "gco: kubernetes_version: 1.36 is outside the Kubernetes versions keda 2.20.2 documents "
        "(1.33-1.35): pick a version it lists, or keda_regions: [] (no KEDA)"
    )


def test_config_takes_that_version_without_the_chart() -> None:
    config = parse_config({"kubernetes_version": "1.36", "keda_regions": []}, today=DAY)
    assert config.kubernetes_version == "1.36"
    assert parse_config({}, today=DAY).kubernetes_version == "1.35"
    # Extended support and the chart ranges are separate checks: KEDA 2.20 documents 1.34.
    extended = parse_config({"kubernetes_version": "1.34", "allow_extended_support": True}, today=DAY)
    assert extended.kubernetes_version == "1.34"
