"""GPU pods schedule from zero: node groups labelled and tainted from gco.reconcile.nodes, the pods
rendered from the same definition, the device plugin and the Cluster Autoscaler in every Region."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match

from gco.deployment.capacity import gpu_models
from gco.deployment.charts import CHART_RELEASES
from gco.deployment.kubernetes import CLUSTER_AUTOSCALER_TAGS, DEFAULT_KUBERNETES_VERSION
from gco.reconcile.nodes import CAPACITY_LABEL, GPU_TAINT, TEMPLATE_LABEL_TAG, TEMPLATE_TAINT_TAG
from gco.reconcile.render import render
from stacks.config import parse_config
from stacks.constructs.gpu_nodes import group_id
from stacks.constructs.node_storage import uses_instance_store
from tests.cdk.conftest import HOME, OTHER, Synthesized, cdk_json_config
from tests.unit.reconcile.records import EAST, make_record

# IMDSv2 only, its token one hop: the node's processes and hostNetwork pods, no pod's containers.
NODE_ONLY_IMDS = {"HttpEndpoint": "enabled", "HttpTokens": "required", "HttpPutResponseHopLimit": 1}
EKS_EFFECTS = {
    "NO_SCHEDULE": "NoSchedule",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
    "NO_EXECUTE": "NoExecute",
}


def node_groups(template: dict[str, Any]) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::EKS::Nodegroup"]


def schedulable(pod: dict[str, Any], group: dict[str, Any]) -> bool:
    """Whether the scheduler may place `pod` on a node of `group`: every selected label is one the
    group itself gives its nodes (none synthesized by EKS or the autoscaler), and every taint is tolerated."""
    labels = group.get("Labels", {})
    if any(labels.get(key) != value for key, value in pod.get("nodeSelector", {}).items()):
        return False
    for taint in group.get("Taints", []):
        effect = EKS_EFFECTS[taint["Effect"]]
        if not any(
            t.get("key") == taint["Key"]
            and t.get("effect") in (None, effect)
            and (t.get("operator") == "Exists" or t.get("value") == taint.get("Value"))
            for t in pod.get("tolerations", [])
        ):
            return False
    return True


def pod_of(spec: dict[str, Any]) -> dict[str, Any]:
    deployment = next(o for o in render(make_record(spec), EAST) if o["kind"] == "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def test_a_gpu_type_pod_schedules_only_on_its_node_group(synthesized: Synthesized) -> None:
    groups = node_groups(synthesized.template_json(f"gco-regional-{OTHER}"))
    gpu_groups = [g for g in groups if g["AmiType"] == "AL2023_x86_64_NVIDIA"]
    assert gpu_groups
    for spelling in ("L40S", "l40s"):
        pod = pod_of({"gpu_count": 1, "gpu_type": spelling})
        assert [g["NodegroupName"] for g in groups if schedulable(pod, g)] == [f"gco-{OTHER}-gpu-l40s-nvme"]
    # A model no node group carries schedules nowhere (it stays pending; nothing can scale up for it).
    assert not any(schedulable(pod_of({"gpu_count": 1, "gpu_type": "H100"}), g) for g in groups)


def test_a_gpu_pod_without_a_type_tolerates_every_gpu_group(synthesized: Synthesized) -> None:
    groups = node_groups(synthesized.template_json(f"gco-regional-{OTHER}"))
    pod = pod_of({"gpu_count": 1})
    assert all(schedulable(pod, g) for g in groups)
    cpu_pod = pod_of({"gpu_count": 0})
    assert [g["NodegroupName"] for g in groups if schedulable(cpu_pod, g)] == [f"gco-{OTHER}-system"]


def test_gpu_groups_are_split_by_model_and_tainted() -> None:
    assert gpu_models(["g6e.xlarge", "g5.2xlarge", "g6e.2xlarge"]) == {
        "l40s": ["g6e.xlarge", "g6e.2xlarge"],
        "a10g": ["g5.2xlarge"],
    }
    assert group_id("l40s") == "GpuL40sNodes"
    assert group_id("p6-b200") == "GpuP6b200Nodes"


def test_each_gpu_model_gets_its_node_group(tmp_path: Any) -> None:
    from aws_cdk import App
    from aws_cdk.assertions import Template

    from stacks.app import build_app
    from tests.cdk.synth_cache import cdk_json_config

    raw = {**cdk_json_config(), "regions": [HOME], "table_replicas": False}
    raw["gpu_nodes"] = {**raw["gpu_nodes"], "instance_types": ["g6e.xlarge", "g5.xlarge"]}
    gco = build_app(parse_config(raw), app=App(outdir=str(tmp_path)), nag=False)
    template = Template.from_stack(gco.regional[HOME])
    template.resource_count_is("AWS::EKS::Nodegroup", 3)
    for model, types in (("l40s", ["g6e.xlarge"]), ("a10g", ["g5.xlarge"])):
        template.has_resource_properties(
            "AWS::EKS::Nodegroup",
            {
                "NodegroupName": f"gco-{HOME}-gpu-{model}-nvme",  # g6e and g5: instance store
                "InstanceTypes": types,
                "Labels": Match.object_like({"gco.io/gpu-type": model}),
                "Taints": [{"Effect": "NO_SCHEDULE", "Key": GPU_TAINT.key, "Value": GPU_TAINT.value}],
            },
        )


def helm_charts(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["Chart"]: r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"
    }


def test_device_plugin_runs_on_gpu_nodes_in_every_region(synthesized: Synthesized) -> None:
    for region in (HOME, OTHER):
        charts = helm_charts(synthesized.template_json(f"gco-regional-{region}"))
        plugin = charts["nvidia-device-plugin"]
        assert plugin["Version"] == CHART_RELEASES["nvidia-device-plugin"].version
        values = json.loads(plugin["Values"])
        assert values["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert GPU_TAINT.toleration() in values["tolerations"]


def test_cluster_autoscaler_discovers_and_may_scale_only_this_cluster(synthesized: Synthesized) -> None:
    template = synthesized.template(f"gco-regional-{OTHER}")
    chart = helm_charts(synthesized.template_json(f"gco-regional-{OTHER}"))["cluster-autoscaler"]
    values = json.loads(chart["Values"])
    assert values["autoDiscovery"] == {"clusterName": f"gco-{OTHER}"}
    assert values["awsRegion"] == OTHER
    # The autoscaler's minor version is the cluster's (kubernetes/autoscaler's compatibility rule).
    assert values["image"]["tag"] == CLUSTER_AUTOSCALER_TAGS[DEFAULT_KUBERNETES_VERSION]
    assert values["image"]["tag"].startswith(f"v{DEFAULT_KUBERNETES_VERSION}.")
    assert chart["Namespace"] == "kube-system"
    template.has_resource_properties(
        "AWS::EKS::PodIdentityAssociation",
        {"Namespace": "kube-system", "ServiceAccount": values["rbac"]["serviceAccount"]["name"]},
    )
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "RoleName": f"gco-{OTHER}-cluster-autoscaler",
            "AssumeRolePolicyDocument": {
                "Statement": [
                    Match.object_like(
                        {
                            "Action": ["sts:AssumeRole", "sts:TagSession"],
                            "Principal": {"Service": "pods.eks.amazonaws.com"},
                        }
                    )
                ]
            },
        },
    )
    template.has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {
            "ManagedPolicyName": f"gco-{OTHER}-cluster-autoscaler",
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {"Sid": "DescribeOwnNodegroups", "Action": "eks:DescribeNodegroup"}
                        ),
                        Match.object_like(
                            {
                                "Sid": "ScaleOwnNodeGroups",
                                "Action": [
                                    "autoscaling:SetDesiredCapacity",
                                    "autoscaling:TerminateInstanceInAutoScalingGroup",
                                ],
                                "Condition": {
                                    "StringEquals": {"aws:ResourceTag/eks:cluster-name": f"gco-{OTHER}"}
                                },
                                "Resource": {
                                    "Fn::Join": [
                                        "",
                                        Match.array_with([":autoScalingGroup:*:autoScalingGroupName/*"]),
                                    ]
                                },
                            }
                        ),
                    ]
                )
            },
        },
    )


def test_every_group_labels_its_capacity_and_publishes_the_autoscaler_template(
    synthesized: Synthesized,
) -> None:
    """A group at zero nodes tells the Cluster Autoscaler what its nodes would carry: its own labels
    (gco's capacity label among them, matching its capacity type) and the node-template tags."""
    groups = node_groups(synthesized.template_json(f"gco-regional-{OTHER}"))
    for group in groups:
        kind = {"ON_DEMAND": "on-demand", "SPOT": "spot"}[group.get("CapacityType", "ON_DEMAND")]
        assert group["Labels"][CAPACITY_LABEL] == kind
        tags = group["Tags"]
        assert {TEMPLATE_LABEL_TAG + k: v for k, v in group["Labels"].items()}.items() <= tags.items()
        for taint in group.get("Taints", []):
            effect = EKS_EFFECTS[taint["Effect"]]
            assert tags[TEMPLATE_TAINT_TAG + taint["Key"]] == f"{taint['Value']}:{effect}"
    spot = pod_of({"gpu_count": 1, "capacity_type": "spot"})
    assert not any(schedulable(spot, g) for g in groups if g.get("CapacityType") != "SPOT")


def test_gpu_groups_with_instance_store_keep_the_pods_storage_on_it(synthesized: Synthesized) -> None:
    """A GPU group whose types all have NVMe instance store boots with nodeadm's RAID0 of it (the
    kubelet's ephemeral storage), its root volume and IMDSv2 in the launch template."""
    template = synthesized.template_json(f"gco-regional-{OTHER}")
    resources = template["Resources"]
    gpu_groups = [g for g in node_groups(template) if g["AmiType"] == "AL2023_x86_64_NVIDIA"]
    assert gpu_groups and all(uses_instance_store(g["InstanceTypes"]) for g in gpu_groups)
    for group in gpu_groups:
        assert "DiskSize" not in group
        template_id = group["LaunchTemplate"]["Id"]["Ref"]
        data = resources[template_id]["Properties"]["LaunchTemplateData"]
        assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
        (root,) = data["BlockDeviceMappings"]
        config = parse_config(cdk_json_config())
        assert root["Ebs"] == {
            "VolumeSize": config.gpu_nodes.disk_size_gib,
            "VolumeType": "gp3",
            "Encrypted": True,
            "DeleteOnTermination": True,
        }
        user_data = data["UserData"]["Fn::Base64"]
        assert "Content-Type: application/node.eks.aws" in user_data and "strategy: RAID0" in user_data
    (system,) = [g for g in node_groups(template) if g["AmiType"] != "AL2023_x86_64_NVIDIA"]
    assert "LaunchTemplate" not in system and system["DiskSize"] > 0


def test_every_gpu_node_group_closes_the_instance_metadata_to_its_pods(synthesized: Synthesized) -> None:
    """IMDSv2 only, hop limit 1, on every GPU group of every Region: a container of an endpoint pod
    cannot read the node role's credentials (stacks/constructs/node_storage.py); the system group keeps
    EKS's generated template."""
    for region in (HOME, OTHER):
        template = synthesized.template_json(f"gco-regional-{region}")
        gpu_groups = [g for g in node_groups(template) if g["AmiType"] == "AL2023_x86_64_NVIDIA"]
        assert gpu_groups
        for group in gpu_groups:
            launch_template = template["Resources"][group["LaunchTemplate"]["Id"]["Ref"]]
            assert launch_template["Type"] == "AWS::EC2::LaunchTemplate"
            options = launch_template["Properties"]["LaunchTemplateData"]["MetadataOptions"]
            assert options == NODE_ONLY_IMDS


def test_a_group_uses_instance_store_only_where_every_type_has_it() -> None:
    assert not uses_instance_store(["p3.8xlarge"]) and not uses_instance_store(["g6e.xlarge", "p3.2xlarge"])
    assert uses_instance_store(["g6e.xlarge", "g6e.2xlarge"])
