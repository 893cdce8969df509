"""Global stack: the endpoint table and its replicas, the evidence bucket, the keys."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match

from tests.cdk.conftest import OTHER, Synthesized


def test_table_stream_pitr_deletion_protection_cmk(global_template: Any) -> None:
    # The endpoint table, and the global address's keys table (tests/cdk/test_global_address.py).
    global_template.resource_count_is("AWS::DynamoDB::GlobalTable", 2)
    global_template.has_resource_properties(
        "AWS::DynamoDB::GlobalTable",
        {
            "TableName": "gco-inference-endpoints",
            "KeySchema": [{"AttributeName": "endpoint_name", "KeyType": "HASH"}],
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {"StreamViewType": "NEW_AND_OLD_IMAGES"},
            "SSESpecification": {"SSEEnabled": True, "SSEType": "KMS"},
            "Replicas": Match.array_with(
                [
                    Match.object_like(
                        {
                            "Region": "us-east-1",
                            "DeletionProtectionEnabled": True,
                            "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
                            "SSESpecification": {"KMSMasterKeyId": Match.any_value()},
                        }
                    ),
                ]
            ),
        },
    )


def test_table_is_retained(global_template: Any) -> None:
    global_template.has_resource(
        "AWS::DynamoDB::GlobalTable", {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}
    )


def test_replica_in_each_regional_region_is_read_only(synthesized: Synthesized) -> None:
    table = next(
        r
        for r in synthesized.template_json("gco-global")["Resources"].values()
        if r["Type"] == "AWS::DynamoDB::GlobalTable"
    )
    replicas = {r["Region"]: r for r in table["Properties"]["Replicas"]}
    assert set(replicas) == {"us-east-1", OTHER}
    replica = replicas[OTHER]
    assert replica["DeletionProtectionEnabled"] is True
    assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert "alias/gco-endpoints" in str(replica["SSESpecification"]["KMSMasterKeyId"])
    statement = replica["ResourcePolicy"]["PolicyDocument"]["Statement"][0]
    assert statement["Effect"] == "Deny"
    assert {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"} <= set(statement["Action"])


def test_replica_guard_lets_dynamodb_replicate(synthesized: Synthesized) -> None:
    """A Deny on every principal without an exemption stops replication (REPLICATION_NOT_AUTHORIZED)."""
    table = next(
        r
        for r in synthesized.template_json("gco-global")["Resources"].values()
        if r["Type"] == "AWS::DynamoDB::GlobalTable"
    )
    replica = next(r for r in table["Properties"]["Replicas"] if r["Region"] == OTHER)
    denies = [s for s in replica["ResourcePolicy"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert denies
    for statement in denies:
        exempt = statement.get("Condition", {}).get("ArnNotEquals", {}).get("aws:PrincipalArn")
        assert exempt is not None, f"{statement['Sid']} denies DynamoDB's replication role"
        assert "AWSServiceRoleForDynamoDBReplication" in json.dumps(exempt)
        assert ":role/aws-service-role/replication.dynamodb.amazonaws.com/" in json.dumps(exempt)


def test_replica_keys_stack_holds_the_alias(synthesized: Synthesized) -> None:
    keys = synthesized.template(f"gco-keys-{OTHER}")
    keys.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    keys.has_resource_properties("AWS::KMS::Alias", {"AliasName": "alias/gco-endpoints"})


def test_evidence_bucket(global_template: Any) -> None:
    global_template.has_resource_properties(
        "AWS::S3::Bucket",
        {
            "VersioningConfiguration": {"Status": "Enabled"},
            "BucketEncryption": {
                "ServerSideEncryptionConfiguration": [
                    {
                        "ServerSideEncryptionByDefault": {
                            "SSEAlgorithm": "aws:kms",
                            "KMSMasterKeyID": Match.any_value(),
                        },
                        "BucketKeyEnabled": True,
                    }
                ]
            },
            "PublicAccessBlockConfiguration": {
                "BlockPublicAcls": True,
                "BlockPublicPolicy": True,
                "IgnorePublicAcls": True,
                "RestrictPublicBuckets": True,
            },
            "LoggingConfiguration": {
                "DestinationBucketName": Match.any_value(),
                "LogFilePrefix": "evidence/",
            },
            "LifecycleConfiguration": {
                "Rules": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Id": "retention",
                                "ExpirationInDays": 365,
                                "Status": "Enabled",
                                "NoncurrentVersionExpiration": {"NoncurrentDays": 365},
                            }
                        )
                    ]
                )
            },
        },
    )


def test_buckets_refuse_plain_http(global_template: Any) -> None:
    global_template.resource_count_is("AWS::S3::BucketPolicy", 2)
    global_template.has_resource_properties(
        "AWS::S3::BucketPolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Effect": "Deny",
                                "Action": "s3:*",
                                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
                            }
                        )
                    ]
                )
            }
        },
    )


def test_table_key_rotates_and_names_its_actions(global_template: Any) -> None:
    global_template.has_resource_properties(
        "AWS::KMS::Key",
        {
            "EnableKeyRotation": True,
            "KeyPolicy": {
                "Statement": [
                    Match.object_like(
                        {
                            "Sid": "AccountAdministersAndDelegates",
                            "Action": Match.array_with(["kms:Decrypt", "kms:PutKeyPolicy"]),
                        }
                    )
                ]
            },
        },
    )


def test_evidence_bucket_refuses_overwrites_and_other_encryption(global_template: Any) -> None:
    """The bucket, not the client, makes evidence write-once and keeps its own KMS key."""
    statements = {
        statement.get("Sid"): statement
        for resource in global_template.find_resources("AWS::S3::BucketPolicy").values()
        for statement in resource["Properties"]["PolicyDocument"]["Statement"]
    }
    write_once = statements["EvidenceIsWriteOnce"]
    assert (write_once["Effect"], write_once["Principal"], write_once["Action"]) == (
        "Deny",
        {"AWS": "*"},
        "s3:PutObject",
    )
    assert write_once["Condition"] == {"Null": {"s3:if-none-match": "true"}}
    assert json.dumps(write_once["Resource"]).endswith('"/evidence/*"]]}')
    for sid, header in (
        ("OnlyKmsEncryption", "s3:x-amz-server-side-encryption"),
        ("OnlyTheBucketKey", "s3:x-amz-server-side-encryption-aws-kms-key-id"),
    ):
        deny = statements[sid]
        assert (deny["Effect"], deny["Action"]) == ("Deny", "s3:PutObject")
        assert set(deny["Condition"]) == {"StringNotEquals", "Null"}
        assert deny["Condition"]["Null"] == {header: "false"}
    assert statements["OnlyKmsEncryption"]["Condition"]["StringNotEquals"] == {
        "s3:x-amz-server-side-encryption": "aws:kms"
    }


def test_the_validation_policy_parameter_names_the_policy_and_the_evidence_bucket(
    synthesized: Synthesized,
) -> None:
    """cdk.json's `validation_policy`, where the CLI reads it (`gco.admission.policy`)."""
    (parameter,) = [
        r
        for r in synthesized.template_json("gco-global")["Resources"].values()
        if r["Type"] == "AWS::SSM::Parameter"
    ]
    properties = parameter["Properties"]
    assert (properties["Name"], properties["Type"]) == ("/gco/validation-policy", "String")
    text = json.dumps(properties["Value"])
    assert '\\"policy\\":\\"warn\\"' in text.replace(" ", "") and "EvidenceBucket" in text
