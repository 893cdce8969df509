"""What endpoint pods may read: an EKS Pod Identity role limited to the model prefixes in `cdk.json`.

Every endpoint pod runs under the service account `gco.reconcile.model_sources.MODEL_SERVICE_ACCOUNT` (the
renderer sets it; `stacks/constructs/cluster_access.py` creates it in each endpoint namespace). This construct
associates that account, in each namespace, with one role whose policy lists and reads only the
configured prefixes (`s3:ListBucket` on each bucket with an `s3:prefix` condition, `s3:GetObject`
under each prefix) and decrypts only with the configured KMS keys, and only through S3
(`kms:ViaService`). Without configured sources the role has no policy at all: pods get an identity
that can read nothing, and the reconciler refuses any `model_source`.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from gco.reconcile.model_sources import MODEL_SERVICE_ACCOUNT, S3Prefix
from stacks.constructs.iam import managed_role, statement
from stacks.constructs.ingress import POD_IDENTITY_SERVICE


def object_arn(source: S3Prefix) -> str:
    """The object ARN pattern under one prefix (`arn:<partition>:s3:::bucket/key*`)."""
    return f"arn:{Aws.PARTITION}:s3:::{source.bucket}/{source.key}*"


def model_statements(
    sources: Sequence[S3Prefix], kms_keys: Sequence[str], region: str
) -> list[iam.PolicyStatement]:
    """List and read under each prefix, decrypt with each key through S3; nothing without sources."""
    if not sources:
        return []
    buckets: dict[str, list[str]] = {}
    for source in sources:
        buckets.setdefault(source.bucket, []).append(f"{source.key}*")
    found = [
        statement(
            f"ListModels{index}",
            ["s3:ListBucket"],
            [f"arn:{Aws.PARTITION}:s3:::{bucket}"],
            StringLike={"s3:prefix": prefixes},
        )
        for index, (bucket, prefixes) in enumerate(buckets.items())
    ]
    found.append(statement("ReadModels", ["s3:GetObject"], [object_arn(source) for source in sources]))
    if kms_keys:
        found.append(
            statement(
                "DecryptModels",
                ["kms:Decrypt"],
                list(kms_keys),
                StringEquals={"kms:ViaService": f"s3.{region}.amazonaws.com"},
            )
        )
    return found


class ModelAccess(Construct):
    """The endpoint pods' Pod Identity role and its association in each endpoint namespace."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        cluster: eks.ICluster,
        namespaces: Sequence[str],
        sources: Sequence[S3Prefix],
        kms_keys: Sequence[str],
        pod_identity_agent: eks.Addon,
    ) -> None:
        super().__init__(scope, construct_id)
        region = Stack.of(self).region
        description = "gco endpoint pods: read the configured model prefixes only"
        statements = model_statements(sources, kms_keys, region)
        role_name = f"{name}-{region}"
        if statements:
            self.role, _ = managed_role(
                self,
                "Role",
                role_name=role_name,
                service=POD_IDENTITY_SERVICE,
                description=description,
                statements=statements,
                session_tags=True,
            )
        else:
            principal = iam.ServicePrincipal(POD_IDENTITY_SERVICE).with_session_tags()
            self.role = iam.Role(
                self, "Role", role_name=role_name, assumed_by=principal, description=description
            )
        self.associations = [
            eks.CfnPodIdentityAssociation(
                self,
                f"PodIdentity{index}",
                cluster_name=cluster.cluster_name,
                namespace=namespace,
                service_account=MODEL_SERVICE_ACCOUNT,
                role_arn=self.role.role_arn,
            )
            for index, namespace in enumerate(namespaces)
        ]
        for association in self.associations:
            association.node.add_dependency(pod_identity_agent)
