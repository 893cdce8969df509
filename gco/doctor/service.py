"""`run_doctor`: every check, local and (unless offline) of the account, in one report."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from gco.deployment.config import GcoConfig
from gco.deployment.kubernetes import EKS_CALENDAR
from gco.doctor.account import region_checks, role_checks
from gco.doctor.errors import AccountReadError, NoCredentialsError
from gco.doctor.global_checks import global_checks
from gco.doctor.local import ToolRunner, local_checks
from gco.doctor.model import ACCOUNT, LOCAL, Check, Report, fail, ok, warn
from gco.doctor.port import AccountReader

# EKS announces the end of standard support at least 60 days ahead (EKS User Guide, version FAQ):
# inside that window the doctor warns.
NOTICE_DAYS = 60


def calendar_check(config: GcoConfig, today: date) -> Check:
    """The configured version against the calendar the config model enforces (no AWS call)."""
    version = config.kubernetes_version
    window = EKS_CALENDAR[version]
    left = (window.end_of_standard - today).days
    if left <= 0:
        detail = f"Kubernetes {version}: extended support since {window.end_of_standard} (allowed)"
        return warn(
            "kubernetes-version", LOCAL, detail, "move kubernetes_version to a version in standard support"
        )
    detail = f"Kubernetes {version}: standard support until {window.end_of_standard} ({left} days)"
    if left <= NOTICE_DAYS:
        return warn("kubernetes-version", LOCAL, detail, "plan the upgrade to the next version")
    return ok("kubernetes-version", LOCAL, detail)


def account_checks(reader: AccountReader, config: GcoConfig, regions: list[str]) -> list[Check]:
    """Who the credentials are, the service-linked roles, then each Region's checks. Without usable
    credentials, only the failed `credentials` check."""
    try:
        account = reader.account_id()
    except NoCredentialsError as error:
        fix = "configure AWS credentials (aws configure, AWS_PROFILE), or run gco doctor --offline"
        return [fail("credentials", ACCOUNT, str(error), fix)]
    except AccountReadError as error:
        return [fail("credentials", ACCOUNT, f"cannot read: {error}", f"allow {error.call}")]
    checks = [credentials_check(config, account)]
    try:
        checks += role_checks(reader, config)
    except AccountReadError as error:
        checks.append(fail("service-linked-roles", ACCOUNT, f"cannot read: {error}", f"allow {error.call}"))
    for region in regions:
        checks += region_checks(reader, config, region, account)
    return checks + global_checks(reader, config, regions)


def credentials_check(config: GcoConfig, account: str) -> Check:
    """The credentials' account against the one cdk.json pins (`gco.account`), where it pins one."""
    if config.account and config.account != account:
        fix = "use credentials of the account cdk.json names, or change gco.account"
        return fail("credentials", ACCOUNT, f"account {account}; cdk.json names {config.account}", fix)
    return ok("credentials", ACCOUNT, f"account {account}")


def run_doctor(
    config: GcoConfig,
    *,
    regions: list[str],
    reader: AccountReader | None,
    run: ToolRunner,
    root: Path,
    today: date,
) -> Report:
    """Local checks, the version calendar, and with a `reader` the account's checks in `regions`."""
    checks = local_checks(run, root, prebuilt_image=config.runner.image_uri)
    checks.append(calendar_check(config, today))
    if reader is not None:
        checks += account_checks(reader, config, regions)
    return Report(checks=checks)
