"""Runner stack: image asset, launch template (with its network), the instance role's permissions
(every job's, and what a matrix job reads: clusters, Regional stack outputs, front doors, earlier runs)."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import Any

from aws_cdk.assertions import Capture, Match

from gco.front_door import regional_stack_name
from gpu_runner.runner import RUNNER_ID_VARIABLE, RUNS_PREFIX, run_prefix
from tests.cdk.synth_cache import HOME, OTHER, Synthesized


def render(value: Any) -> str:
    """A CloudFormation string as text: partition `aws`, account `ACCOUNT`, imports as `IMPORT(<name>)`."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(render(part) for part in parts)
    if "Fn::ImportValue" in value:
        return f"IMPORT({value['Fn::ImportValue']})"
    pseudo = {"AWS::Partition": "aws", "AWS::AccountId": "ACCOUNT"}
    return pseudo.get(value.get("Ref", ""), json.dumps(value))


def runner_statements(runner_template: Any) -> dict[str, dict[str, Any]]:
    policy = Capture()
    runner_template.has_resource_properties(
        "AWS::IAM::ManagedPolicy", {"ManagedPolicyName": "gco-runner-us-east-1", "PolicyDocument": policy}
    )
    return {s["Sid"]: s for s in policy.as_object()["Statement"]}


def resources_of(statement: dict[str, Any]) -> list[str]:
    found = statement["Resource"]
    return [render(item) for item in (found if isinstance(found, list) else [found])]


def test_launch_template_imdsv2_encrypted_gpu_ami(runner_template: Any, synthesized: Synthesized) -> None:
    runner_template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateName": "gco-runner",
            "LaunchTemplateData": Match.object_like(
                {
                    "InstanceType": "g6e.xlarge",
                    "MetadataOptions": Match.object_like(
                        {"HttpTokens": "required", "InstanceMetadataTags": "enabled"}
                    ),
                    "InstanceInitiatedShutdownBehavior": "terminate",
                    "BlockDeviceMappings": [
                        {
                            "DeviceName": "/dev/xvda",
                            "Ebs": Match.object_like(
                                {
                                    "Encrypted": True,
                                    "VolumeType": "gp3",
                                    "DeleteOnTermination": True,
                                }
                            ),
                        }
                    ],
                    "UserData": Match.any_value(),
                }
            ),
        },
    )
    parameters = synthesized.template_json("gco-runner")["Parameters"]
    assert any(
        "base-oss-nvidia-driver-gpu" in str(p.get("Default")) and "AWS::SSM::Parameter::Value" in p["Type"]
        for p in parameters.values()
    )


def test_user_data_pulls_runs_and_always_powers_off(synthesized: Synthesized) -> None:
    template = synthesized.template_json("gco-runner")
    template_data = next(
        r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"
    )["Properties"]["LaunchTemplateData"]
    script = json.dumps(template_data["UserData"])
    for fragment in (
        "trap 'shutdown -h now' EXIT",
        "docker pull",
        "docker run --rm --gpus all",
        "gco-job-key",
        "X-aws-ec2-metadata-token",
        "GCO_EVIDENCE_BUCKET",
        # Engine containers run beside the runner, on the host's daemon.
        "-v /var/run/docker.sock:/var/run/docker.sock --group-add $(stat -c %g /var/run/docker.sock)",
        "GCO_HEARTBEAT_SECONDS=60",
    ):
        assert fragment in script


def test_image_asset_from_the_runner_dockerfile(synthesized: Synthesized) -> None:
    manifest = json.loads((Path(synthesized.assembly.directory) / "gco-runner.assets.json").read_text())
    sources = [image["source"] for image in manifest["dockerImages"].values()]
    assert len(sources) == 1
    assert sources[0]["dockerFile"] == "gpu_runner/Dockerfile"
    assert sources[0]["platform"] == "linux/amd64"


