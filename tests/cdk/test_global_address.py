"""The global address's resources: the keys table (global stack) and each Region's certificate,
custom domains, bearer-key API, authorizer, health check and latency record (docs/global.md)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from aws_cdk.assertions import Capture, Match

from gco.front_door import GENERATION_TIMEOUT_S
from gco.global_access.authorizer import (
    DECISION_MESSAGE,
    EFFECT_FIELD,
    FAILURE_MESSAGE,
    REFUSAL_METRIC,
    REFUSED,
    REGION_ORDER_ENV,
)
from gco.global_access.key_store import KEYS_TABLE_ENV
from stacks.constructs.authorizer_alarms import ERROR_RATE_MINUTES, ERROR_RATE_PERCENT
from tests.cdk.conftest import HOME, OTHER, Synthesized, iam_statements
from tests.cdk.synth_cache import GLOBAL_ADDRESS

DOMAIN = GLOBAL_ADDRESS["domain_name"]
ZONE = GLOBAL_ADDRESS["hosted_zone_id"]


def test_keys_table_is_a_global_table_replicated_encrypted_and_protected(global_template: Any) -> None:
    recovery = {"PointInTimeRecoveryEnabled": True}
    global_template.has_resource_properties(
        "AWS::DynamoDB::GlobalTable",
        {
            "TableName": "gco-api-keys",
            "KeySchema": [{"AttributeName": "key_id", "KeyType": "HASH"}],
            "BillingMode": "PAY_PER_REQUEST",
            "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS"},
            "Replicas": Match.array_with(
                [
                    Match.object_like(
                        {
                            "Region": OTHER,
                            "DeletionProtectionEnabled": True,
                            "PointInTimeRecoverySpecification": recovery,
                            "ResourcePolicy": Match.any_value(),  # read-only replica (data.replica_guard)
                        }
                    ),
                    Match.object_like({"Region": HOME, "DeletionProtectionEnabled": True}),
                ]
            ),
        },
    )
    retained = global_template.find_resources("AWS::DynamoDB::GlobalTable", {"DeletionPolicy": "Retain"})
    assert len(retained) == 2  # the endpoint table and the keys table


def test_certificate_covers_both_names_and_validates_in_the_zone(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::CertificateManager::Certificate",
        {
            "DomainName": DOMAIN,
            "SubjectAlternativeNames": [f"{OTHER}.{DOMAIN}"],
            "ValidationMethod": "DNS",
            "DomainValidationOptions": Match.array_with(
                [
                    {"DomainName": DOMAIN, "HostedZoneId": ZONE},
                    {"DomainName": f"{OTHER}.{DOMAIN}", "HostedZoneId": ZONE},
                ]
            ),
        },
    )


def test_two_regional_custom_domains_map_to_the_global_api(regional_template: Any) -> None:
    api = Capture()
    for name in (DOMAIN, f"{OTHER}.{DOMAIN}"):
        regional_template.has_resource_properties(
            "AWS::ApiGateway::DomainName",
            {
                "DomainName": name,
                "EndpointConfiguration": {"Types": ["REGIONAL"]},
                "RegionalCertificateArn": Match.any_value(),
                "SecurityPolicy": "TLS_1_2",
            },
        )
    regional_template.resource_count_is("AWS::ApiGateway::BasePathMapping", 2)
    regional_template.has_resource_properties("AWS::ApiGateway::BasePathMapping", {"RestApiId": {"Ref": api}})
    apis = regional_template.find_resources("AWS::ApiGateway::RestApi")
    assert apis[api.as_string()]["Properties"]["DisableExecuteApiEndpoint"] is True
    assert apis[api.as_string()]["Properties"]["Name"] == f"gco-global-{OTHER}"


def test_authorizer_checks_the_authorization_header_and_caches_nothing(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::ApiGateway::Authorizer",
        {
            "Type": "REQUEST",
            "IdentitySource": "method.request.header.Authorization",
            "AuthorizerResultTtlInSeconds": 0,
        },
    )


def test_inference_method_streams_to_the_proxy_with_the_serving_region(regional_template: Any) -> None:
    authorizer = Capture()
    regional_template.has_resource_properties(
        "AWS::ApiGateway::Method",
        {
            "HttpMethod": "ANY",
            "AuthorizationType": "CUSTOM",
            "AuthorizerId": {"Ref": authorizer},
            "Integration": Match.object_like(
                {
                    "Type": "HTTP_PROXY",
                    "ConnectionType": "VPC_LINK",
                    "ResponseTransferMode": "STREAM",
                    "TimeoutInMillis": GENERATION_TIMEOUT_S * 1000,
                    "RequestParameters": {
                        "integration.request.path.proxy": "method.request.path.proxy",
                        "integration.request.header.X-Gco-Serve-Region": "context.authorizer.serveRegion",
                    },
                }
            ),
        },
    )
    assert authorizer.as_string().startswith("GlobalFrontDoorAuthorizer")


def test_health_method_is_open_and_reaches_the_proxy(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::ApiGateway::Method",
        {
            "HttpMethod": "GET",
            "AuthorizationType": "NONE",
            "Integration": Match.object_like(
                {"Type": "HTTP_PROXY", "ConnectionType": "VPC_LINK", "Uri": Match.any_value()}
            ),
        },
    )
    health = [
        method
        for method in regional_template.find_resources("AWS::ApiGateway::Method").values()
        if method["Properties"]["AuthorizationType"] == "NONE"
    ]
    assert len(health) == 1
    uri = health[0]["Properties"]["Integration"]["Uri"]["Fn::Join"][1]
    assert uri[0] == "http://" and uri[-1] == "/healthz"  # the ALB's DNS name between them


def test_health_check_and_latency_record_of_the_region(regional_template: Any) -> None:
    check = Capture()
    regional_template.has_resource_properties(
        "AWS::Route53::HealthCheck",
        {
            "HealthCheckConfig": {
                "Type": "HTTPS",
                "FullyQualifiedDomainName": f"{OTHER}.{DOMAIN}",
                "Port": 443,
                "ResourcePath": "/healthz",
                "EnableSNI": True,
                "RequestInterval": 10,
                "FailureThreshold": 3,
            }
        },
    )
    regional_template.has_resource_properties(
        "AWS::Route53::RecordSet",
        {
            "Name": f"{DOMAIN}.",
            "Type": "A",
            "HostedZoneId": ZONE,
            "Region": OTHER,
            "SetIdentifier": OTHER,
            "HealthCheckId": {"Ref": check},
            "AliasTarget": Match.object_like({"DNSName": Match.any_value()}),
        },
    )
    regional_template.has_resource_properties(
        "AWS::Route53::RecordSet",
        {"Name": f"{OTHER}.{DOMAIN}.", "Type": "A", "HostedZoneId": ZONE, "SetIdentifier": Match.absent()},
    )
    assert check.as_string().startswith("GlobalFrontDoorHealthCheck")


def test_each_region_owns_only_its_own_records(synthesized: Any) -> None:
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        latency = [
            r["Properties"]
            for r in template["Resources"].values()
            if r["Type"] == "AWS::Route53::RecordSet" and "SetIdentifier" in r["Properties"]
        ]
        assert [(r["Region"], r["SetIdentifier"]) for r in latency] == [(region, region)]
    assert "AWS::Route53::RecordSet" not in str(synthesized.template_json("gco-global"))


def test_authorizer_function_environment_and_least_privilege(regional_template: Any) -> None:
    role = Capture()
    regional_template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "FunctionName": f"gco-global-{OTHER}-authorizer",
            "Handler": "authorizer.handler",
            "Role": {"Fn::GetAtt": [role, "Arn"]},
            "VpcConfig": Match.any_value(),
            "TracingConfig": {"Mode": "Active"},
            "Environment": {
                "Variables": Match.object_like(
                    {
                        KEYS_TABLE_ENV: "gco-api-keys",
                        "INFERENCE_ENDPOINTS_TABLE_NAME": "gco-inference-endpoints",
                        REGION_ORDER_ENV: f"{HOME},{OTHER}",  # `regions` in order, by default
                    }
                )
            },
        },
    )
    template = regional_template.to_json()
    policies = [
        logical
        for logical, resource in template["Resources"].items()
        if resource["Type"] == "AWS::IAM::ManagedPolicy"
        and {"Ref": role.as_string()} in resource["Properties"].get("Roles", [])
    ]
    assert len(policies) == 1
    statements = {s["Sid"]: s for owner, s in iam_statements(template) if owner == policies[0]}
    assert all("*" not in str(s["Action"]) for s in statements.values())
    read = statements["ReadOwnReplicas"]
    assert read["Action"] == "dynamodb:GetItem"
    tables = [str(arn) for arn in read["Resource"]]
    assert len(tables) == 2 and all(f":{OTHER}:" in arn or "AWS::Region" in arn for arn in tables)
    assert any("gco-api-keys" in arn for arn in tables) and any(
        "gco-inference-endpoints" in arn for arn in tables
    )
    decrypt = statements["TableKeyViaDynamoDB"]
    assert decrypt["Action"] == "kms:Decrypt"
    assert decrypt["Condition"] == {"StringEquals": {"kms:ViaService": f"dynamodb.{OTHER}.amazonaws.com"}}
    assert "Fn::ImportValue" in str(decrypt["Resource"])  # the keys stack's key of this Region, by reference


def test_alarm_on_decisions_the_authorizer_could_not_make(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::Logs::MetricFilter",
        {
            "FilterPattern": f'{{ $.message = "{FAILURE_MESSAGE}" }}',
            "MetricTransformations": [
                Match.object_like({"MetricName": "AuthorizerFailures", "MetricValue": "1"})
            ],
        },
    )
    regional_template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        {
            "AlarmName": f"gco-global-{OTHER}-authorizer-Failures",
            "MetricName": "AuthorizerFailures",
            "Threshold": 0,
            "AlarmActions": Match.any_value(),
        },
    )


def errors_alarm(template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The authorizer function's logical id, and its errors alarm's properties."""
    ((function_id,),) = [
        [k]
        for k, r in template["Resources"].items()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("FunctionName") == f"gco-global-{OTHER}-authorizer"
    ]
    (alarm,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::CloudWatch::Alarm"
        and r["Properties"]["AlarmName"] == f"gco-global-{OTHER}-authorizer-Errors"
    ]
    return function_id, alarm


