"""The reconciler's way into its Region's cluster, written from `gco.reconcile.access` (the one grant).

- An EKS access entry (type STANDARD, no access policy) puts the reconciler's IAM role in the
  Kubernetes group `RECONCILER_GRANT.group`;
- the RBAC objects of the grant (a ClusterRole for its own namespaces by name, a Role per namespace
  with exactly the kinds and verbs it uses, each bound to that group), gco's namespaces (which the
  RoleBindings live in; the reconciler also applies them, idempotently) and the IngressClass the
  routes name, applied through the cluster's kubectl provider.

EKS access policies are not used: `AmazonEKSEditPolicy` does not reach `keda.sh` objects and is wider
than what the reconciler does.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from gco.reconcile.access import RECONCILER_GRANT, Grant
from gco.reconcile.render_proxy import ingress_class
from gco.reconcile.system import namespace_objects


def cluster_objects(grant: Grant = RECONCILER_GRANT) -> list[dict[str, Any]]:
    """What the stack applies for the reconciler: namespaces first, the IngressClass, then RBAC."""
    return [*namespace_objects(grant.namespaces), ingress_class(), *grant.rbac_objects()]


class ReconcilerClusterAccess(Construct):
    """The access entry of the reconciler's role, and the RBAC it is bound by."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        role_arn: str,
        grant: Grant = RECONCILER_GRANT,
    ) -> None:
        super().__init__(scope, construct_id)
        self.entry = eks.CfnAccessEntry(
            self,
            "Entry",
            cluster_name=cluster.cluster_name,
            principal_arn=role_arn,
            kubernetes_groups=[grant.group],
            type="STANDARD",
        )
        self.objects = cluster_objects(grant)
        self.manifest = eks.KubernetesManifest(
            self, "Rbac", cluster=cluster, manifest=self.objects, overwrite=True
        )