def test_instance_role_limited_to_its_prefixes_tokens_and_table(runner_template: Any) -> None:
    statements = runner_statements(runner_template)
    assert set(statements) == {
        "ReadJobs",
        "CreateEvidenceAndOwnRunObjects",
        "ReadEvidence",
        "BucketAndTableKey",
        "AnswerOwnTasks",
        "EndpointTable",
        "PullRunnerImage",
        "EcrLogin",
        "ListRuns",
        "ReadRuns",
        "DescribeClusters",
        "ReadRegionalOutputs",
        "InvokeFrontDoors",
    }
    assert statements["EcrLogin"]["Action"] == "ecr:GetAuthorizationToken"
    create = statements["CreateEvidenceAndOwnRunObjects"]
    prefixes = json.dumps(create["Resource"])
    assert "/evidence/*" in prefixes and "/jobs/" not in prefixes
    # Run files only under the runner's own id: `runs/<execution>/<aws:userid>/`, never a bare `runs/*`.
    assert f"/runs/*/{RUNNER_ID_VARIABLE}/*" in prefixes and '/runs/*"' not in prefixes
    granted = f"{RUNS_PREFIX}*/{RUNNER_ID_VARIABLE}/*".replace(RUNNER_ID_VARIABLE, "AROAID:i-1")
    assert fnmatch.fnmatchcase(run_prefix("exec-1", "AROAID:i-1") + "cells/a.json", granted)
    assert not fnmatch.fnmatchcase(run_prefix("exec-1", "AROAID:i-2") + "cells/a.json", granted)
    # New objects only: every write must carry If-None-Match, so none replaces an existing object.
    assert create["Action"] == "s3:PutObject"
    assert create["Condition"] == {"Null": {"s3:if-none-match": "false"}}
    assert statements["ReadEvidence"]["Action"] == "s3:GetObject"
    assert "/evidence/*" in json.dumps(statements["ReadEvidence"]["Resource"])
    assert "stateMachine:gco-gpu-runner" in json.dumps(statements["AnswerOwnTasks"]["Resource"])
    assert "table/gco-inference-endpoints" in json.dumps(statements["EndpointTable"]["Resource"])


