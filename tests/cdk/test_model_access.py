"""The endpoint pods' Pod Identity role: reads only the configured model prefixes (and decrypts only
with the configured keys, through S3), associated with their service account in each endpoint
namespace; with no prefixes, no policy at all. Built in a throwaway stack under every nag pack."""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Aspects, Environment, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Match, Template

from gco.reconcile.model_sources import MODEL_SERVICE_ACCOUNT, parse_prefixes
from stacks.app import NAG_PACKS, nag_findings
from stacks.constructs.model_access import ModelAccess
from stacks.nag.suppressions import apply
from stacks.nag.suppressions_k8s import model_access_suppressions

SOURCES = ["s3://models-bucket/llama/", "s3://models-bucket/qwen/", "s3://other-models/"]
KEY = "arn:aws:kms:us-west-2:123456789012:key/0123abcd-0123-4567-89ab-0123456789ab"


def synth(sources: list[str], keys: list[str]) -> tuple[Template, list[tuple[str, str]]]:
    app = App()
    stack = Stack(app, "gco-model-test", env=Environment(account="123456789012", region="us-west-2"))
    cluster = eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="gco-us-west-2")
    agent = eks.Addon(stack, "Agent", cluster=cluster, addon_name="eks-pod-identity-agent")
    ModelAccess(
        stack,
        "ModelAccess",
        name="gco-model-reader",
        cluster=cluster,
        namespaces=["gco-inference", "team-a"],
        sources=parse_prefixes(sources),
        kms_keys=keys,
        pod_identity_agent=agent,
    )
    apply(stack, model_access_suppressions(stack, sources))
    for pack in NAG_PACKS:
        Aspects.of(app).add(pack(verbose=True))
    assembly = app.synth()
    return Template.from_stack(stack), nag_findings(assembly)


def statements(template: Template) -> dict[str, Any]:
    [policy] = template.find_resources("AWS::IAM::ManagedPolicy").values()
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def test_the_role_reads_only_the_configured_prefixes() -> None:
    template, findings = synth(SOURCES, [KEY])
    assert findings == []  # every pack; the object wildcards are suppressed by their exact strings
    found = statements(template)
    assert found["ReadModels"]["Action"] == "s3:GetObject"
    objects = [r["Fn::Join"][1][-1] for r in found["ReadModels"]["Resource"]]
    assert objects == [":s3:::models-bucket/llama/*", ":s3:::models-bucket/qwen/*", ":s3:::other-models/*"]
    assert found["ListModels0"]["Action"] == "s3:ListBucket"
    assert found["ListModels0"]["Condition"] == {"StringLike": {"s3:prefix": ["llama/*", "qwen/*"]}}
    assert found["ListModels1"]["Condition"] == {"StringLike": {"s3:prefix": ["*"]}}
    assert found["DecryptModels"] == {
        "Sid": "DecryptModels",
        "Effect": "Allow",
        "Action": "kms:Decrypt",
        "Resource": KEY,
        "Condition": {"StringEquals": {"kms:ViaService": "s3.us-west-2.amazonaws.com"}},
    }
    assert set(found) == {"ListModels0", "ListModels1", "ReadModels", "DecryptModels"}
    template.has_resource_properties(
        "AWS::IAM::Role",
        {
            "AssumeRolePolicyDocument": {
                "Statement": [
                    Match.object_like(
                        {
                            "Action": ["sts:AssumeRole", "sts:TagSession"],
                            "Principal": {"Service": "pods.eks.amazonaws.com"},
                        }
                    )
                ]
            }
        },
    )
    for namespace in ("gco-inference", "team-a"):
        template.has_resource_properties(
            "AWS::EKS::PodIdentityAssociation",
            {"Namespace": namespace, "ServiceAccount": MODEL_SERVICE_ACCOUNT, "ClusterName": "gco-us-west-2"},
        )


def test_without_sources_the_role_can_read_nothing() -> None:
    template, findings = synth([], [])
    assert findings == []
    template.resource_count_is("AWS::IAM::ManagedPolicy", 0)
    template.resource_count_is("AWS::IAM::Policy", 0)
    template.resource_count_is("AWS::EKS::PodIdentityAssociation", 2)


def test_every_region_gives_endpoint_pods_the_account_and_tells_the_reconciler(
    regional_template: Any,
) -> None:
    regional_template.has_resource_properties(
        "AWS::EKS::PodIdentityAssociation",
        {"Namespace": "gco-inference", "ServiceAccount": MODEL_SERVICE_ACCOUNT},
    )
    regional_template.has_resource_properties(
        "AWS::Lambda::Function",
        {"Environment": {"Variables": Match.object_like({"GCO_MODEL_SOURCES": Match.any_value()})}},
    )
