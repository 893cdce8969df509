"""`gco doctor`'s zone and API Gateway checks (gco/doctor/zones.py) through the boto3 adapter: moto answers
DescribeAvailabilityZones, DescribeSubnets (its default VPC has a default subnet in every zone),
DescribeInstanceTypeOfferings and API Gateway's GetAccount/UpdateAccount; the request shape of the
offerings read, its pagination included, is checked on a botocore Stubber."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gco.deployment.config import GcoConfig
from gco.doctor.boto_reader import BotoAccountReader
from gco.doctor.zones import api_logging_check, getazs, gpu_zones_check, vpc_zones
from gco.front_door import logging_role_name
from gco.local.moto.motoserver import MotoServer
from tests.functional.doctor.test_doctor_account import REGION, config

MOTO_ZONES = [f"{REGION}{z}" for z in "abcdef"]  # moto's us-east-1; its g6e offerings are in a-d


def moto_reader(moto: MotoServer) -> BotoAccountReader:
    def clients(service: str, region: str) -> Any:
        return boto3.client(service, region_name=region, endpoint_url=moto.url)  # type: ignore[call-overload]

    return BotoAccountReader(clients)


def drop_default_subnets(moto: MotoServer, zones: list[str]) -> None:
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto.url)
    subnets = ec2.describe_subnets(Filters=[{"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    for subnet in subnets:
        if subnet["AvailabilityZone"] in zones:
            ec2.delete_subnet(SubnetId=subnet["SubnetId"])


def test_getazs_prefers_zones_with_a_default_subnet_in_alphabetical_order() -> None:
    zones = ["us-east-1c", "us-east-1a", "us-east-1b"]
    assert getazs(zones, {"us-east-1c", "us-east-1b"}) == ["us-east-1b", "us-east-1c"]
    assert getazs(zones, set()) == ["us-east-1a", "us-east-1b", "us-east-1c"]


def test_the_default_types_are_offered_in_the_vpc_s_zones(moto: MotoServer) -> None:
    reader = moto_reader(moto)
    assert vpc_zones(reader, REGION) == ["us-east-1a", "us-east-1b"]
    check = gpu_zones_check(reader, config(), REGION)
    assert check.status == "ok", check
    assert check.detail.startswith("the VPC's zones us-east-1a, us-east-1b: g6e.xlarge in us-east-1a")


def test_types_offered_in_neither_zone_fail_naming_the_zones_that_offer_them(moto: MotoServer) -> None:
    drop_default_subnets(moto, MOTO_ZONES[:4])  # Fn::GetAZs now answers e, f
    check = gpu_zones_check(moto_reader(moto), config(), REGION)
    assert check.status == "fail"
    assert check.detail.startswith("g6e.xlarge, g6e.2xlarge offered in none; the VPC's zones us-east-1e")
    assert "offering every type: us-east-1a, us-east-1b, us-east-1c, us-east-1d" in check.fix


def test_zones_the_config_names_are_the_vpc_s(moto: MotoServer) -> None:
    drop_default_subnets(moto, MOTO_ZONES[:4])  # Fn::GetAZs would answer e, f; the config overrides it
    named = config(network={"availability_zones": {REGION: ["us-east-1c", "us-east-1d"]}})
    check = gpu_zones_check(moto_reader(moto), named, REGION)
    assert check.status == "ok", check
    assert check.detail.startswith("the VPC's zones us-east-1c, us-east-1d:")


def test_the_fix_names_two_zones_ready_for_cdk_json(moto: MotoServer) -> None:
    drop_default_subnets(moto, MOTO_ZONES[:4])
    check = gpu_zones_check(moto_reader(moto), config(), REGION)
    assert '"network": {"availability_zones": {"us-east-1": ["us-east-1a", "us-east-1b"]}}' in check.fix


def test_a_type_offered_in_one_zone_warns(moto: MotoServer) -> None:
    drop_default_subnets(moto, ["us-east-1a", "us-east-1b", "us-east-1d", "us-east-1f"])  # c and e left
    check = gpu_zones_check(moto_reader(moto), config(), REGION)
    assert check.status == "warn"
    assert "g6e.xlarge in us-east-1c" in check.detail


def test_no_default_subnet_anywhere_means_every_zone(moto: MotoServer) -> None:
    drop_default_subnets(moto, MOTO_ZONES)
    assert vpc_zones(moto_reader(moto), REGION) == ["us-east-1a", "us-east-1b"]


def test_the_offerings_read_asks_per_zone_for_the_types_and_follows_pages() -> None:
    client = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    asked = {
        "LocationType": "availability-zone",
        "Filters": [{"Name": "instance-type", "Values": ["g6.xlarge", "g6e.xlarge"]}],
    }

    def offer(kind: str, zone: str) -> dict[str, Any]:
        return {"InstanceType": kind, "LocationType": "availability-zone", "Location": zone}

    stub.add_response(
        "describe_instance_type_offerings",
        {"InstanceTypeOfferings": [offer("g6e.xlarge", "us-east-1a")], "NextToken": "page-2"},
        asked,
    )
    stub.add_response(
        "describe_instance_type_offerings",
        {"InstanceTypeOfferings": [offer("g6e.xlarge", "us-east-1b"), offer("g6.xlarge", "us-east-1b")]},
        {**asked, "NextToken": "page-2"},
    )
    with stub:
        found = BotoAccountReader(lambda service, region: client).instance_type_zones(
            REGION, ["g6e.xlarge", "g6.xlarge", "g6e.xlarge"]
        )
    stub.assert_no_pending_responses()
    assert found == {"g6e.xlarge": {"us-east-1a", "us-east-1b"}, "g6.xlarge": {"us-east-1b"}}


def set_logging_role(moto: MotoServer, name: str, *, create: bool = True) -> str:
    arn = f"arn:aws:iam::123456789012:role/{name}"
    if create:
        iam = boto3.client("iam", region_name=REGION, endpoint_url=moto.url)
        arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    boto3.client("apigateway", region_name=REGION, endpoint_url=moto.url).update_account(
        patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": arn}]
    )
    return arn


def existing() -> GcoConfig:
    return config(api_gateway_account="existing")


@pytest.mark.parametrize(
    ("role", "settings", "status", "says"),
    [
        (None, config, "ok", "unset: the Regional stack sets its own"),
        (f"{logging_role_name('gco', REGION)}-1a2b3c4d", config, "ok", "this deployment's"),
        ("team-apigw-logs", config, "warn", "the Regional stack will replace it"),
        (None, existing, "fail", "unset: the front door's stage cannot log"),
        ("team-apigw-logs", existing, "ok", "(api_gateway_account: existing)"),
    ],
)
def test_the_logging_role_check(
    moto: MotoServer, role: str | None, settings: Any, status: str, says: str
) -> None:
    if role:
        set_logging_role(moto, role)
    check = api_logging_check(moto_reader(moto), settings(), REGION)
    assert (check.status, says in check.detail) == (status, True), check
    if status != "ok":
        assert check.fix


def test_an_existing_setting_naming_a_deleted_role_fails(moto: MotoServer) -> None:
    arn = set_logging_role(moto, "gone", create=False)
    check = api_logging_check(moto_reader(moto), existing(), REGION)
    assert check.status == "fail" and check.detail == f"names {arn}, which does not exist"
    assert "aws apigateway update-account --region us-east-1" in check.fix