def test_one_launch_template_per_zone_each_in_its_subnet(synthesized: Synthesized) -> None:
    template = synthesized.template_json("gco-runner")
    launches = [r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"]
    assert [t["Properties"]["LaunchTemplateName"] for t in launches] == ["gco-runner", "gco-runner-2"]
    subnets = [
        json.dumps(t["Properties"]["LaunchTemplateData"]["NetworkInterfaces"][0]["SubnetId"])
        for t in launches
    ]
    assert "privateSubnet1" in subnets[0] and "privateSubnet2" in subnets[1]


def test_launch_template_holds_the_private_network_and_the_workflow_tag(synthesized: Synthesized) -> None:
    template = synthesized.template_json("gco-runner")
    launch = next(r for r in template["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate")
    data = launch["Properties"]["LaunchTemplateData"]
    # EC2 refuses instance-level groups beside interfaces: the group must be on the interface only.
    assert "SecurityGroupIds" not in data
    [interface] = data["NetworkInterfaces"]
    assert interface["DeviceIndex"] == 0 and interface["AssociatePublicIpAddress"] is False
    assert "privateSubnet1" in json.dumps(interface["SubnetId"])
    [group] = interface["Groups"]
    group_id = group["Fn::GetAtt"][0]
    assert template["Resources"][group_id]["Type"] == "AWS::EC2::SecurityGroup"
    [own_tags] = [
        t["Tags"] for t in launch["Properties"]["TagSpecifications"] if t["ResourceType"] == "launch-template"
    ]
    assert {"Key": "gco-runner", "Value": "gco-gpu-runner"} in own_tags
    assert {"Key": "gco:deployment", "Value": "gco"} in own_tags
    # The workflow may launch only into groups carrying the deployment tag: this one does.
    assert {"Key": "gco:deployment", "Value": "gco"} in template["Resources"][group_id]["Properties"]["Tags"]


def test_security_group_has_no_inbound_rule_and_reaches_the_home_cluster_api(
    synthesized: Synthesized, runner_template: Any
) -> None:
    runner_template.has_resource_properties(
        "AWS::EC2::SecurityGroup", {"SecurityGroupIngress": Match.absent()}
    )
    resources = synthesized.template_json("gco-runner")["Resources"]
    [group_id] = [k for k, r in resources.items() if r["Type"] == "AWS::EC2::SecurityGroup"]
    rules = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::EC2::SecurityGroupIngress"]
    # Only onto the home cluster's groups (as the reconciler is admitted), from the runner, HTTPS.
    assert len(rules) == 2
    for rule in rules:
        assert (rule["IpProtocol"], rule["FromPort"], rule["ToPort"]) == ("tcp", 443, 443)
        assert rule["SourceSecurityGroupId"] == {"Fn::GetAtt": [group_id, "GroupId"]}
        assert render(rule["GroupId"]).startswith(f"IMPORT(gco-regional-{HOME}:ExportsOutputFnGetAttEks")


def test_matrix_statements_name_exactly_the_gco_resources(runner_template: Any) -> None:
    statements = runner_statements(runner_template)
    bucket = "IMPORT(gco-global:ExportsOutputFnGetAttEvidenceBucketC67FF768Arn6F25C0BE)"
    listing = statements["ListRuns"]
    assert (listing["Action"], resources_of(listing)) == ("s3:ListBucket", [bucket])
    assert listing["Condition"] == {"StringLike": {"s3:prefix": "runs/*"}}  # never the whole bucket
    assert (statements["ReadRuns"]["Action"], resources_of(statements["ReadRuns"])) == (
        "s3:GetObject", [f"{bucket}/runs/*"],
    )  # fmt: skip
    assert statements["DescribeClusters"]["Action"] == "eks:DescribeCluster"
    assert resources_of(statements["DescribeClusters"]) == [
        f"arn:aws:eks:{region}:ACCOUNT:cluster/gco-{region}" for region in (HOME, OTHER)
    ]
    assert statements["ReadRegionalOutputs"]["Action"] == "cloudformation:DescribeStacks"
    assert resources_of(statements["ReadRegionalOutputs"]) == [
        f"arn:aws:cloudformation:{region}:ACCOUNT:stack/{regional_stack_name(region, 'gco')}/*"
        for region in (HOME, OTHER)
    ]
    assert statements["InvokeFrontDoors"]["Action"] == "execute-api:Invoke"
    home, other = resources_of(statements["InvokeFrontDoors"])
    assert home.startswith(
        f"arn:aws:execute-api:{HOME}:ACCOUNT:IMPORT(gco-regional-{HOME}:ExportsOutputRefFrontDoorApi"
    )
    assert home.endswith(")/*/*/inference/*")
    assert other == f"arn:aws:execute-api:{OTHER}:ACCOUNT:*/*/*/inference/*"
    # What `gco matrix run` does to the endpoint table: create, read, update, delete, list (Scan).
    table = set(statements["EndpointTable"]["Action"])
    assert {"dynamodb:PutItem", "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} <= table
    assert {"dynamodb:Query", "dynamodb:Scan"} <= table
    # Reads stay reads: no new write action anywhere but the If-None-Match object creation.
    writes = [s["Sid"] for s in statements.values() if "s3:PutObject" in json.dumps(s["Action"])]
    assert writes == ["CreateEvidenceAndOwnRunObjects"]


def test_the_regional_stacks_are_named_as_the_matrix_reads_them(synthesized: Synthesized) -> None:
    for region, stack in synthesized.gco.regional.items():
        assert stack.stack_name == regional_stack_name(region, "gco")


def test_image_context_is_exactly_what_the_dockerfile_copies(synthesized: Synthesized) -> None:
    """The build context CDK stages (docker-ignore rules applied) holds the COPY sources and nothing else:
    no tests, stacks, virtual environments or node_modules travel to the image build."""
    manifest = json.loads((Path(synthesized.assembly.directory) / "gco-runner.assets.json").read_text())
    [image] = manifest["dockerImages"].values()
    context = Path(synthesized.assembly.directory) / image["source"]["directory"]
    dockerfile = (context / image["source"]["dockerFile"]).read_text()
    copied = {
        source.rstrip("/")
        for line in dockerfile.splitlines()
        if line.startswith("COPY ")
        for source in line.split()[1:-1]
    }
    assert copied == {"pyproject.toml", "README.md", "gco", "gpu_runner"}
    assert {path.name for path in context.iterdir()} == copied
    assert (context / "gco" / "bench" / "rounds" / "run.py").is_file()
    assert not list(context.rglob("__pycache__")) and not list(context.rglob("*.pyc"))
