"""The boto3 adapter of `AccountReader`: one client per (service, Region), errors converted here.

`client_factory` makes the clients (the default: boto3's default session, so `AWS_PROFILE`,
`AWS_ENDPOINT_URL` and the usual credential chain apply); tests pass clients of a moto server, or
clients whose answers were recorded from the AWS documentation's examples, through it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.exceptions import ClientError
from botocore.exceptions import NoCredentialsError as BotoNoCredentials

from gco.doctor.errors import AccountReadError, NoCredentialsError
from gco.doctor.port import HostedZone

ClientFactory = Callable[[str, str], Any]
BOOTSTRAP_PARAMETER = "/cdk-bootstrap/{qualifier}/version"
# Absent things the reads answer for instead of failing: an unset reservation, a missing role or
# parameter, a quota never changed from its default.
ABSENT = {
    "ParameterNotFound",
    "ResourceNotFoundException",
    "NoSuchEntity",
    "NoSuchResourceException",
    "NoSuchHostedZone",
}
# Route 53 is a global service whose API lives in us-east-1; GetAccountLimit's type for health checks.
ROUTE53_REGION = "us-east-1"
HEALTH_CHECK_LIMIT = "MAX_HEALTH_CHECKS_BY_OWNER"


def default_clients() -> ClientFactory:
    """Clients from boto3's default session (credentials, profile and endpoint from the environment)."""
    session = boto3.session.Session()
    cache: dict[tuple[str, str], Any] = {}

    def client(service: str, region: str) -> Any:
        if (service, region) not in cache:
            cache[(service, region)] = session.client(service, region_name=region)  # type: ignore[call-overload]
        return cache[(service, region)]

    return client


class _AbsentError(Exception):  # control flow inside this module only
    """The read found nothing (the service's not-found code)."""


@contextmanager
def converted(call: str) -> Iterator[None]:
    """boto3's errors as the doctor's: no credentials, not found (`_AbsentError`), or a failed read.

    Raises:
        NoCredentialsError: no AWS credentials are configured.
        AccountReadError: the call failed for another reason (its code and message are kept).
    """
    try:
        yield
    except BotoNoCredentials:
        raise NoCredentialsError("no AWS credentials found (environment, profile or instance role)") from None
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", "Unknown"))
        if code in ABSENT:
            raise _AbsentError(code) from None
        message = str(error.response.get("Error", {}).get("Message", ""))
        raise AccountReadError(call, code, message) from error


