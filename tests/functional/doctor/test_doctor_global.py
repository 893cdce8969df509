"""`gco doctor` with a global address: the hosted zone, Route 53's health-check quota and API
Gateway's custom-domain quota, each with its fix; the zone and health checks answered from the
Route 53 API Reference's recorded shapes, the custom domains by the moto server."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from gco.deployment.config import GcoConfig
from gco.doctor.boto_reader import HEALTH_CHECK_LIMIT
from gco.doctor.global_checks import CUSTOM_DOMAIN_QUOTA
from gco.doctor.model import Check
from gco.local.moto.motoserver import MotoServer
from tests.cdk.synth_cache import GLOBAL_ADDRESS
from tests.functional.doctor.recorded import Clients, quota_answer, recorded
from tests.functional.doctor.test_doctor_account import (
    REGION,
    by_name,
    config,
    doctor,
    queue_answers,
    seed_account,
)

ZONE_ID = GLOBAL_ADDRESS["hosted_zone_id"]
DOMAIN = GLOBAL_ADDRESS["domain_name"]


def global_config() -> GcoConfig:
    return config(global_address=GLOBAL_ADDRESS)


def queue_global(
    clients: Clients,
    *,
    zone: dict[str, Any] | None = None,
    zone_missing: bool = False,
    health_limit: int = 200,
    domain_quota: float = 120,
) -> None:
    """Route 53's and Service Quotas' answers to the global checks, in the order they are asked."""
    route53 = clients.stub("route53", "us-east-1")
    if zone_missing:
        route53.add_client_error("get_hosted_zone", "NoSuchHostedZone", expected_params={"Id": ZONE_ID})
    else:
        answer = recorded("route53_get_hosted_zone")
        answer["HostedZone"].update(Id=f"/hostedzone/{ZONE_ID}", **(zone or {}))
        route53.add_response("get_hosted_zone", answer, {"Id": ZONE_ID})
    limit = recorded("route53_get_account_limit")
    limit["Limit"]["Value"] = health_limit
    route53.add_response("get_account_limit", limit, {"Type": HEALTH_CHECK_LIMIT})
    route53.add_response("list_health_checks", recorded("route53_list_health_checks"), {})
    service, code = CUSTOM_DOMAIN_QUOTA
    answer = quota_answer(code, domain_quota)
    answer["Quota"]["ServiceCode"] = service
    clients.stub("service-quotas", REGION).add_response(
        "get_service_quota", answer, {"ServiceCode": service, "QuotaCode": code}
    )


def run(moto: MotoServer, **answers: Any) -> dict[str, Check]:
    seed_account(moto)
    clients, gco = Clients(moto.url), global_config()
    queue_answers(clients, gco)
    queue_global(clients, **answers)
    report = doctor(moto, clients, gco)
    clients.assert_all_answered()
    return by_name(report)


def test_a_ready_account_passes_the_global_checks(moto: MotoServer) -> None:
    checks = run(moto)
    assert checks["hosted-zone"].status == "ok" and "public zone example.com" in checks["hosted-zone"].detail
    # one other application's check, one per Region of this deployment
    assert (
        checks["health-check-quota"].detail == "limit 200; other health checks 1, this deployment 1: needs 2"
    )
    assert checks["custom-domain-quota"].status == "ok"
    assert checks["custom-domain-quota"].scope == REGION


@pytest.mark.parametrize(
    ("answers", "detail", "fix"),
    [
        (
            {"zone_missing": True},
            f"no hosted zone {ZONE_ID}",
            "aws route53 create-hosted-zone --name example.com",
        ),
        ({"zone": {"Config": {"PrivateZone": True}}}, "is a private zone", "name a public hosted zone"),
        ({"zone": {"Name": "example.org."}}, f"{ZONE_ID} is example.org, not example.com", "to example.org"),
    ],
)
def test_a_missing_private_or_misnamed_zone_fails_with_its_fix(
    moto: MotoServer, answers: dict[str, Any], detail: str, fix: str
) -> None:
    check = run(moto, **answers)["hosted-zone"]
    assert check.status == "fail" and detail in check.detail and fix in check.fix


def test_full_quotas_fail_with_the_increase_to_ask_for(moto: MotoServer) -> None:
    apigateway = boto3.client("apigateway", region_name=REGION, endpoint_url=moto.url)
    apigateway.create_domain_name(domainName="other.example.com")
    apigateway.create_domain_name(domainName=DOMAIN)  # this deployment's own: counted as ours
    checks = run(moto, health_limit=1, domain_quota=2)
    health = checks["health-check-quota"]
    assert health.status == "fail" and "needs 2" in health.detail and "at least 2" in health.fix
    domains = checks["custom-domain-quota"]
    assert domains.status == "fail"
    assert domains.detail == "quota 2; other custom domains 1, this deployment 2: needs 3"
    assert domains.fix == (
        "aws service-quotas request-service-quota-increase --service-code apigateway "
        f"--quota-code L-A93447B8 --desired-value 3 --region {REGION}"
    )


def test_a_refused_read_fails_its_check_naming_the_permission(moto: MotoServer) -> None:
    seed_account(moto)
    clients, gco = Clients(moto.url), global_config()
    queue_answers(clients, gco)
    route53 = clients.stub("route53", "us-east-1")
    route53.add_client_error(
        "get_hosted_zone", "AccessDenied", "not allowed", expected_params={"Id": ZONE_ID}
    )
    route53.add_client_error("get_account_limit", "AccessDenied", "not allowed")
    service, code = CUSTOM_DOMAIN_QUOTA
    answer = quota_answer(code, 120)
    answer["Quota"]["ServiceCode"] = service
    clients.stub("service-quotas", REGION).add_response(
        "get_service_quota", answer, {"ServiceCode": service, "QuotaCode": code}
    )
    checks = by_name(doctor(moto, clients, gco))
    assert checks["hosted-zone"].fix == "allow route53:GetHostedZone to the principal running gco doctor"
    assert (
        checks["health-check-quota"].fix
        == "allow route53:GetAccountLimit to the principal running gco doctor"
    )
    assert checks["custom-domain-quota"].status == "ok"


def test_no_global_address_no_global_checks(moto: MotoServer) -> None:
    seed_account(moto)
    clients, gco = Clients(moto.url), config()
    queue_answers(clients, gco)
    checks = by_name(doctor(moto, clients, gco))
    assert not {"hosted-zone", "health-check-quota", "custom-domain-quota"} & set(checks)
