"""Constructs of the global stack: the endpoint table and the evidence bucket."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.constructs.retained import creation_id

# DynamoDB replicates a global table's items into each replica as this service-linked role; a replica's
# resource policy must not deny it what its policy allows, or replication stops and the replica turns
# REPLICATION_NOT_AUTHORIZED ("DynamoDB global tables security", Amazon DynamoDB Developer Guide:
# https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/globaltables-security.html).
REPLICATION_ROLE = "aws-service-role/replication.dynamodb.amazonaws.com/AWSServiceRoleForDynamoDBReplication"
STREAM_VIEW = dynamodb.StreamViewType.NEW_AND_OLD_IMAGES
REPLICA_WRITES = [
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:TransactWriteItems",
]


class EndpointTable(Construct):
    """The desired-state table: stream NEW_AND_OLD_IMAGES, PITR, deletion protection, CMK.

    Replicas (one per Regional Region) are encrypted with that Region's key and refuse item writes
    by resource policy to everyone but DynamoDB's replication role (`replica_guard`): every
    conditional write goes to the home Region.
    """

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
        read_only = replica_guard(Stack.of(self))
        self.table = dynamodb.TableV2(
            self,
            "Table",
            table_name=table_name,
            partition_key=dynamodb.Attribute(name="endpoint_name", type=dynamodb.AttributeType.STRING),
            billing=dynamodb.Billing.on_demand(),
            dynamo_stream=STREAM_VIEW,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=True,
            encryption=dynamodb.TableEncryptionV2.customer_managed_key(key, replica_key_arns or None),
            replicas=[
                dynamodb.ReplicaTableProps(
                    region=region,
                    deletion_protection=True,
                    point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                        point_in_time_recovery_enabled=True
                    ),
                    resource_policy=read_only,
                )
                for region in replica_regions
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )


def stream_identity(replica_regions: list[str]) -> dict[str, str]:
    """What re-creates a Region's copy of the stream when it changes: the view type and the replica set
    (a replica removed and added again gets a new stream). Given to the stream-ARN lookup as properties,
    so that it runs again on any such change."""
    return {"StreamViewType": STREAM_VIEW.value, "ReplicaRegions": ",".join(sorted(replica_regions))}


def replica_guard(stack: Stack) -> iam.PolicyDocument:
    """A replica's resource policy: item writes are denied to every principal except DynamoDB's
    replication role (and AWS service principals acting for it), so only replication writes there.

    The exemption is a condition on the caller, not a narrower principal: a Deny names everyone,
    and `aws:PrincipalArn` of the service-linked role's sessions is the role's ARN.
    """
    replication_role = stack.format_arn(
        service="iam", region="", resource="role", resource_name=REPLICATION_ROLE
    )
    return iam.PolicyDocument(
        statements=[
            iam.PolicyStatement(
                sid="ReplicasAreReadOnly",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=REPLICA_WRITES,
                resources=["*"],
                conditions={
                    "ArnNotEquals": {"aws:PrincipalArn": replication_role},
                    "BoolIfExists": {"aws:PrincipalIsAWSService": "false"},
                },
            )
        ]
    )


# The S3 condition key present when a write carries If-None-Match (create only, never replace):
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html
IF_NONE_MATCH = "s3:if-none-match"
EVIDENCE_OBJECTS = "evidence/*"


class EvidenceBucket(Construct):
    """Evidence and run directories: versioned, KMS, TLS-only, no public access, logged, expiring.

    The bucket itself makes evidence write-once: its policy denies every `PutObject` under
    `evidence/` that does not carry `If-None-Match` (S3 then refuses, with 412, a write to a key
    that exists), whoever the caller; so no client, role or bug can replace a record, only add one.
    (Object Lock would not do it: it protects versions from deletion, while a PUT to an existing key
    just adds a newer version.) It also denies a write that asks for an encryption other than its
    own KMS key, so no client setting (`ServerSideEncryption=AES256`) can opt out of the key.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, name: str, key: kms.IKey, retention_days: int
    ) -> None:
        super().__init__(scope, construct_id)
        # Bucket names are global: the account and Region make them unique, and the stack creation's
        # id lets a redeploy after `cdk destroy` create new buckets beside the kept ones.
        suffix = f"{Stack.of(self).account}-{Stack.of(self).region}-{creation_id(self)}"
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            bucket_name=f"{name}-logs-{suffix}",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    expiration=Duration.days(retention_days),
                    noncurrent_version_expiration=Duration.days(30),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            bucket_name=f"{name}-{suffix}",
            encryption=s3.BucketEncryption.KMS,
            encryption_key=key,
            bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="evidence/",
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="retention",
                    expiration=Duration.days(retention_days),
                    noncurrent_version_expiration=Duration.days(retention_days),
                    abort_incomplete_multipart_upload_after=Duration.days(7),
                )
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.bucket.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EvidenceIsWriteOnce",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=[self.bucket.arn_for_objects(EVIDENCE_OBJECTS)],
                conditions={"Null": {IF_NONE_MATCH: "true"}},
            )
        )
        # A request that names an encryption must name the bucket's own: each header, when present,
        # must match (a header left out means the bucket's default, its key).
        for sid, header, value in (
            ("OnlyKmsEncryption", "s3:x-amz-server-side-encryption", "aws:kms"),
            ("OnlyTheBucketKey", "s3:x-amz-server-side-encryption-aws-kms-key-id", key.key_arn),
        ):
            self.bucket.add_to_resource_policy(
                iam.PolicyStatement(
                    sid=sid,
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=["s3:PutObject"],
                    resources=[self.bucket.arn_for_objects("*")],
                    conditions={"StringNotEquals": {header: value}, "Null": {header: "false"}},
                )
            )