class BotoAccountReader:
    """`AccountReader` over boto3 clients.

    Raises:
        NoCredentialsError: from every read: no AWS credentials are configured.
        AccountReadError: from every read: the call failed for another reason.
    """

    def __init__(self, clients: ClientFactory | None = None) -> None:
        self._clients = clients or default_clients()

    def account_id(self) -> str:
        with converted("sts:GetCallerIdentity"):
            return str(self._clients("sts", "us-east-1").get_caller_identity()["Account"])

    def bootstrap_version(self, region: str, qualifier: str) -> int | None:
        name = BOOTSTRAP_PARAMETER.format(qualifier=qualifier)
        try:
            with converted("ssm:GetParameter"):
                answer = self._clients("ssm", region).get_parameter(Name=name)
        except _AbsentError:
            return None
        return int(answer["Parameter"]["Value"])

    def lambda_concurrency(self, region: str) -> tuple[int, int]:
        with converted("lambda:GetAccountSettings"):
            answer = self._clients("lambda", region).get_account_settings()
        limit = answer["AccountLimit"]
        return int(limit["ConcurrentExecutions"]), int(limit["UnreservedConcurrentExecutions"])

    def reserved_concurrency(self, region: str, function_name: str) -> int:
        try:
            with converted("lambda:GetFunctionConcurrency"):
                answer = self._clients("lambda", region).get_function_concurrency(FunctionName=function_name)
        except _AbsentError:
            return 0
        return int(answer.get("ReservedConcurrentExecutions", 0))

    def quota(self, region: str, service: str, code: str) -> float:
        client = self._clients("service-quotas", region)
        try:
            with converted("servicequotas:GetServiceQuota"):
                return float(client.get_service_quota(ServiceCode=service, QuotaCode=code)["Quota"]["Value"])
        except _AbsentError:
            with converted("servicequotas:GetAWSDefaultServiceQuota"):
                answer = client.get_aws_default_service_quota(ServiceCode=service, QuotaCode=code)
            return float(answer["Quota"]["Value"])

    def vcpus(self, region: str, instance_types: list[str]) -> dict[str, int]:
        with converted("ec2:DescribeInstanceTypes"):
            answer = self._clients("ec2", region).describe_instance_types(
                InstanceTypes=sorted(set(instance_types))
            )
        return {t["InstanceType"]: int(t["VCpuInfo"]["DefaultVCpus"]) for t in answer["InstanceTypes"]}

    def cluster_version_status(self, region: str, version: str) -> str | None:
        with converted("eks:DescribeClusterVersions"):
            answer = self._clients("eks", region).describe_cluster_versions(clusterVersions=[version])
        for item in answer.get("clusterVersions", []):
            if item.get("clusterVersion") == version:
                # `versionStatus` replaced `status` in the API; older answers carry only `status`.
                return str(item.get("versionStatus") or item.get("status"))
        return None

    def availability_zones(self, region: str) -> list[str]:
        with converted("ec2:DescribeAvailabilityZones"):
            answer = self._clients("ec2", region).describe_availability_zones(
                Filters=[
                    {"Name": "zone-type", "Values": ["availability-zone"]},
                    {"Name": "state", "Values": ["available"]},
                ]
            )
        return [str(zone["ZoneName"]) for zone in answer["AvailabilityZones"]]

    def default_subnet_zones(self, region: str) -> set[str]:
        found: set[str] = set()
        with converted("ec2:DescribeSubnets"):
            pages = self._clients("ec2", region).get_paginator("describe_subnets")
            for page in pages.paginate(Filters=[{"Name": "default-for-az", "Values": ["true"]}]):
                found |= {str(subnet["AvailabilityZone"]) for subnet in page["Subnets"]}
        return found

    def instance_type_zones(self, region: str, instance_types: list[str]) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        with converted("ec2:DescribeInstanceTypeOfferings"):
            pages = self._clients("ec2", region).get_paginator("describe_instance_type_offerings")
            for page in pages.paginate(
                LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": sorted(set(instance_types))}],
            ):
                for offer in page["InstanceTypeOfferings"]:
                    found.setdefault(str(offer["InstanceType"]), set()).add(str(offer["Location"]))
        return found

    def api_gateway_logging_role(self, region: str) -> str | None:
        # IAM authorizes GetAccount as apigateway:GET on the account resource of the Region.
        with converted(f"apigateway:GET on arn:aws:apigateway:{region}::/account"):
            answer = self._clients("apigateway", region).get_account()
        return str(answer.get("cloudwatchRoleArn") or "") or None

    def role_exists(self, role_name: str) -> bool:
        try:
            with converted("iam:GetRole"):
                self._clients("iam", "us-east-1").get_role(RoleName=role_name)
        except _AbsentError:
            return False
        return True

    def hosted_zone(self, zone_id: str) -> HostedZone | None:
        try:
            with converted("route53:GetHostedZone"):
                answer = self._clients("route53", ROUTE53_REGION).get_hosted_zone(Id=zone_id)
        except _AbsentError:
            return None
        zone = answer["HostedZone"]
        private = bool(zone.get("Config", {}).get("PrivateZone", False))
        return HostedZone(name=str(zone["Name"]).removesuffix("."), private=private)

    def health_checks(self) -> tuple[int, list[str]]:
        client = self._clients("route53", ROUTE53_REGION)
        with converted("route53:GetAccountLimit"):
            limit = int(client.get_account_limit(Type=HEALTH_CHECK_LIMIT)["Limit"]["Value"])
        names: list[str] = []
        with converted("route53:ListHealthChecks"):
            marker: str | None = None
            while True:
                page = client.list_health_checks(**({"Marker": marker} if marker else {}))
                names += [
                    str(check["HealthCheckConfig"].get("FullyQualifiedDomainName", ""))
                    for check in page.get("HealthChecks", [])
                ]
                marker = page.get("NextMarker") if page.get("IsTruncated") else None
                if not marker:
                    return limit, names

    def custom_domains(self, region: str) -> list[str]:
        client = self._clients("apigateway", region)
        names: list[str] = []
        with converted("apigateway:GET"):  # GetDomainNames is authorized as apigateway:GET
            position: str | None = None
            while True:
                page = client.get_domain_names(limit=500, **({"position": position} if position else {}))
                names += [str(item["domainName"]) for item in page.get("items", [])]
                position = page.get("position")
                if not position:
                    return names
