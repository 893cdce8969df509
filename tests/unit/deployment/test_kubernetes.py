"""The EKS calendar: support status by UTC day, the defaults in standard support today, and the
config refusing a version out of standard support unless extended support is accepted."""

from __future__ import annotations

import json
from datetime import date

import pytest

from gco.deployment.charts import installed_charts, unsupported
from gco.deployment.config import ConfigError, GcoConfig, parse_config
from gco.deployment.kubernetes import (
    CLUSTER_AUTOSCALER_TAGS,
    DEFAULT_KUBERNETES_VERSION,
    EKS_CALENDAR,
    autoscaler_tag,
    newest_standard,
    standard_versions,
    support_status,
    today_utc,
)
from tests.cdk.synth_cache import ROOT

# The day 1.34's standard support ended (extended-support billing starts that day, UTC).
DAY = date(2026, 12, 2)


def test_status_changes_at_the_start_of_the_end_day() -> None:
    assert support_status("1.34", date(2026, 12, 1)) == "standard"
    assert support_status("1.34", DAY) == "extended"
    assert support_status("1.34", date(2027, 12, 1)) == "extended"
    assert support_status("1.34", date(2027, 12, 2)) == "ended"
    assert support_status("1.20", DAY) == "unknown"


def test_standard_versions_and_the_newest() -> None:
    assert standard_versions(DAY) == ["1.35", "1.36"]
    assert newest_standard(DAY) == "1.36"
    assert newest_standard(date(2030, 1, 1)) is None


def test_every_default_version_is_in_standard_support_and_in_every_chart_s_range_today() -> None:
    # Fails on the day the defaults fall out of EKS standard support, or when a chart's pin moves to a
    # release whose documented range leaves the default out: time to move them on.
    supported = standard_versions(today_utc())
    cdk_json = json.loads((ROOT / "cdk.json").read_text())["context"]["gco"]["kubernetes_version"]
    every_chart = installed_charts(scaling=True)
    for version in (DEFAULT_KUBERNETES_VERSION, GcoConfig().kubernetes_version, cdk_json):
        assert version in supported, f"{version} is out of EKS standard support: update the default"
        assert autoscaler_tag(version).startswith(f"v{version}.")
        assert unsupported(version, every_chart) == [], f"a chart does not document Kubernetes {version}"
    # The default is the newest version that both holds: a newer one waits for its charts.
    fitting = [v for v in supported if not unsupported(v, every_chart)]
    assert fitting[-1] == DEFAULT_KUBERNETES_VERSION


def test_each_pinned_autoscaler_matches_its_minor_version() -> None:
    for version, tag in CLUSTER_AUTOSCALER_TAGS.items():
        assert tag.startswith(f"v{version}.") and version in EKS_CALENDAR
    with pytest.raises(ValueError, match=r"no Cluster Autoscaler release is pinned for Kubernetes 1\.32"):
        autoscaler_tag("1.32")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"kubernetes_version": "1.34"}, "1.34 is out of EKS standard support since 2026-12-02"),
        ({"kubernetes_version": "1.20"}, "'1.20' is not in the EKS calendar gco knows"),
        (
            {"kubernetes_version": "1.32", "allow_extended_support": True},
            "no Cluster Autoscaler release is pinned for Kubernetes 1.32",
        ),
    ],
)
def test_config_refuses_versions_out_of_standard_support(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw, today=DAY)
    assert str(caught.value).startswith(f"gco.kubernetes_version: {message}")


def test_extended_support_is_taken_only_when_allowed() -> None:
    config = parse_config({"kubernetes_version": "1.34", "allow_extended_support": True}, today=DAY)
    assert config.kubernetes_version == "1.34"
    assert parse_config({"kubernetes_version": "1.34"}, today=date(2026, 12, 1)).kubernetes_version == "1.34"
    with pytest.raises(ConfigError, match="past EKS extended support"):
        parse_config({"kubernetes_version": "1.34", "allow_extended_support": True}, today=date(2028, 1, 1))
