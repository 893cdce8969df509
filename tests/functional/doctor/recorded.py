"""Clients for the doctor's account checks: a moto server's where moto models the calls (SSM, IAM,
EC2's instance types, zones, default subnets and instance type offerings, API Gateway's account
settings, STS, which answers for moto's account 123456789012), and botocore `Stubber`s
answering with responses recorded from the AWS documentation's examples where it does not (moto's
Service Quotas knows only VPC quotas; it has no Lambda GetAccountSettings, no EKS
DescribeClusterVersions and no Route 53 GetAccountLimit, so Route 53 is answered from recordings
too: one client cannot be half moto's). API Gateway's custom domains are moto's. Each recorded
answer is a file in tests/events/doctor/ naming its source; a test that changes a value (a lower
quota, another version) says so where it does.

Not modelled: the answers' dependence on the caller (every read is allowed unless a test queues an
error), pagination, and throttling.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import boto3
from botocore.stub import Stubber

from gco.doctor.boto_reader import ClientFactory

EVENTS = Path(__file__).resolve().parents[2] / "events" / "doctor"
MOTO_SERVICES = ("ssm", "iam", "ec2", "sts", "apigateway")


def recorded(name: str) -> dict[str, Any]:
    """The answer recorded in tests/events/doctor/<name>.json (a fresh copy)."""
    answer: dict[str, Any] = json.loads((EVENTS / f"{name}.json").read_text())["answer"]
    return copy.deepcopy(answer)


def quota_answer(code: str, value: float) -> dict[str, Any]:
    """The recorded GetAWSDefaultServiceQuota answer with another quota code and value."""
    answer = recorded("service_quotas_default")
    answer["Quota"].update(QuotaCode=code, Value=value)
    return answer


def eks_answer(version: str, status: str) -> dict[str, Any]:
    """The recorded DescribeClusterVersions answer, for `version` with `status`."""
    answer = recorded("eks_cluster_versions")
    answer["clusterVersions"][0].update(clusterVersion=version, status=status)
    return answer


class Clients:
    """A `ClientFactory`: moto clients for MOTO_SERVICES, a stubbed client for every other."""

    def __init__(self, moto_url: str) -> None:
        self.moto_url = moto_url
        self.stubs: dict[tuple[str, str], tuple[Any, Stubber]] = {}

    def stub(self, service: str, region: str) -> Stubber:
        """The Stubber of (service, Region), created and activated on first use."""
        if (service, region) not in self.stubs:
            client = boto3.client(  # type: ignore[call-overload]
                service, region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing"
            )
            stubber = Stubber(client)
            stubber.activate()
            self.stubs[(service, region)] = (client, stubber)
        return self.stubs[(service, region)][1]

    def __call__(self, service: str, region: str) -> Any:
        if service in MOTO_SERVICES:
            return boto3.client(service, region_name=region, endpoint_url=self.moto_url)  # type: ignore[call-overload]
        self.stub(service, region)
        return self.stubs[(service, region)][0]

    def assert_all_answered(self) -> None:
        for _, stubber in self.stubs.values():
            stubber.assert_no_pending_responses()


def factory(clients: Clients) -> ClientFactory:
    return clients
