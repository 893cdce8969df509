"""The dashboards and their alarms as synthesized: every API Gateway metric names a Region's REST API
and stage as the template creates them (the front door's and, with the global address, the global
API's), every Logs Insights widget reads the front door's access log and only the fields its format
writes, and the alarms watch both APIs' 5xx and the endpoints not ready."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from gco.deployment.dashboards import API_METRICS, API_NAMESPACE, metric_references
from gco.front_door import FRONT_DOOR_PART, GLOBAL_API_PART
from gco.reconcile.replica_metrics import NOT_READY_METRIC
from stacks.constructs.dashboards import FIVE_XX_THRESHOLD, NOT_READY_PERIODS
from stacks.constructs.front_door import ACCESS_LOG_FORMAT, INFERENCE_PREFIX
from tests.cdk.synth_cache import HOME, OTHER, Synthesized


def of_type(template: Mapping[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def body_of(dashboard: dict[str, Any], tokens: dict[str, str]) -> dict[str, Any]:
    """A DashboardBody with each CloudFormation token replaced by the text `tokens` maps it to."""
    body = dashboard["Properties"]["DashboardBody"]
    if isinstance(body, str):
        return dict(json.loads(body))
    separator, parts = body["Fn::Join"]
    text = str(separator).join(
        p if isinstance(p, str) else tokens[json.dumps(p, sort_keys=True)] for p in parts
    )
    return dict(json.loads(text))


def api_and_stage(template: Mapping[str, Any], part: str = FRONT_DOOR_PART) -> tuple[str, str]:
    """The name and stage of the Region's REST API named `-<part>-`: the front door's, or with
    `GLOBAL_API_PART` the global address's, the other one there."""
    ((api_id, api),) = [
        (k, r)
        for k, r in of_type(template, "AWS::ApiGateway::RestApi").items()
        if f"-{part}-" in r["Properties"]["Name"]
    ]
    (stage,) = [
        s
        for s in of_type(template, "AWS::ApiGateway::Stage").values()
        if s["Properties"]["RestApiId"] == {"Ref": api_id}
    ]
    return api["Properties"]["Name"], stage["Properties"]["StageName"]


def test_each_region_s_dashboard_names_its_api_stage_and_access_log(synthesized: Synthesized) -> None:
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        _, stage = api_and_stage(template)
        apis = {api_and_stage(template), api_and_stage(template, GLOBAL_API_PART)}
        (logs_id,) = [
            k for k in of_type(template, "AWS::Logs::LogGroup") if k.startswith("FrontDoorAccessLogs")
        ]
        (dashboard,) = of_type(template, "AWS::CloudWatch::Dashboard").values()
        assert dashboard["Properties"]["DashboardName"] == f"gco-{region}"
        body = body_of(dashboard, {json.dumps({"Ref": logs_id}): "ACCESS-LOG"})
        api_refs = [r for r in metric_references(body) if r[0] == API_NAMESPACE]
        # Both ways in, each with every API metric: requests, 4xx, 5xx and latency.
        drawn = {(dims["ApiName"], dims["Stage"]) for _, _, dims in api_refs}
        assert drawn == apis and all(set(dims) == {"ApiName", "Stage"} for _, _, dims in api_refs)
        for name, api_stage in apis:
            assert {m for _, m, d in api_refs if d == {"ApiName": name, "Stage": api_stage}} == set(
                API_METRICS
            )
        assert all(w["properties"]["region"] == region for w in body["widgets"] if w["type"] != "text")
        queries = [w["properties"]["query"] for w in body["widgets"] if w["type"] == "log"]
        assert len(queries) == 2
        written = set(json.loads(re.sub(r'"\$context[^"]*"', '""', ACCESS_LOG_FORMAT)))
        for query in queries:
            assert query.startswith("SOURCE 'ACCESS-LOG' | ")
            # The path as API Gateway logs it for a REST API: /<stage>/inference/<name>/...
            assert f"parse path '/{stage}{INFERENCE_PREFIX}/*/*' as endpoint" in query
            fields = re.search(r"^SOURCE '[^']*' \| fields ([^|]*)\|", query)
            assert fields and {f.strip() for f in fields.group(1).split(",")} <= written, query


def test_the_global_dashboard_draws_every_region_s_api(synthesized: Synthesized) -> None:
    template = synthesized.template_json("gco-global")
    (dashboard,) = of_type(template, "AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"] == "gco-regions"
    body = body_of(dashboard, {})
    expected = {
        api_and_stage(synthesized.template_json(f"gco-regional-{r}"), part)
        for r in (HOME, OTHER)
        for part in (FRONT_DOOR_PART, GLOBAL_API_PART)
    }
    drawn = {(d["ApiName"], d["Stage"]) for ns, _, d in metric_references(body) if ns == API_NAMESPACE}
    assert drawn == expected
    five_xx = {
        (d["ApiName"], w["properties"]["region"])
        for w in body["widgets"]
        for ns, metric, d in metric_references({"widgets": [w]})
        if ns == API_NAMESPACE and metric == "5XXError"
    }
    assert {(f"gco-{GLOBAL_API_PART}-{r}", r) for r in (HOME, OTHER)} <= five_xx  # each in its Region
    regions = {w["properties"]["region"] for w in body["widgets"] if w["type"] == "metric"}
    assert regions == {HOME, OTHER}


def test_the_alarms_watch_the_front_door_s_5xx_and_endpoints_not_ready(synthesized: Synthesized) -> None:
    template = synthesized.template_json(f"gco-regional-{OTHER}")
    api, stage = api_and_stage(template)
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in of_type(template, "AWS::CloudWatch::Alarm").values()
    }
    five_xx = alarms[f"gco-{OTHER}-FrontDoor5xx"]
    assert (five_xx["Namespace"], five_xx["MetricName"], five_xx["Threshold"]) == (
        API_NAMESPACE,
        "5XXError",
        FIVE_XX_THRESHOLD,
    )
    assert {d["Name"]: d["Value"] for d in five_xx["Dimensions"]} == {"ApiName": api, "Stage": stage}
    not_ready = alarms[f"gco-{OTHER}-EndpointsNotReady"]
    assert (not_ready["MetricName"], not_ready["Threshold"]) == (NOT_READY_METRIC, 0)
    assert not_ready["EvaluationPeriods"] == NOT_READY_PERIODS
    for alarm in (five_xx, not_ready):
        assert alarm["TreatMissingData"] == "notBreaching"
        assert alarm["AlarmActions"] and alarm["OKActions"]


def test_the_global_api_has_a_5xx_alarm_like_the_front_door_s(synthesized: Synthesized) -> None:
    """The global API carries every keyed request and answers 500 when its authorizer fails: its 5xx
    page the same people as the front door's, on its own ApiName and stage."""
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        api, stage = api_and_stage(template, GLOBAL_API_PART)
        alarms = {
            a["Properties"]["AlarmName"]: a["Properties"]
            for a in of_type(template, "AWS::CloudWatch::Alarm").values()
        }
        alarm = alarms[f"gco-{region}-GlobalApi5xx"]
        front_door = alarms[f"gco-{region}-FrontDoor5xx"]
        assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"], alarm["Period"]) == (
            API_NAMESPACE,
            "5XXError",
            "Sum",
            300,
        )
        assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {"ApiName": api, "Stage": stage}
        assert (alarm["Threshold"], alarm["EvaluationPeriods"]) == (FIVE_XX_THRESHOLD, 1)
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"
        assert alarm["AlarmActions"] == front_door["AlarmActions"] and alarm["AlarmActions"]
        assert alarm["OKActions"] == front_door["OKActions"]
