"""The GPU node groups' launch template: instance store as the node's ephemeral storage
(gco.reconcile.node_storage).

For a group whose every instance type has NVMe instance store, a launch template whose user data
holds an EKS AL2023 `NodeConfig` with `spec.instance.localStorage.strategy: RAID0`: nodeadm makes one
RAID0 array of the instance store disks and puts the kubelet's and containerd's directories on it
(awslabs.github.io/amazon-eks-ami/nodeadm/doc/api/#localstorageoptions), so a pod's `emptyDir` and
writable layer, where the model is synced or downloaded, get the whole instance store rather than
the root volume. EKS merges a managed node group's launch template user data with its own when it
is a MIME multi-part document (docs.aws.amazon.com/eks/latest/userguide/launch-templates.html,
"Amazon EC2 user data"); a part of type `application/node.eks.aws` is a NodeConfig for nodeadm.

With a launch template the node group cannot set its disk size, so the template sets the root volume
(`disk_size_gib`: gp3, encrypted, deleted with the instance) and requires IMDSv2 with a hop limit of 2
(pods on the node reach the instance metadata only through the Pod Identity agent). A group with an
instance type without instance store (p3) keeps the node group's own root volume, which is then its
pods' model storage.
"""

from __future__ import annotations

from aws_cdk import Fn
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from gco.reconcile.node_storage import instance_store_gib

ROOT_DEVICE = "/dev/xvda"  # the AL2023 EKS AMIs' root device
BOUNDARY = "GCO-NODECONFIG"
NODE_CONFIG = f"""MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="{BOUNDARY}"

--{BOUNDARY}
Content-Type: application/node.eks.aws

---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    localStorage:
      strategy: RAID0

--{BOUNDARY}--
"""


def uses_instance_store(instance_types: list[str]) -> bool:
    """Whether every instance type of a group has instance store (then its RAID0 holds pods' storage)."""
    return bool(instance_types) and all(instance_store_gib(item) > 0 for item in instance_types)


def instance_store_template(
    scope: Construct, construct_id: str, *, disk_size_gib: int
) -> ec2.CfnLaunchTemplate:
    """The launch template of a GPU group whose instance store holds the pods' ephemeral storage."""
    return ec2.CfnLaunchTemplate(
        scope,
        construct_id,
        launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
            block_device_mappings=[
                ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
                    device_name=ROOT_DEVICE,
                    ebs=ec2.CfnLaunchTemplate.EbsProperty(
                        volume_size=disk_size_gib,
                        volume_type="gp3",
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
            metadata_options=ec2.CfnLaunchTemplate.MetadataOptionsProperty(
                http_tokens="required", http_put_response_hop_limit=2
            ),
            user_data=Fn.base64(NODE_CONFIG),
        ),
    )
