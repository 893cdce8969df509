"""Roles whose permissions live in one customer-managed policy (no inline policies anywhere).

`managed_role` returns the role and its policy; constructs receive `role.without_policy_updates()`
so that CDK's automatic grants cannot add an inline default policy, and every permission is the
one written here, next to the resource it names.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from constructs import Construct


def managed_role(
    scope: Construct,
    construct_id: str,
    *,
    role_name: str,
    service: str,
    description: str,
    statements: Sequence[iam.PolicyStatement],
    session_tags: bool = False,
) -> tuple[iam.Role, iam.ManagedPolicy]:
    """A role for `service` with exactly `statements`, in a named customer-managed policy.

    `session_tags`: the service also tags its sessions (EKS Pod Identity needs sts:TagSession).
    """
    principal = iam.ServicePrincipal(service)
    role = iam.Role(
        scope,
        construct_id,
        role_name=role_name,
        assumed_by=principal.with_session_tags() if session_tags else principal,
        description=description,
    )
    policy = iam.ManagedPolicy(
        scope,
        f"{construct_id}Policy",
        managed_policy_name=role_name,
        description=description,
        statements=list(statements),
        roles=[role],
    )
    return role, policy


def statement(
    sid: str, actions: Sequence[str], resources: Sequence[str], **conditions: object
) -> iam.PolicyStatement:
    """An Allow statement; `conditions` as operator=dict, e.g. StringEquals={...}."""
    return iam.PolicyStatement(
        sid=sid, actions=list(actions), resources=list(resources), conditions=dict(conditions) or None
    )


KEY_ADMIN = [
    "kms:CreateAlias", "kms:UpdateAlias", "kms:DeleteAlias", "kms:CreateGrant", "kms:ListGrants",
    "kms:RetireGrant", "kms:RevokeGrant", "kms:DescribeKey", "kms:EnableKey", "kms:DisableKey",
    "kms:EnableKeyRotation", "kms:DisableKeyRotation", "kms:GetKeyRotationStatus", "kms:RotateKeyOnDemand",
    "kms:GetKeyPolicy", "kms:PutKeyPolicy", "kms:ListKeyPolicies", "kms:ListResourceTags", "kms:TagResource",
    "kms:UntagResource", "kms:UpdateKeyDescription", "kms:ScheduleKeyDeletion", "kms:CancelKeyDeletion",
]  # fmt: skip
KEY_USE = [
    "kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext", "kms:DescribeKey",
]  # fmt: skip


def key_policy(
    account: str, services: Sequence[tuple[str, dict[str, object] | None]] = ()
) -> iam.PolicyDocument:
    """A key policy with named actions only: the account administers and delegates use through IAM;
    each (service principal, conditions) may use the key on the account's behalf."""
    statements = [
        iam.PolicyStatement(
            sid="AccountAdministersAndDelegates",
            principals=[iam.AccountRootPrincipal()],
            actions=sorted(set(KEY_ADMIN + KEY_USE)),
            resources=["*"],
        )
    ]
    for index, (service, conditions) in enumerate(services):
        statements.append(
            iam.PolicyStatement(
                sid=f"Service{index}",
                principals=[iam.ServicePrincipal(service)],
                actions=KEY_USE,
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": account}, **(conditions or {})},
            )
        )
    return iam.PolicyDocument(statements=statements)
