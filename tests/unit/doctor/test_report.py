"""The report's lines and verdict, and the version calendar check (no AWS call)."""

from __future__ import annotations

from datetime import date

from gco.deployment.config import parse_config
from gco.doctor.model import Report, fail, ok, warn
from gco.doctor.service import calendar_check


def test_warnings_pass_failures_fail_and_each_line_carries_its_fix() -> None:
    passing = Report(checks=[ok("node", "local", "v22"), warn("role", "account", "absent", "create it")])
    assert passing.ok
    failing = Report(
        checks=[*passing.checks, fail("cdk-bootstrap", "us-west-2", "not bootstrapped", "bootstrap")]
    )
    assert not failing.ok
    assert failing.lines() == [
        "OK   local     node: v22",
        "WARN account   role: absent -> fix: create it",
        "FAIL us-west-2 cdk-bootstrap: not bootstrapped -> fix: bootstrap",
    ]


def test_the_calendar_check_counts_the_days_and_warns_near_the_end() -> None:
    # No KEDA: no KEDA release documents 1.36 yet (gco/deployment/charts.py).
    config = parse_config({"kubernetes_version": "1.36", "keda_regions": []}, today=date(2026, 12, 2))
    far = calendar_check(config, date(2026, 12, 2))
    assert (far.status, far.detail) == ("ok", "Kubernetes 1.36: standard support until 2027-08-02 (243 days)")
    near = calendar_check(config, date(2027, 7, 1))
    assert near.status == "warn" and "(32 days)" in near.detail
    extended = parse_config(
        {"kubernetes_version": "1.34", "allow_extended_support": True}, today=date(2026, 12, 2)
    )
    assert calendar_check(extended, date(2026, 12, 2)).status == "warn"
