"""The numbers a deployer reads come from the code: what the templates reserve and require is what
`gco.deployment.capacity` and the doctor compute, and docs/deploy.md states no other figure."""

from __future__ import annotations

import gzip
import importlib.resources
import json
import re
from typing import Any

from gco.deployment.capacity import (
    LAMBDA_UNRESERVED_MINIMUM,
    REGIONAL_RESERVED,
    lambda_quota_needed,
    node_group_demands,
    reserved_concurrency_per_region,
    reserved_functions,
    vcpu_demand,
)
from gco.doctor.account import MIN_BOOTSTRAP_VERSION
from gco.reconcile.throughput import STREAM_RESERVED_CONCURRENCY
from stacks.config import parse_config
from tests.cdk.conftest import HOME, OTHER, ROOT, Synthesized, cdk_json_config

DEPLOY_MD = ROOT / "docs" / "deploy.md"
SCALE_MD = ROOT / "docs" / "scale.md"


def stacks_in(synthesized: Synthesized, region: str) -> list[dict[str, Any]]:
    return [dict(a.template) for a in synthesized.assembly.stacks if a.environment.region == region]


def test_each_region_reserves_exactly_what_capacity_computes(synthesized: Synthesized) -> None:
    config = parse_config(cdk_json_config())
    for region in (HOME, OTHER):
        reserved = {
            r["Properties"]["FunctionName"]: r["Properties"]["ReservedConcurrentExecutions"]
            for template in stacks_in(synthesized, region)
            for r in template["Resources"].values()
            if r["Type"] == "AWS::Lambda::Function" and "ReservedConcurrentExecutions" in r["Properties"]
        }
        assert reserved == reserved_functions(config, region)
        assert sum(reserved.values()) == reserved_concurrency_per_region()


def test_the_bootstrap_rule_refuses_what_the_doctor_calls_too_old(synthesized: Synthesized) -> None:
    for artifact in synthesized.assembly.stacks:
        rule = artifact.template["Rules"]["CheckBootstrapVersion"]["Assertions"][0]["Assert"]
        refused = rule["Fn::Not"][0]["Fn::Contains"][0]
        assert refused == [str(v) for v in range(1, MIN_BOOTSTRAP_VERSION)]


def numbers(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"(?<![\w.-])\d+(?![\w.])", text)}


def lambda_row() -> str:
    rows = [
        line
        for line in DEPLOY_MD.read_text().splitlines()
        if line.startswith("| Lambda *Concurrent executions*")
    ]
    assert len(rows) == 1
    return rows[0]


def test_deploy_md_states_only_the_concurrency_the_stacks_reserve() -> None:
    produced = {
        *REGIONAL_RESERVED.values(),
        reserved_concurrency_per_region(),
        LAMBDA_UNRESERVED_MINIMUM,
        lambda_quota_needed(),
    }
    stated = numbers(lambda_row())
    assert stated <= produced, (
        f"docs/deploy.md states {sorted(stated - produced)}, the stacks produce {sorted(produced)}"
    )
    assert {reserved_concurrency_per_region(), lambda_quota_needed(), *REGIONAL_RESERVED.values()} <= stated
    # Any other line of the deploy guide about Lambda concurrency states the same figures only.
    for line in DEPLOY_MD.read_text().splitlines():
        if re.search(r"concurren", line, re.I) and "Lambda" in line:
            assert numbers(line) <= produced | {6}, line  # 6: the bootstrap version in the doctor table


def test_scale_md_states_the_stream_reservation_the_stack_makes() -> None:
    row = next(
        line
        for line in SCALE_MD.read_text().splitlines()
        if "reserved concurrency of the stream function" in line
    )
    assert numbers(row.split("|")[2]) == {STREAM_RESERVED_CONCURRENCY}


def instance_vcpus() -> dict[str, int]:
    """Default vCPUs by instance type, from moto's copy of EC2 DescribeInstanceTypes."""
    raw = importlib.resources.files("moto.ec2").joinpath("resources/instance_types.json.gz").read_bytes()
    return {name: int(t["VCpuInfo"]["DefaultVCpus"]) for name, t in json.loads(gzip.decompress(raw)).items()}


def test_deploy_md_gpu_quota_example_is_the_default_config_s() -> None:
    config = parse_config(cdk_json_config())
    vcpus = instance_vcpus()
    other = vcpu_demand(node_group_demands(config, OTHER), vcpus)[("on-demand", "G and VT")]
    home = vcpu_demand(node_group_demands(config, HOME), vcpus)[("on-demand", "G and VT")]
    row = next(
        line
        for line in DEPLOY_MD.read_text().splitlines()
        if "*Running On-Demand G and VT instances*" in line
    )
    assert f"= {other})" in row
    assert f"({home - other} more)" in row