def test_alarm_on_the_authorizer_s_lambda_errors_less_its_401s(synthesized: Synthesized) -> None:
    """An import error, a timeout or memory exhausted never writes the failure line: the function's own
    Errors (and Throttles) count them, less the 401s its decision lines count."""
    template = synthesized.template_json(f"gco-regional-{OTHER}")
    function_id, alarm = errors_alarm(template)
    stats = {m["Id"]: m["MetricStat"] for m in alarm["Metrics"] if "MetricStat" in m}
    for ident, name in (("errors", "Errors"), ("throttles", "Throttles"), ("invocations", "Invocations")):
        assert stats[ident] == {
            "Metric": {
                "Namespace": "AWS/Lambda",
                "MetricName": name,
                "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": function_id}}],
            },
            "Period": 60,
            "Stat": "Sum",
        }
    assert stats["refusals"]["Metric"] == {"Namespace": "gco/global", "MetricName": REFUSAL_METRIC}
    (refusals,) = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Logs::MetricFilter"
        and r["Properties"]["MetricTransformations"][0]["MetricName"] == REFUSAL_METRIC
    ]
    assert refusals["FilterPattern"] == (
        f'{{ ($.message = "{DECISION_MESSAGE}") && ($.{EFFECT_FIELD} = "{REFUSED}") }}'
    )
    assert (
        refusals["LogGroupName"]
        == template["Resources"][function_id]["Properties"]["LoggingConfig"]["LogGroup"]
    )
    assert (alarm["Threshold"], alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (
        ERROR_RATE_PERCENT,
        ERROR_RATE_MINUTES,
        ERROR_RATE_MINUTES,
    )
    assert alarm["TreatMissingData"] == "notBreaching" and alarm["AlarmActions"] and alarm["OKActions"]


def error_rate(alarm: dict[str, Any], **minute: float | None) -> float:
    """The alarm's returned expression over one minute's sums (None: no data point), evaluated by
    Python with metric math's IF and FILL: the expression as synthesized, not a copy of it."""
    expressions = {m["Id"]: m for m in alarm["Metrics"] if "Expression" in m}
    (returned,) = [m["Expression"] for m in expressions.values() if m["ReturnData"]]
    scope: dict[str, Any] = {
        "IF": lambda condition, then, otherwise: then if condition else otherwise,
        "FILL": lambda value, default: np.float64(default if value is None else value),
        **{k: None if v is None else np.float64(v) for k, v in minute.items()},
    }
    with np.errstate(divide="ignore", invalid="ignore"):
        for ident, item in expressions.items():
            if not item["ReturnData"]:
                scope[ident] = eval(item["Expression"], scope)  # noqa: S307 - the template's own math
        return float(eval(returned, scope))  # noqa: S307


@pytest.mark.parametrize(
    ("case", "minutes", "pages"),
    [
        # Runtime.ImportModuleError: every call fails, no line is written.
        ("import error", [{"invocations": 12, "errors": 12}] * 2, True),
        ("throttled", [{"invocations": None, "throttles": 7}] * 2, True),
        # A flood of bad keys: every call a 401, one of them logged in the next minute.
        (
            "bad keys",
            [
                {"invocations": 3000, "errors": 3000, "refusals": 2999},
                {"invocations": 3000, "errors": 3000, "refusals": 3001},
            ],
            False,
        ),
        # One 401 invoked at 59.99 s, its line written in the next minute.
        ("one 401 across a minute", [{"invocations": 1, "errors": 1}, {"refusals": 1}], False),
        ("no traffic", [{}, {}], False),
        ("served", [{"invocations": 40}, {"invocations": 40, "errors": 2, "refusals": 2}], False),
    ],
)
def test_the_errors_alarm_pages_on_unexplained_failures_only(
    synthesized: Synthesized, case: str, minutes: list[dict[str, float | None]], pages: bool
) -> None:
    _, alarm = errors_alarm(synthesized.template_json(f"gco-regional-{OTHER}"))
    metrics = ("invocations", "errors", "throttles", "refusals")
    rates = [error_rate(alarm, **{m: minute.get(m) for m in metrics}) for minute in minutes]
    breaching = [rate > alarm["Threshold"] for rate in rates]
    assert (len(breaching) >= alarm["DatapointsToAlarm"] and all(breaching)) is pages, (case, rates)


def test_global_url_output(regional_template: Any) -> None:
    regional_template.has_output("GlobalUrl", {"Value": f"https://{DOMAIN}/inference"})


def test_refusals_answer_in_the_openai_error_shape_with_the_reason(regional_template: Any) -> None:
    regional_template.has_resource_properties(
        "AWS::ApiGateway::GatewayResponse",
        {
            "ResponseType": "ACCESS_DENIED",
            "StatusCode": "403",
            "ResponseTemplates": {
                "application/json": Match.string_like_regexp(r"\$context\.authorizer\.reason")
            },
        },
    )
    regional_template.has_resource_properties(
        "AWS::ApiGateway::GatewayResponse",
        {
            "ResponseType": "UNAUTHORIZED",
            "StatusCode": "401",
            "ResponseTemplates": {"application/json": Match.string_like_regexp("invalid_api_key")},
        },
    )


def test_without_a_global_address_there_are_no_global_resources(tmp_path: Any) -> None:
    """cdk.json's default: no zone, certificate, second API, authorizer, keys table or forwarding."""
    from aws_cdk import App

    from gco.reconcile.proxy.proxy_settings import PROXY_SETTINGS_ENV, ProxySettings
    from stacks.app import build_app
    from stacks.config import parse_config
    from tests.cdk.synth_cache import cdk_json_config

    raw = {**cdk_json_config(), "regions": [HOME], "table_replicas": False, "global_address": None}
    gco = build_app(parse_config(raw), app=App(outdir=str(tmp_path)), nag=False)
    assert gco.regional[HOME].global_front_door is None and gco.global_stack.keys_table is None
    assembly = gco.app.synth()
    kinds = {
        resource["Type"]
        for stack in assembly.stacks
        for resource in stack.template.get("Resources", {}).values()
    }
    for absent in (
        "AWS::Route53::RecordSet",
        "AWS::Route53::HealthCheck",
        "AWS::CertificateManager::Certificate",
        "AWS::ApiGateway::DomainName",
        "AWS::ApiGateway::Authorizer",
    ):
        assert absent not in kinds
    regional = assembly.get_stack_by_name(f"gco-regional-{HOME}").template
    # Nothing watches a global API that is not there: no alarm, no widget.
    watched = [
        json.dumps(resource["Properties"])
        for stack in assembly.stacks
        for resource in stack.template.get("Resources", {}).values()
        if resource["Type"] in ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::Dashboard")
    ]
    assert watched and not [text for text in watched if "gco-global-" in text], watched
    settings = [
        ProxySettings.model_validate_json(
            resource["Properties"]["Environment"]["Variables"][PROXY_SETTINGS_ENV]
        )
        for resource in regional["Resources"].values()
        if resource["Type"] == "AWS::Lambda::Function"
        and PROXY_SETTINGS_ENV in resource["Properties"].get("Environment", {}).get("Variables", {})
    ]
    assert settings and all(item.forwarding is None for item in settings)
