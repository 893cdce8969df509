"""The sweep's replica metrics as the Lambda prints them (CloudWatch embedded metric format), and the
dashboards' references to namespace `gco` checked against exactly what it prints."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

from gco.deployment.dashboards import global_dashboard, metric_references, regional_dashboard
from gco.reconcile.engine_metrics import TTFT_P50_METRIC, TTFT_P99_METRIC, TtftReading
from gco.reconcile.failures import METRICS_NAMESPACE
from gco.reconcile.replica_metrics import not_ready, replica_counts
from gco.reconcile.sweep import SweepReport


def deployment(replicas: int | None, ready: int | None) -> dict[str, Any]:
    spec = {} if replicas is None else {"replicas": replicas}
    status = {} if ready is None else {"readyReplicas": ready}
    return {"kind": "Deployment", "spec": spec, "status": status}


def test_replicas_are_counted_over_an_endpoint_s_deployments() -> None:
    objects = [deployment(2, 1), deployment(None, None), {"kind": "Service", "spec": {"replicas": 9}}]
    assert replica_counts(objects) == (1, 3)  # Kubernetes' default of 1 replica; absent ready is 0
    assert replica_counts([]) == (0, 0)
    assert not_ready({"a": (1, 3), "b": (2, 2), "c": (0, 0)}) == ["a"]


def emitted(
    capsys: pytest.CaptureFixture[str], report: SweepReport, ttft: TtftReading | None = None
) -> list[dict[str, Any]]:
    """The EMF records the sweep Lambda prints for `report` (its replica metrics and its count) and
    for a TTFT reading."""
    from lambdas import sweep as entry

    capsys.readouterr()
    entry.publish_replicas(report)
    if ttft is not None:
        entry.publish_ttft(ttft)
    with warnings.catch_warnings():  # Powertools warns when a flush has nothing (a failed listing)
        warnings.simplefilter("ignore", UserWarning)
        entry.metrics.flush_metrics()
    records = []
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("{") and "_aws" in line:
            records.append(json.loads(line))
    return records


def metrics_of(records: list[dict[str, Any]]) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """metric name -> [(namespace, dimensions)] over EMF records (CloudWatch User Guide, "Specification:
    Embedded metric format": `_aws.CloudWatchMetrics[].Namespace`, `Dimensions`, `Metrics[].Name`)."""
    found: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for record in records:
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for dimension_set in directive["Dimensions"]:
                dims = {key: str(record[key]) for key in dimension_set}
                for metric in directive["Metrics"]:
                    found.setdefault(metric["Name"], []).append((directive["Namespace"], dims))
    return found


def test_the_sweep_prints_ready_and_desired_per_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    report = SweepReport(replicas={"chat": (1, 2), "code": (2, 2)})
    found = metrics_of(emitted(capsys, report))
    ready = {dims["endpoint"]: dims for _, dims in found["ReplicasReady"]}
    assert set(ready) == {"chat", "code"}
    assert [ns for ns, _ in found["EndpointsNotReady"]] == [METRICS_NAMESPACE]
    records = emitted(capsys, report)
    # A single metric's value is printed as a list of one value.
    values = {(r["endpoint"], m["Name"]): r[m["Name"]][0] for r in records if "endpoint" in r
              for d in r["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}  # fmt: skip
    assert values == {
        ("chat", "ReplicasReady"): 1.0,
        ("chat", "ReplicasDesired"): 2.0,
        ("code", "ReplicasReady"): 2.0,
        ("code", "ReplicasDesired"): 2.0,
    }
    assert next(r for r in records if "EndpointsNotReady" in r)["EndpointsNotReady"] in (1.0, [1.0])


def test_a_sweep_that_listed_nothing_prints_no_count(capsys: pytest.CaptureFixture[str]) -> None:
    assert "EndpointsNotReady" not in metrics_of(emitted(capsys, SweepReport(error="denied")))


def test_the_sweep_prints_ttft_p50_and_p99_in_seconds_per_endpoint(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reading = TtftReading(values={TTFT_P50_METRIC: {"chat": 0.125}, TTFT_P99_METRIC: {"chat": 0.9}})
    records = [r for r in emitted(capsys, SweepReport(error="denied"), reading) if "endpoint" in r]
    printed = {
        (r["endpoint"], m["Name"], m["Unit"]): r[m["Name"]]
        for r in records
        for d in r["_aws"]["CloudWatchMetrics"]
        for m in d["Metrics"]
    }
    assert printed == {
        ("chat", TTFT_P50_METRIC, "Seconds"): [0.125],
        ("chat", TTFT_P99_METRIC, "Seconds"): [0.9],
    }


def test_every_gco_metric_the_dashboards_draw_is_one_the_sweep_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reading = TtftReading(values={TTFT_P50_METRIC: {"chat": 0.1}, TTFT_P99_METRIC: {"chat": 0.2}})
    found = metrics_of(emitted(capsys, SweepReport(replicas={"chat": (0, 1)}), reading))
    bodies = [
        regional_dashboard(
            region="us-east-1",
            api_name="api",
            stage="v1",
            access_log_group="/logs",
            cluster_name="gco-us-east-1",
        ),
        global_dashboard(
            api_names={"us-east-1": "a", "us-west-2": "b"},
            cluster_names={"us-east-1": "gco-us-east-1", "us-west-2": "gco-us-west-2"},
            stage="v1",
        ),
    ]
    references = [r for body in bodies for r in metric_references(body) if r[0] == METRICS_NAMESPACE]
    assert {name for _, name, _ in references} == {
        "ReplicasReady",
        "ReplicasDesired",
        "EndpointsNotReady",
        TTFT_P50_METRIC,
        TTFT_P99_METRIC,
    }
    for namespace, name, dims in references:
        assert name in found, f"the dashboards draw {namespace}/{name}, which the sweep does not print"
        printed = [d for ns, d in found[name] if ns == namespace]
        # A plain metric names every dimension with its value; a SEARCH names the dimension set.
        assert any(set(d) == set(dims) and all(v in ("*", d[k]) for k, v in dims.items()) for d in printed), (
            name,
            dims,
            printed,
        )
