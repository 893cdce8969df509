"""The GPU node groups' launch templates: the pods' ephemeral storage (instance store or the root
volume, gco.reconcile.node_storage) and the instance metadata service closed to the pods.

For a group whose every instance type has NVMe instance store, a launch template whose user data
holds an EKS AL2023 `NodeConfig` with `spec.instance.localStorage.strategy: RAID0`: nodeadm makes one
RAID0 array of the instance store disks and puts the kubelet's and containerd's directories on it
(awslabs.github.io/amazon-eks-ami/nodeadm/doc/api/#localstorageoptions), so a pod's `emptyDir` and
writable layer, where the model is synced or downloaded, get the whole instance store rather than
the root volume. EKS merges a managed node group's launch template user data with its own when it
is a MIME multi-part document (docs.aws.amazon.com/eks/latest/userguide/launch-templates.html,
"Amazon EC2 user data"); a part of type `application/node.eks.aws` is a NodeConfig for nodeadm.
A group with an instance type without instance store (p3) gets a template with no user data: its
root volume (`model_root_gib`) is then its pods' model storage.

With a launch template the node group cannot set its disk size, so each template sets the root
volume (gp3, encrypted, deleted with the instance). Every GPU group has one, because each template
also holds `METADATA_OPTIONS`: IMDSv2 required, with a PUT response hop limit of 1. The token's
answer then dies at the hop into a pod's network namespace, so a container of an endpoint pod cannot
read the node role's credentials from 169.254.169.254; processes of the host's network namespace
(the kubelet, nodeadm, `hostNetwork` pods) still can (EKS Best Practices Guide, "Identity and
Access Management", "Restrict access to the instance profile assigned to the worker node",
docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html; EKS User Guide,
"Amazon EKS security best practices", docs.aws.amazon.com/eks/latest/userguide/best-practices-security.html:
a managed node group without a custom launch template cannot be restricted so). Without a template,
EKS generates one whose hop limit is 2 ("If you deploy a managed node group without using a custom
launch template, this value is automatically set for the node group in the default launch template",
the "Metadata response hop limit" note of docs.aws.amazon.com/eks/latest/userguide/launch-templates.html),
which lets every pod reach the node's role.

What runs on the GPU nodes, and how it reaches AWS with the hop limit at 1:

- VPC CNI (`aws-node`, with its network policy agent): `hostNetwork: true` (aws/amazon-vpc-cni-k8s
  `charts/aws-vpc-cni/templates/daemonset.yaml`), so it keeps using the node role through IMDS, as
  the best practices guide above describes. kube-proxy calls no AWS API.
- EKS Pod Identity agent: `hostNetwork: true` (aws/eks-pod-identity-agent
  `charts/eks-pod-identity-agent/templates/daemonset.yaml`); it serves pods on 169.254.170.23
  (docs.aws.amazon.com/eks/latest/userguide/pod-id-agent-setup.html) and calls
  `eks-auth:AssumeRoleForPodIdentity` with the node role (docs.aws.amazon.com/eks/latest/userguide/
  pod-id-how-it-works.html), both from the host's network namespace.
- CloudWatch agent of the Amazon CloudWatch Observability add-on: `hostNetwork: true` in its
  `AmazonCloudWatchAgent` resource (aws-observability/helm-charts `charts/amazon-cloudwatch-observability/
  templates/linux/cloudwatch-agent-custom-resource.yaml`), its Region set by the add-on, its
  credentials from its Pod Identity role (`stacks/constructs/observability.py`). Fluent Bit is off
  (`gco.deployment.container_insights`).
- DCGM exporters (the add-on's, aws-observability/helm-charts `.../linux/dcgm-exporter-daemonset.yaml`,
  and with `keda_regions` NVIDIA's chart) and the NVIDIA device plugin: no AWS call; they read the
  GPUs, the kubelet's pod-resources socket and its device plugin socket
  (kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/).
- The endpoint pods: the model sync's AWS CLI takes its credentials from the pod's Pod Identity
  association (`gco.reconcile.model_sources`) and its Region from `AWS_REGION` and
  `AWS_DEFAULT_REGION`, which the renderer sets (gco.reconcile.render_pods), since the CLI would
  otherwise ask IMDS for it. The engines call no AWS API. No EBS CSI driver is installed
  (docs/deploy.md, "Model storage").

The system group keeps EKS's generated template (hop limit 2): the autoscaler, the load balancer
controller, KEDA and Prometheus run there (their Region from their chart values, their credentials
from Pod Identity), and so does an endpoint with `gpu_count: 0`. Its pods are kept from IMDS by the
endpoint namespace's egress NetworkPolicy `gco-no-instance-metadata` (gco.reconcile.render_network),
which the VPC CNI's network policy agent enforces on every node group alike.
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


# IMDSv2 only, its token's answer one hop: the node's own processes, not its pods (module docstring).
METADATA_OPTIONS = ec2.CfnLaunchTemplate.MetadataOptionsProperty(
    http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
)


def gpu_launch_template(
    scope: Construct, construct_id: str, *, instance_types: list[str], disk_size_gib: int
) -> ec2.CfnLaunchTemplate:
    """The launch template of a GPU group: its root volume of `disk_size_gib` and `METADATA_OPTIONS`,
    and, where every type has instance store (`uses_instance_store`), the RAID0 `NodeConfig` that
    puts the pods' ephemeral storage on it."""
    user_data = Fn.base64(NODE_CONFIG) if uses_instance_store(instance_types) else None
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
            metadata_options=METADATA_OPTIONS,
            user_data=user_data,
        ),
    )
