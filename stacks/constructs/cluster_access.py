"""The ways into a Region's cluster, written from `gco.reconcile.access` (the one definition of grants).

- The reconciler: an EKS access entry (type STANDARD, no access policy) puts its IAM role in the
  Kubernetes group `RECONCILER_GRANT.group`; the RBAC objects of the grant (a ClusterRole for its own
  namespaces by name, a Role per namespace with exactly the kinds and verbs it uses, each bound to
  that group), gco's namespaces (which the RoleBindings live in; the reconciler also applies them,
  idempotently) and the IngressClass the routes name, applied through the cluster's kubectl provider.
- The GPU runner (a matrix job reads what the reconciler made): an access entry for its instance
  role, by the role's fixed name (`RunnerNames.instance_role`, the global stack's role, so no
  reference crosses Regions), in the group `RUNNER_GRANT.group`, and that grant's Roles (get and list
  of the reconciler's kinds in the same namespaces, nothing else), bound to it.

EKS access policies are not used: `AmazonEKSEditPolicy` does not reach `keda.sh` objects and is wider
than what the reconciler does; `AmazonEKSViewPolicy` would let the runner read every namespace.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_eks_v2 as eks
from constructs import Construct

from gco.endpoints.namespaces import SYSTEM_NAMESPACE
from gco.reconcile.access import RECONCILER_GRANT, RUNNER_GRANT, Grant
from gco.reconcile.model_sources import MODEL_SERVICE_ACCOUNT
from gco.reconcile.objects import MANAGED_BY, MANAGER
from gco.reconcile.proxy.render_proxy import ingress_class
from gco.reconcile.system import namespace_objects


def model_service_accounts(grant: Grant = RECONCILER_GRANT) -> list[dict[str, Any]]:
    """The endpoint pods' service account in each endpoint namespace (its Pod Identity role: the
    `ModelAccess` construct; the renderer names it on every endpoint pod)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {
                "name": MODEL_SERVICE_ACCOUNT,
                "namespace": namespace,
                "labels": {MANAGED_BY: MANAGER},
            },
        }
        for namespace in grant.namespaces
        if namespace != SYSTEM_NAMESPACE
    ]


def cluster_objects(grant: Grant = RECONCILER_GRANT, reader: Grant = RUNNER_GRANT) -> list[dict[str, Any]]:
    """What the stack applies: namespaces first, the endpoint pods' service accounts, the IngressClass,
    then the RBAC of both grants."""
    return [
        *namespace_objects(grant.namespaces),
        *model_service_accounts(grant),
        ingress_class(),
        *grant.rbac_objects(),
        *reader.rbac_objects(),
    ]


def _access_entry(
    scope: Construct, construct_id: str, cluster: eks.ICluster, role_arn: str, grant: Grant
) -> eks.CfnAccessEntry:
    return eks.CfnAccessEntry(
        scope,
        construct_id,
        cluster_name=cluster.cluster_name,
        principal_arn=role_arn,
        kubernetes_groups=[grant.group],
        type="STANDARD",
    )


class ClusterAccess(Construct):
    """The access entries of the reconciler's and the runner's roles, and the RBAC they are bound by."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        role_arn: str,
        runner_role_arn: str,
        grant: Grant = RECONCILER_GRANT,
        runner_grant: Grant = RUNNER_GRANT,
    ) -> None:
        super().__init__(scope, construct_id)
        self.entry = _access_entry(self, "Entry", cluster, role_arn, grant)
        self.runner_entry = _access_entry(self, "RunnerEntry", cluster, runner_role_arn, runner_grant)
        self.objects = cluster_objects(grant, runner_grant)
        self.manifest = eks.KubernetesManifest(
            self, "Rbac", cluster=cluster, manifest=self.objects, overwrite=True
        )
