"""`gco doctor`'s account checks through the boto3 adapter: moto answering SSM, IAM and EC2, recorded
AWS answers for Service Quotas, Lambda's account settings and EKS's versions (tests/functional/doctor/
recorded.py). Each check is seen passing and failing, and the report's end state is asserted."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import boto3
import pytest

from gco.deployment.capacity import reserved_functions
from gco.deployment.config import GcoConfig, parse_config
from gco.doctor.account import EKS_ROLES, FRONT_DOOR_ROLES, MIN_BOOTSTRAP_VERSION
from gco.doctor.boto_reader import BotoAccountReader
from gco.doctor.model import Check, Report
from gco.doctor.service import run_doctor
from gco.local.moto.motoserver import MotoServer
from tests.cdk.synth_cache import cdk_json_config
from tests.functional.doctor.recorded import Clients, eks_answer, quota_answer, recorded

REGION = "us-east-1"
MOTO_ACCOUNT = "123456789012"  # the account moto answers for by default
DAY = date(2026, 12, 2)
# The default cdk.json in one Region at full scale: GPU groups l40s (g6e.2xlarge, 8 vCPUs) and l4
# (g6.xlarge, 4) at 4 nodes each, and the runner (g6e.xlarge, 4): 52; system nodes m7i.large (2) x 4.
GPU_VCPUS, SYSTEM_VCPUS = 52, 8


def ready_tools(argv: list[str], cwd: Path) -> tuple[int, str]:
    """Stand-in for the local tools: every one installed (the local checks have their own tests)."""
    answers = {"node": "v22.12.0", "npx": "2.1148.1 (build x)", "docker": "28.2.2"}
    return 0, answers[argv[0]]


def config(**changes: Any) -> GcoConfig:
    # Without the test app's global address: its checks have their own tests (test_doctor_global.py).
    return parse_config(
        {**cdk_json_config(), "regions": [REGION], "global_address": None, **changes}, today=DAY
    )


def seed_account(moto: MotoServer, *, bootstrap: int | None = 21, roles: bool = True) -> None:
    if bootstrap is not None:
        ssm = boto3.client("ssm", region_name=REGION, endpoint_url=moto.url)
        ssm.put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value=str(bootstrap), Type="String")
    if roles:
        iam = boto3.client("iam", region_name=REGION, endpoint_url=moto.url)
        # Created by name and path as IAM holds them (moto's CreateServiceLinkedRole names the EKS
        # node group role differently from IAM, which calls it AWSServiceRoleForAmazonEKSNodegroup).
        trust = '{"Version": "2012-10-17", "Statement": []}'
        for role, service in {**EKS_ROLES, **FRONT_DOOR_ROLES}.items():
            path = f"/aws-service-role/{service}/"
            iam.create_role(RoleName=role, Path=path, AssumeRolePolicyDocument=trust)


def queue_answers(
    clients: Clients,
    gco: GcoConfig,
    *,
    lambda_limit: int = 1000,
    gpu_quota: float = 64,
    eks_status: str = "STANDARD_SUPPORT",
    spot_quota: float | None = None,
) -> None:
    """What the stubbed services answer, in the order the doctor asks."""
    settings = recorded("lambda_account_settings")
    settings["AccountLimit"].update(
        ConcurrentExecutions=lambda_limit, UnreservedConcurrentExecutions=lambda_limit
    )
    lam = clients.stub("lambda", REGION)
    lam.add_response("get_account_settings", settings, {})
    for name in reserved_functions(gco, REGION):
        lam.add_client_error(
            "get_function_concurrency", "ResourceNotFoundException", expected_params={"FunctionName": name}
        )
    clients.stub("eks", REGION).add_response(
        "describe_cluster_versions",
        eks_answer(gco.kubernetes_version, eks_status),
        {"clusterVersions": [gco.kubernetes_version]},
    )
    quotas = clients.stub("service-quotas", REGION)
    # In the order the node groups come: GPU (Spot first when preferred, as by default), then the
    # system nodes.
    asked = [*([("L-3819A6DF", spot_quota)] if spot_quota is not None else []), ("L-DB2E81BA", gpu_quota)]
    for code, value in [*asked, ("L-1216C47A", 16.0)]:
        quotas.add_response(
            "get_service_quota", quota_answer(code, value), {"ServiceCode": "ec2", "QuotaCode": code}
        )


def doctor(moto: MotoServer, clients: Clients, gco: GcoConfig) -> Report:
    return run_doctor(
        gco,
        regions=[REGION],
        reader=BotoAccountReader(clients),
        run=ready_tools,
        root=Path("."),
        today=DAY,
    )


def by_name(report: Report) -> dict[str, Check]:
    return {check.name: check for check in report.checks}


def test_a_ready_account_passes_every_check(moto: MotoServer) -> None:
    seed_account(moto)
    clients, gco = Clients(moto.url), config()
    queue_answers(clients, gco)
    report = doctor(moto, clients, gco)
    clients.assert_all_answered()
    assert report.ok, report.lines()
    checks = by_name(report)
    assert checks["vcpu-quota on-demand G and VT"].detail.endswith(f"needs {GPU_VCPUS}")
    assert checks["vcpu-quota on-demand Standard"].detail.endswith(f"needs {SYSTEM_VCPUS}")
    assert "needs 120" in checks["lambda-concurrency"].detail
    assert all(c.status == "ok" for c in report.checks), report.lines()


def test_a_new_account_fails_with_the_fixes(moto: MotoServer) -> None:
    seed_account(moto, bootstrap=None, roles=False)
    clients, gco = Clients(moto.url), config()
    # A new account's Lambda quota (10) and G and VT quota (0): the recorded answers, values lowered.
    queue_answers(clients, gco, lambda_limit=10, gpu_quota=0)
    report = doctor(moto, clients, gco)
    assert not report.ok
    checks = by_name(report)
    assert checks["cdk-bootstrap"].fix == f"npx cdk bootstrap aws://{MOTO_ACCOUNT}/{REGION}"
    assert checks["credentials"].detail == f"account {MOTO_ACCOUNT}"
    assert checks["lambda-concurrency"].status == "fail"
    assert "--quota-code L-B99A9384 --desired-value 120" in checks["lambda-concurrency"].fix
    gpu = checks["vcpu-quota on-demand G and VT"]
    assert gpu.status == "fail" and f"--quota-code L-DB2E81BA --desired-value {GPU_VCPUS}" in gpu.fix
    assert checks["vcpu-quota on-demand Standard"].status == "ok"
    roles = [c for c in report.checks if c.name.startswith("service-linked-role")]
    assert {c.status for c in roles} == {"warn"}
    assert "--aws-service-name eks.amazonaws.com" in roles[0].fix


def test_an_old_bootstrap_and_extended_support_fail(moto: MotoServer) -> None:
    seed_account(moto, bootstrap=MIN_BOOTSTRAP_VERSION - 1)
    clients, gco = Clients(moto.url), config()
    queue_answers(clients, gco, eks_status="EXTENDED_SUPPORT")
    checks = by_name(doctor(moto, clients, gco))
    assert checks["cdk-bootstrap"].status == "fail" and "5 < 6" in checks["cdk-bootstrap"].detail
    assert checks["eks-version"].status == "fail"


def test_other_functions_reservations_count_and_gco_s_own_do_not(moto: MotoServer) -> None:
    seed_account(moto)
    clients, gco = Clients(moto.url), config()
    settings = recorded("lambda_account_settings")
    # 1000 in all, 890 unreserved: 110 reserved, of which gco's own deployed functions hold 20.
    settings["AccountLimit"].update(ConcurrentExecutions=1000, UnreservedConcurrentExecutions=890)
    lam = clients.stub("lambda", REGION)
    lam.add_response("get_account_settings", settings, {})
    for name, reserved in reserved_functions(gco, REGION).items():
        lam.add_response(
            "get_function_concurrency", {"ReservedConcurrentExecutions": reserved}, {"FunctionName": name}
        )
    reader = BotoAccountReader(clients)
    from gco.doctor.account import lambda_check

    check = lambda_check(reader, gco, REGION)
    assert check.status == "ok"
    assert (
        check.detail
        == "quota 1000; gco reserves 20, other functions 90, Lambda keeps 100 unreserved: needs 210"
    )


def test_a_refused_read_fails_its_check_naming_the_permission(moto: MotoServer) -> None:
    seed_account(moto)
    clients, gco = Clients(moto.url), config()
    clients.stub("lambda", REGION).add_client_error(
        "get_account_settings", "AccessDeniedException", "not allowed"
    )
    clients.stub("eks", REGION).add_response(
        "describe_cluster_versions", eks_answer(gco.kubernetes_version, "STANDARD_SUPPORT")
    )
    quotas = clients.stub("service-quotas", REGION)
    for code in ("L-DB2E81BA", "L-1216C47A"):
        quotas.add_response("get_service_quota", quota_answer(code, 100.0))
    checks = by_name(doctor(moto, clients, gco))
    lam = checks["lambda-concurrency"]
    assert lam.status == "fail" and "AccessDeniedException" in lam.detail
    assert lam.fix == "allow lambda:GetAccountSettings to the principal running gco doctor"
    assert checks["eks-version"].status == "ok"


def test_spot_capacity_adds_its_quota_and_role(moto: MotoServer) -> None:
    seed_account(moto)
    clients = Clients(moto.url)
    gco = config(gpu_nodes={**cdk_json_config()["gpu_nodes"], "capacity_type": "both"})
    queue_answers(clients, gco, spot_quota=0.0)
    checks = by_name(doctor(moto, clients, gco))
    spot = checks["vcpu-quota spot G and VT"]
    assert spot.status == "fail" and spot.detail.endswith("needs 48")  # the GPU groups, no runner
    assert checks["service-linked-role AWSServiceRoleForEC2Spot"].status == "warn"


def test_the_reader_reads_the_recorded_eks_answer_as_documented() -> None:
    clients = Clients("http://127.0.0.1:9")  # no moto call is made
    clients.stub("eks", REGION).add_response("describe_cluster_versions", recorded("eks_cluster_versions"))
    assert BotoAccountReader(clients).cluster_version_status(REGION, "1.31") == "STANDARD_SUPPORT"


def test_no_credentials_is_one_failed_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    report = run_doctor(
        config(), regions=[REGION], reader=BotoAccountReader(), run=ready_tools, root=tmp_path, today=DAY
    )
    account = [c for c in report.checks if c.scope == "account"]
    assert [(c.name, c.status) for c in account] == [("credentials", "fail")]
    assert "--offline" in account[0].fix


def test_credentials_of_another_account_than_cdk_json_s_fail(moto: MotoServer) -> None:
    seed_account(moto)
    clients, gco = Clients(moto.url), config(account="111122223333")
    queue_answers(clients, gco)
    check = by_name(doctor(moto, clients, gco))["credentials"]
    assert check.status == "fail" and check.detail == f"account {MOTO_ACCOUNT}; cdk.json names 111122223333"


def test_a_quota_never_changed_is_read_from_its_default() -> None:
    clients = Clients("http://127.0.0.1:9")  # no moto call is made
    quotas = clients.stub("service-quotas", REGION)
    quotas.add_client_error("get_service_quota", "NoSuchResourceException", "no applied value")
    quotas.add_response("get_aws_default_service_quota", recorded("service_quotas_default"))
    assert BotoAccountReader(clients).quota(REGION, "ec2", "L-1216C47A") == 5.0
    clients.assert_all_answered()
