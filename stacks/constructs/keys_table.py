"""The bearer keys' table (global stack): a DynamoDB global table with a replica in every Regional
Region, so each Region's authorizer reads its own replica and no Region needs another to answer.

Partition key `key_id`; each item is a key's record (`gco.global_access.keys.ApiKey`: the SHA-256 of
the key, never the key). Encrypted with the same customer-managed keys as the endpoint table (the
home Region's and each replica Region's `alias/<prefix>-endpoints`), point-in-time recovery and
deletion protection on every replica, retained on stack deletion. Replicas refuse item writes to
everyone but DynamoDB's replication (`data.replica_guard`): `gco keys create|revoke` write in the
home Region only.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms
from constructs import Construct

from gco.global_access.key_store import KEY_ATTRIBUTE
from stacks.constructs.data import replica_guard


class KeysTable(Construct):
    """The keys' global table (module docstring)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table_name: str,
        key: kms.IKey,
        replica_regions: list[str],
        replica_key_arns: dict[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        recovery = dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True)
        self.table = dynamodb.TableV2(
            self,
            "Table",
            table_name=table_name,
            partition_key=dynamodb.Attribute(name=KEY_ATTRIBUTE, type=dynamodb.AttributeType.STRING),
            billing=dynamodb.Billing.on_demand(),
            point_in_time_recovery_specification=recovery,
            deletion_protection=True,
            encryption=dynamodb.TableEncryptionV2.customer_managed_key(key, replica_key_arns or None),
            replicas=[
                dynamodb.ReplicaTableProps(
                    region=region,
                    deletion_protection=True,
                    point_in_time_recovery_specification=recovery,
                    resource_policy=replica_guard(Stack.of(self)),
                )
                for region in replica_regions
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
