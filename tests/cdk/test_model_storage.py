"""The GPU nodes' model storage from the deployment config, synthesized: a group on instance store boots
from the RAID0 launch template with the small root volume, a group of a type without instance store
(p3) boots from a template whose root volume is `gpu_nodes.model_disk_gib`, and the reconciler is told
that size. Both templates close the instance metadata service to pods (hop limit 1)."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App
from aws_cdk.assertions import Match, Template

from gco.reconcile.environment import GPU_DISK_GIB_ENV
from stacks.app import build_app
from stacks.config import parse_config
from tests.cdk.conftest import HOME, cdk_json_config
from tests.cdk.test_cluster_addons import reconciler_env

# IMDSv2 only, its token one hop: the node's processes and hostNetwork pods, no pod's containers.
NODE_ONLY_IMDS = {"HttpEndpoint": "enabled", "HttpTokens": "required", "HttpPutResponseHopLimit": 1}


def root_volume(size_gib: int) -> dict[str, object]:
    return {
        "DeviceName": "/dev/xvda",
        "Ebs": {"VolumeSize": size_gib, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
    }


def test_a_group_without_instance_store_gets_the_configured_model_disk(tmp_path: Path) -> None:
    raw = {**cdk_json_config(), "regions": [HOME], "table_replicas": False}
    raw["gpu_nodes"] = {
        **raw["gpu_nodes"],
        "instance_types": ["g6e.xlarge", "p3.8xlarge"],
        "disk_size_gib": 100,
        "model_disk_gib": 800,
    }
    gco = build_app(parse_config(raw), app=App(outdir=str(tmp_path)), nag=False)
    template = Template.from_stack(gco.regional[HOME])
    synthesized = dict(template.to_json())
    resources = synthesized["Resources"]
    groups = {
        r["Properties"]["NodegroupName"]: r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EKS::Nodegroup"
    }
    # `-ebs`: its pods' storage is the root volume, which now lives in its launch template.
    v100 = groups[f"gco-{HOME}-gpu-v100-ebs"]
    assert v100["InstanceTypes"] == ["p3.8xlarge"] and "DiskSize" not in v100
    template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": {
                "BlockDeviceMappings": [root_volume(800)],
                "MetadataOptions": NODE_ONLY_IMDS,
                "UserData": Match.absent(),  # no instance store to stripe
            }
        },
    )
    data = resources[v100["LaunchTemplate"]["Id"]["Ref"]]["Properties"]["LaunchTemplateData"]
    assert data["BlockDeviceMappings"] == [root_volume(800)] and data["MetadataOptions"] == NODE_ONLY_IMDS
    l40s = groups[f"gco-{HOME}-gpu-l40s-nvme"]  # the instance store groups keep their names
    assert "DiskSize" not in l40s
    data = resources[l40s["LaunchTemplate"]["Id"]["Ref"]]["Properties"]["LaunchTemplateData"]
    assert data["BlockDeviceMappings"] == [root_volume(100)] and data["MetadataOptions"] == NODE_ONLY_IMDS
    assert "strategy: RAID0" in data["UserData"]["Fn::Base64"]
    template.resource_count_is("AWS::EC2::LaunchTemplate", 2)  # one per GPU group, none for the system
    # What refusals and the CLI size against.
    assert reconciler_env(synthesized)[GPU_DISK_GIB_ENV] == "800"
