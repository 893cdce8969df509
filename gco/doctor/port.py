"""The reads the doctor makes of an AWS account: a small port, the boto3 adapter behind it
(`boto_reader.py`), so the checks are plain functions of what the account answers."""

from __future__ import annotations

from typing import NamedTuple, Protocol


class HostedZone(NamedTuple):
    """A Route 53 hosted zone as the doctor needs it: its name (no trailing dot) and whether private."""

    name: str
    private: bool


class AccountReader(Protocol):
    """Read-only questions to one account. Each raises `AccountReadError` or `NoCredentialsError`."""

    def account_id(self) -> str:
        """The account the credentials belong to (STS GetCallerIdentity)."""
        ...

    def bootstrap_version(self, region: str, qualifier: str) -> int | None:
        """The CDK bootstrap stack's version in `region` (its SSM parameter), None when absent."""
        ...

    def lambda_concurrency(self, region: str) -> tuple[int, int]:
        """(the account's concurrency limit, what is unreserved) in `region`."""
        ...

    def reserved_concurrency(self, region: str, function_name: str) -> int:
        """A function's reserved concurrency; 0 when the function or its reservation is absent."""
        ...

    def quota(self, region: str, service: str, code: str) -> float:
        """A Service Quotas value (applied, else the default)."""
        ...

    def vcpus(self, region: str, instance_types: list[str]) -> dict[str, int]:
        """Default vCPUs of each instance type."""
        ...

    def cluster_version_status(self, region: str, version: str) -> str | None:
        """EKS's support status of a Kubernetes version (`STANDARD_SUPPORT`, ...), None if unlisted."""
        ...

    def availability_zones(self, region: str) -> list[str]:
        """The names of the Region's available Availability Zones (not Local or Wavelength Zones)."""
        ...

    def default_subnet_zones(self, region: str) -> set[str]:
        """The zones that hold a default subnet (what CloudFormation's Fn::GetAZs looks at)."""
        ...

    def instance_type_zones(self, region: str, instance_types: list[str]) -> dict[str, set[str]]:
        """For each instance type, the zones of the Region that offer it (absent: offered nowhere)."""
        ...

    def api_gateway_logging_role(self, region: str) -> str | None:
        """The CloudWatch Logs role ARN API Gateway's account settings name in `region`, None if unset."""
        ...

    def role_exists(self, role_name: str) -> bool:
        """Whether the IAM role exists (IAM is global)."""
        ...

    def hosted_zone(self, zone_id: str) -> HostedZone | None:
        """The hosted zone (Route 53 GetHostedZone), None when no zone has this id."""
        ...

    def health_checks(self) -> tuple[int, list[str]]:
        """(the account's health-check limit, the domain name each existing health check requests)."""
        ...

    def custom_domains(self, region: str) -> list[str]:
        """The names of the API Gateway custom domains in `region`."""
        ...
