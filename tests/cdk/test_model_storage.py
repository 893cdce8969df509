"""The GPU nodes' model storage from the deployment config, synthesized: a group on instance store boots
from the RAID0 launch template with the small root volume, a group of a type without instance store
(p3) gets `gpu_nodes.model_disk_gib` as its root volume, and the reconciler is told that size."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import App
from aws_cdk.assertions import Template

from gco.reconcile.environment import GPU_DISK_GIB_ENV
from stacks.app import build_app
from stacks.config import parse_config
from tests.cdk.conftest import HOME, cdk_json_config
from tests.cdk.test_cluster_addons import reconciler_env


def test_a_group_without_instance_store_gets_the_configured_model_disk(tmp_path: Path) -> None:
    raw = {**cdk_json_config(), "regions": [HOME], "table_replicas": False}
    raw["gpu_nodes"] = {
        **raw["gpu_nodes"],
        "instance_types": ["g6e.xlarge", "p3.8xlarge"],
        "disk_size_gib": 100,
        "model_disk_gib": 800,
    }
    gco = build_app(parse_config(raw), app=App(outdir=str(tmp_path)), nag=False)
    template = dict(Template.from_stack(gco.regional[HOME]).to_json())
    groups = {
        r["Properties"]["NodegroupName"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup"
    }
    v100 = groups[f"gco-{HOME}-gpu-v100"]  # no `-nvme`: its pods' storage is the root volume
    assert v100["InstanceTypes"] == ["p3.8xlarge"]
    assert v100["DiskSize"] == 800 and "LaunchTemplate" not in v100
    l40s = groups[f"gco-{HOME}-gpu-l40s-nvme"]
    assert "DiskSize" not in l40s
    data = template["Resources"][l40s["LaunchTemplate"]["Id"]["Ref"]]["Properties"]["LaunchTemplateData"]
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 100
    assert reconciler_env(template)[GPU_DISK_GIB_ENV] == "800"  # what refusals and the CLI size against
