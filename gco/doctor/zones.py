"""Checks of what a Region offers where the stacks put things: the GPU instance types in the zones the
VPC will use, and API Gateway's CloudWatch Logs role, a setting of the account per Region.

Which zones the VPC uses: the Regional stack names no account at synth (`gco.account` unset) so CDK
writes each subnet's zone as `Fn::Select [i, Fn::GetAZs ""]`, evaluated by CloudFormation at deploy:
"an array that lists Availability Zones for a specified Region in alphabetical order ... returns only
Availability Zones that have a default subnet unless none of the Availability Zones has a default
subnet; in that case, all Availability Zones are returned" (CloudFormation template reference,
`Fn::GetAZs`). `getazs` models that, from DescribeAvailabilityZones and the default subnets
(DescribeSubnets `default-for-az`); the VPC takes the first `ZONES_PER_VPC` (stacks/constructs/network.py
`max_azs`). With `gco.account` set, CDK looks the zones up at synth instead (its AZ context provider:
the available zones, sorted), which the same first two of the available zones approximate only when
every zone has a default subnet or none has.

Why the network does not pick the zones by itself: at synth the app is offline (no account to ask),
and CloudFormation offers no function that filters zones by instance type. So the choice is the
config's: `network.availability_zones` names a Region's two zones (the VPC is then built in exactly
those), and the doctor's fix names the zones that offer every GPU type, ready to paste.

Which instance types a zone offers: `DescribeInstanceTypeOfferings` with location type
`availability-zone` (EC2 API reference). A type offered in none of the VPC's zones fails (its node
group can never start a node, its pods stay Pending); one offered in one of the two warns (nodes start
only there, and a zone's outage leaves none).
"""

from __future__ import annotations

import json

from gco.deployment.config import ZONES_PER_VPC, GcoConfig
from gco.doctor.model import Check, fail, ok, warn
from gco.doctor.port import AccountReader
from gco.front_door import logging_role_name


def getazs(zones: list[str], default_subnet_zones: set[str]) -> list[str]:
    """What CloudFormation's `Fn::GetAZs ""` answers: the zones with a default subnet, or every zone
    when none has one, in alphabetical order."""
    with_default = [zone for zone in zones if zone in default_subnet_zones]
    return sorted(with_default or zones)


def vpc_zones(reader: AccountReader, region: str, named: list[str] | None = None) -> list[str]:
    """The zones the Regional stack's VPC will be created in: those `network.availability_zones`
    names, else the first of what Fn::GetAZs will answer."""
    if named:
        return list(named)
    return getazs(reader.availability_zones(region), reader.default_subnet_zones(region))[:ZONES_PER_VPC]


def gpu_zones_check(reader: AccountReader, config: GcoConfig, region: str) -> Check:
    """Each GPU node group's instance type (and in the home Region the runner's) offered in the VPC's
    zones."""
    types = list(dict.fromkeys(config.gpu_nodes.instance_types))
    if region == config.home_region:
        types += [t for t in config.runner.instance_types if t not in types]
    zones = vpc_zones(reader, region, config.network.availability_zones.get(region))
    offered = reader.instance_type_zones(region, types)
    nowhere = [t for t in types if not offered.get(t, set()) & set(zones)]
    partly = [t for t in types if t not in nowhere and not set(zones) <= offered.get(t, set())]
    detail = f"the VPC's zones {', '.join(zones)}: " + "; ".join(
        f"{t} in {', '.join(sorted(offered.get(t, set()) & set(zones))) or 'none'}" for t in types
    )
    everywhere = sorted(set.intersection(*(offered.get(t, set()) for t in types))) if types else []
    pick = f'"network": {{"availability_zones": {{"{region}": {json.dumps(everywhere[:ZONES_PER_VPC])}}}}}'
    fix = (
        f"zones of {region} offering every type: {', '.join(everywhere) or 'none'}; "
        + (f"name two in cdk.json ({pick}), " if len(everywhere) >= ZONES_PER_VPC else "")
        + "or use instance types offered in the VPC's zones (gpu_nodes.instance_types, runner); "
        f"aws ec2 describe-instance-type-offerings --location-type availability-zone --region {region}"
    )
    if nowhere:
        return fail("gpu-zones", region, f"{', '.join(nowhere)} offered in none; {detail}", fix)
    if partly:
        return warn("gpu-zones", region, f"{', '.join(partly)} offered in one zone only; {detail}", fix)
    return ok("gpu-zones", region, detail)


def api_logging_check(reader: AccountReader, config: GcoConfig, region: str) -> Check:
    """API Gateway's CloudWatch Logs role in `region`: needed by the front door's access logs; the
    Regional stack sets it with `api_gateway_account: create` (stacks/constructs/api_account.py)."""
    name = "api-gateway-logging-role"
    current = reader.api_gateway_logging_role(region)
    ours = logging_role_name(config.prefix, region)
    set_by = current.rsplit("/", 1)[-1] if current else ""
    if config.api_gateway_account == "existing":
        fix = (
            f"set it (aws apigateway update-account --region {region} --patch-operations "
            "op=replace,path=/cloudwatchRoleArn,value=<role ARN>, a role apigateway.amazonaws.com may "
            "assume with AmazonAPIGatewayPushToCloudWatchLogs' permissions), or set "
            "api_gateway_account to create in cdk.json"
        )
        if not current:
            return fail(name, region, "unset: the front door's stage cannot log until it is", fix)
        if not reader.role_exists(set_by):
            return fail(name, region, f"names {current}, which does not exist", fix)
        return ok(name, region, f"set to {current} (api_gateway_account: existing)")
    if not current:
        return ok(name, region, "unset: the Regional stack sets its own")
    if set_by.startswith(f"{ours}-"):
        return ok(name, region, f"set to {current}, this deployment's")
    return warn(
        name,
        region,
        f"set to {current}: the Regional stack will replace it with its own role",
        "keep it with api_gateway_account: existing in cdk.json (one owner per account and Region)",
    )
