"""Checks of the AWS account, one Region at a time: CDK bootstrap, Lambda concurrency, vCPU quotas,
EKS's support of the configured Kubernetes version; and, account-wide, the service-linked roles.

Each check compares what the account answers (through `AccountReader`) with what the stacks will
ask for, computed from the same config and constants the stacks use (`gco.deployment`).
"""

from __future__ import annotations

from collections.abc import Callable

from gco.deployment.capacity import (
    LAMBDA_CONCURRENCY_QUOTA,
    LAMBDA_UNRESERVED_MINIMUM,
    VCPU_QUOTAS,
    node_group_demands,
    reserved_functions,
    vcpu_demand,
)
from gco.deployment.config import GcoConfig
from gco.doctor.errors import AccountReadError
from gco.doctor.model import ACCOUNT, Check, fail, ok, warn
from gco.doctor.port import AccountReader
from gco.doctor.zones import api_logging_check, gpu_zones_check

# The templates' `CheckBootstrapVersion` rule refuses bootstrap versions below this (CDK's
# DefaultStackSynthesizer; tests/cdk compares it with the synthesized rule).
MIN_BOOTSTRAP_VERSION = 6
BOOTSTRAP_QUALIFIER = "hnb659fds"  # CDK's default qualifier
# The service-linked roles EKS creates on first use (only when the deploying principal may call
# iam:CreateServiceLinkedRole), and the one Spot capacity needs.
EKS_ROLES = {
    "AWSServiceRoleForAmazonEKS": "eks.amazonaws.com",
    "AWSServiceRoleForAmazonEKSNodegroup": "eks-nodegroup.amazonaws.com",
    "AWSServiceRoleForAutoScaling": "autoscaling.amazonaws.com",
}
SPOT_ROLE = ("AWSServiceRoleForEC2Spot", "spot.amazonaws.com")
# The front door's: Elastic Load Balancing's role, which the internal ALB needs, and API Gateway's,
# which it uses for the VPC link's network interfaces; both created on first use, as the above.
FRONT_DOOR_ROLES = {
    "AWSServiceRoleForElasticLoadBalancing": "elasticloadbalancing.amazonaws.com",
    "AWSServiceRoleForAPIGateway": "ops.apigateway.amazonaws.com",
}


def read_failed(name: str, scope: str, error: AccountReadError) -> Check:
    """A failed check naming the read that was refused and the permission to grant."""
    return fail(
        name, scope, f"cannot read: {error}", f"allow {error.call} to the principal running gco doctor"
    )


def guarded(name: str, scope: str, check: Callable[[], Check]) -> Check:
    """`check()`, or `read_failed` when one of its reads failed."""
    try:
        return check()
    except AccountReadError as error:
        return read_failed(name, scope, error)


def bootstrap_check(reader: AccountReader, region: str, account: str) -> Check:
    version = reader.bootstrap_version(region, BOOTSTRAP_QUALIFIER)
    fix = f"npx cdk bootstrap aws://{account}/{region}"
    if version is None:
        return fail("cdk-bootstrap", region, "not bootstrapped", fix)
    if version < MIN_BOOTSTRAP_VERSION:
        return fail("cdk-bootstrap", region, f"bootstrap version {version} < {MIN_BOOTSTRAP_VERSION}", fix)
    return ok("cdk-bootstrap", region, f"bootstrap version {version}")


def lambda_check(reader: AccountReader, config: GcoConfig, region: str) -> Check:
    limit, unreserved = reader.lambda_concurrency(region)
    ours = reserved_functions(config, region)
    already_ours = sum(reader.reserved_concurrency(region, name) for name in ours)
    others = max(0, limit - unreserved - already_ours)
    needed = sum(ours.values()) + LAMBDA_UNRESERVED_MINIMUM + others
    detail = (
        f"quota {limit}; gco reserves {sum(ours.values())}, other functions {others}, "
        f"Lambda keeps {LAMBDA_UNRESERVED_MINIMUM} unreserved: needs {needed}"
    )
    if limit < needed:
        service, code = LAMBDA_CONCURRENCY_QUOTA
        fix = (
            f"aws service-quotas request-service-quota-increase --service-code {service} "
            f"--quota-code {code} --desired-value {needed} --region {region}"
        )
        return fail("lambda-concurrency", region, detail, fix)
    return ok("lambda-concurrency", region, detail)


def vcpu_checks(reader: AccountReader, config: GcoConfig, region: str) -> list[Check]:
    demands = node_group_demands(config, region)
    vcpus = reader.vcpus(region, [t for d in demands for t in d.instance_types])
    checks = []
    for (capacity, family_class), needed in vcpu_demand(demands, vcpus).items():
        code, title = VCPU_QUOTAS[(capacity, family_class)]
        name = f"vcpu-quota {capacity} {family_class}"
        value = reader.quota(region, "ec2", code)
        detail = f"'{title}' is {value:g} vCPUs; every node group at its maximum needs {needed}"
        if value < needed:
            fix = (
                "aws service-quotas request-service-quota-increase --service-code ec2 "
                f"--quota-code {code} --desired-value {needed} --region {region}"
            )
            checks.append(fail(name, region, detail, fix))
        else:
            checks.append(ok(name, region, detail))
    return checks


def eks_version_check(reader: AccountReader, config: GcoConfig, region: str) -> Check:
    version = config.kubernetes_version
    status = reader.cluster_version_status(region, version)
    if status == "STANDARD_SUPPORT":
        return ok("eks-version", region, f"Kubernetes {version}: standard support")
    fix = "set kubernetes_version in cdk.json to a version in standard support"
    if status == "EXTENDED_SUPPORT":
        if config.allow_extended_support:
            return warn(
                "eks-version", region, f"Kubernetes {version}: extended support (priced per hour)", fix
            )
        return fail("eks-version", region, f"Kubernetes {version}: extended support only", fix)
    return fail("eks-version", region, f"Kubernetes {version}: EKS answers {status or 'not offered'}", fix)


def role_checks(reader: AccountReader, config: GcoConfig) -> list[Check]:
    roles = {**EKS_ROLES, **FRONT_DOOR_ROLES}
    if "spot" in (config.gpu_nodes.capacity_type, config.system_nodes.capacity_type) or (
        config.gpu_nodes.capacity_type == "both"
    ):
        roles[SPOT_ROLE[0]] = SPOT_ROLE[1]
    checks = []
    for role, service in roles.items():
        name = f"service-linked-role {role}"
        if reader.role_exists(role):
            checks.append(ok(name, ACCOUNT, "present"))
        else:
            checks.append(
                warn(
                    name,
                    ACCOUNT,
                    "absent: created on first use only if the deploying principal may call "
                    "iam:CreateServiceLinkedRole",
                    f"aws iam create-service-linked-role --aws-service-name {service}",
                )
            )
    return checks


def region_checks(reader: AccountReader, config: GcoConfig, region: str, account: str) -> list[Check]:
    """Every check of one Region."""
    checks = [
        guarded("cdk-bootstrap", region, lambda: bootstrap_check(reader, region, account)),
        guarded("lambda-concurrency", region, lambda: lambda_check(reader, config, region)),
        guarded("eks-version", region, lambda: eks_version_check(reader, config, region)),
        guarded("gpu-zones", region, lambda: gpu_zones_check(reader, config, region)),
        guarded("api-gateway-logging-role", region, lambda: api_logging_check(reader, config, region)),
    ]
    try:
        checks += vcpu_checks(reader, config, region)
    except AccountReadError as error:
        checks.append(read_failed("vcpu-quota", region, error))
    return checks
