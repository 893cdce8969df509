"""What the global address needs of the account (`docs/global.md`), checked only when `cdk.json` sets
`global_address`: its hosted zone, Route 53's health-check quota, and in each Region API Gateway's
quota of custom domain names.

- `hosted-zone`: the zone exists, is public (Route 53 answers public DNS, and so health checkers,
  callers and ACM's DNS validation, only from a public zone) and has the configured name.
- `health-check-quota`: one health check per Region fits under the account's limit (Route 53
  `GetAccountLimit` `MAX_HEALTH_CHECKS_BY_OWNER`, "Quotas", Route 53 Developer Guide:
  https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/DNSLimitations.html), counting the
  checks that already request this deployment's names as its own.
- `custom-domain-quota` (per Region): two custom domains (`<domain>` and `<region>.<domain>`) fit
  under "Public custom domain names per account per Region" (default 120, Service Quotas
  `apigateway` `L-A93447B8`: https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-execution-service-limits-table.html),
  the deployment's own domains counted as its own.
"""

from __future__ import annotations

from collections.abc import Callable

from gco.deployment.config import GcoConfig
from gco.deployment.global_address import GlobalAddressConfig
from gco.doctor.account import guarded
from gco.doctor.model import ACCOUNT, Check, fail, ok
from gco.doctor.port import AccountReader

CUSTOM_DOMAIN_QUOTA = ("apigateway", "L-A93447B8")
ROUTE53_QUOTAS = "https://console.aws.amazon.com/servicequotas/home/services/route53/quotas"


def hosted_zone_check(reader: AccountReader, address: GlobalAddressConfig) -> Check:
    """The configured zone exists, is public and is named as configured."""
    zone_id, name = address.hosted_zone_id, address.hosted_zone_name
    zone = reader.hosted_zone(zone_id)
    if zone is None:
        return fail(
            "hosted-zone",
            ACCOUNT,
            f"no hosted zone {zone_id}",
            f"create a public zone (aws route53 create-hosted-zone --name {name} --caller-reference "
            "<unique>), delegate the domain to its name servers, and set its id as "
            "global_address.hosted_zone_id",
        )
    if zone.private:
        return fail(
            "hosted-zone",
            ACCOUNT,
            f"{zone_id} ({zone.name}) is a private zone: health checkers, callers and ACM's validation "
            "need public DNS",
            "name a public hosted zone in global_address.hosted_zone_id",
        )
    if zone.name != name:
        return fail(
            "hosted-zone",
            ACCOUNT,
            f"{zone_id} is {zone.name}, not {name}",
            f"set global_address.hosted_zone_name to {zone.name}, or name the zone of {name}",
        )
    return ok("hosted-zone", ACCOUNT, f"{zone_id} is the public zone {name}")


def health_check_quota_check(reader: AccountReader, config: GcoConfig, address: GlobalAddressConfig) -> Check:
    """One health check per Region fits under the account's limit (ours already there count as ours)."""
    limit, targets = reader.health_checks()
    ours = {address.regional_name(region) for region in config.regions}
    others = sum(1 for target in targets if target not in ours)
    needed = others + len(ours)
    detail = f"limit {limit}; other health checks {others}, this deployment {len(ours)}: needs {needed}"
    if limit < needed:
        return fail(
            "health-check-quota",
            ACCOUNT,
            detail,
            f"request a Route 53 health-check limit of at least {needed} ({ROUTE53_QUOTAS}, or AWS Support)",
        )
    return ok("health-check-quota", ACCOUNT, detail)


def custom_domain_quota_check(reader: AccountReader, address: GlobalAddressConfig, region: str) -> Check:
    """Two custom domains fit under the Region's quota (the deployment's own counted as its own)."""
    service, code = CUSTOM_DOMAIN_QUOTA
    quota = int(reader.quota(region, service, code))
    ours = {address.domain_name, address.regional_name(region)}
    others = sum(1 for name in reader.custom_domains(region) if name not in ours)
    needed = others + len(ours)
    detail = f"quota {quota}; other custom domains {others}, this deployment {len(ours)}: needs {needed}"
    if quota < needed:
        fix = (
            f"aws service-quotas request-service-quota-increase --service-code {service} "
            f"--quota-code {code} --desired-value {needed} --region {region}"
        )
        return fail("custom-domain-quota", region, detail, fix)
    return ok("custom-domain-quota", region, detail)


def global_checks(reader: AccountReader, config: GcoConfig, regions: list[str]) -> list[Check]:
    """Every check of the global address (none without one); a refused read fails its own check."""
    address = config.global_address
    if address is None:
        return []
    checks = [
        guarded("hosted-zone", ACCOUNT, lambda: hosted_zone_check(reader, address)),
        guarded("health-check-quota", ACCOUNT, lambda: health_check_quota_check(reader, config, address)),
    ]
    for region in regions:
        checks.append(guarded("custom-domain-quota", region, _domains(reader, address, region)))
    return checks


def _domains(reader: AccountReader, address: GlobalAddressConfig, region: str) -> Callable[[], Check]:
    return lambda: custom_domain_quota_check(reader, address, region)
