"""cdk-nag suppressions for the Regional stack's Kubernetes plumbing: the kubectl provider (CDK's own
Lambda functions that apply manifests and Helm releases) and the front door's internal ALB.

Each is one path, one rule, one reason, like `stacks/nag/suppressions.py`; the provider's are generated
from one table because CDK builds the same two functions in every Regional stack.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Stack
from cdk_nag import RegexAppliesTo

from gco.reconcile.model_sources import parse_prefixes
from stacks.constructs.front_door import STAGE
from stacks.nag.suppression import Suppression, each_pack

MANAGED = "Policy::arn:<AWS::Partition>:iam::aws:policy/"
PROVIDER_FUNCTION = (
    "CDK's kubectl provider function runs only at deploy time, invoked by CloudFormation through the "
    "provider framework, which retries and reports failures to the stack; it is not configurable"
)
PROVIDER_POLICY = (
    "CDK's kubectl provider attaches this policy itself (describe its cluster, invoke its handler); "
    "the construct offers no way to move it into a managed policy"
)


def kubectl_provider_suppressions(stack: Stack) -> list[Suppression]:
    """The findings on the kubectl provider's handler and its provider-framework function."""
    root = f"/{stack.stack_name}/Eks/Cluster/KubectlProvider"
    handler, framework = f"{root}/Handler", f"{root}/Provider/framework-onEvent"
    function_rules = {
        handler: (
            "AwsSolutions-L1", "HIPAA.Security-LambdaConcurrency", "NIST.800.53.R5-LambdaConcurrency",
            "HIPAA.Security-LambdaDLQ", "NIST.800.53.R5-LambdaDLQ", "Serverless-LambdaDLQ",
            "Serverless-LambdaLatestVersion", "Serverless-LambdaTracing",
        ),
        framework: (
            "HIPAA.Security-LambdaConcurrency", "NIST.800.53.R5-LambdaConcurrency",
            "HIPAA.Security-LambdaDLQ", "NIST.800.53.R5-LambdaDLQ", "Serverless-LambdaDLQ",
            "Serverless-LambdaDefaultMemorySize", "Serverless-LambdaTracing",
        ),
    }  # fmt: skip
    found = [
        Suppression(f"{path}/Resource", rule, PROVIDER_FUNCTION)
        for path, rules in function_rules.items()
        for rule in rules
    ]
    for path in (handler, framework):
        policy = f"{path}/ServiceRole/DefaultPolicy/Resource"
        found += each_pack(policy, "IAMNoInlinePolicy", PROVIDER_POLICY)
    found += [
        Suppression(
            f"{handler}/ServiceRole/Resource",
            "AwsSolutions-IAM4",
            "the kubectl handler's own role: logs, ENIs in the private subnets, and pulling Helm charts from "
            "ECR, as CDK's kubectl provider defines it",
            (
                f"{MANAGED}service-role/AWSLambdaBasicExecutionRole",
                f"{MANAGED}service-role/AWSLambdaVPCAccessExecutionRole",
                f"{MANAGED}AmazonEC2ContainerRegistryReadOnly",
                RegexAppliesTo(
                    regex=r"/^Policy::\{\"Fn::If\".*AmazonElasticContainerRegistryPublicReadOnly.*$/g"
                ),
            ),
        ),
        Suppression(
            f"{framework}/ServiceRole/Resource",
            "AwsSolutions-IAM4",
            "the provider framework's own role: logs and ENIs in the private subnets, as CDK defines it",
            (
                f"{MANAGED}service-role/AWSLambdaBasicExecutionRole",
                f"{MANAGED}service-role/AWSLambdaVPCAccessExecutionRole",
            ),
        ),
        Suppression(
            f"{framework}/ServiceRole/DefaultPolicy/Resource",
            "AwsSolutions-IAM5",
            "the provider framework invokes its one handler function, any version of it",
            (RegexAppliesTo(regex=r"/^Resource::<EksClusterKubectlProviderHandler[0-9A-F]{8}\.Arn>:\*$/g"),),
        ),
    ]
    return found


def front_door_suppressions(stack: Stack) -> list[Suppression]:
    """The internal ALB behind the VPC link, the invoke policy and the load balancer controller's role."""
    root, region = f"/{stack.stack_name}", stack.region
    alb = f"{root}/FrontDoor/Alb"
    internal = (
        "internal ALB reached only from the API Gateway VPC link's security group; callers are "
        "SigV4-authenticated and TLS-terminated by API Gateway, and the ALB re-encrypts to the proxy pods"
    )
    return [
        *each_pack(f"{alb}/Listener/Resource", "ALBHttpToHttpsRedirection", internal),
        *each_pack(
            f"{alb}/Listener/Resource",
            "ELBv2ACMCertificateRequired",
            f"an ACM certificate needs a domain the deployer owns; the listener is internal ({internal})",
        ),
        Suppression(
            f"{alb}/Resource",
            "AwsSolutions-ELB2",
            "every request is logged by the API Gateway stage's access log (caller identity included) "
            "before it reaches this internal ALB",
        ),
        *each_pack(
            f"{alb}/Resource",
            "ELBLoggingEnabled",
            "every request is logged by the API Gateway stage's access log (caller identity included)",
        ),
        *[
            Suppression(
                f"{alb}/Resource",
                f"{pack}-ELBDeletionProtectionEnabled",
                "the ALB holds no state and is recreated with the stack; protection would block cdk destroy",
            )
            for pack in ("HIPAA.Security", "NIST.800.53.R5")
        ],
        *[
            Suppression(
                f"{alb}/Resource",
                f"{pack}-ALBWAFEnabled",
                "this ALB is internal and answers only the API Gateway VPC link; the way in is the REST API, "
                f"whose IAM authorization is the gate ({internal})",
            )
            for pack in ("NIST.800.53.R5", "PCI.DSS.321")
        ],
        *_rest_api_suppressions(root),
        Suppression(
            f"{root}/FrontDoor/InvokePolicy/Resource",
            "AwsSolutions-IAM5",
            "invoke any method of any endpoint under /inference of this one API: endpoints come and go "
            "with the table, and this policy exists to be attached to their callers",
            (
                RegexAppliesTo(
                    regex=rf"/^Resource::arn:<AWS::Partition>:execute-api:{region}:<AWS::AccountId>:"
                    r"<FrontDoorApi[0-9A-F]{8}>\/\*\/\*\/inference\/\*$/g"
                ),
            ),
        ),
        Suppression(
            f"{root}/LoadBalancerController/RolePolicy/Resource",
            "AwsSolutions-IAM5",
            "Elastic Load Balancing and EC2 Describe actions take no resource; registering targets is "
            "limited to the front door's one target group",
            ("Resource::*",),
        ),
    ]


def _rest_api_suppressions(root: str) -> list[Suppression]:
    """The streaming REST API of the front door (`stacks/constructs/front_door.py` says why a REST API)."""
    stage = f"{root}/FrontDoor/Api/DeploymentStage.{STAGE}/Resource"
    method = f"{root}/FrontDoor/Api/Default/inference/{{proxy+}}/ANY/Resource"
    iam = "every request is SigV4-signed and authorized by IAM (execute-api:Invoke on /inference/*)"
    return [
        Suppression(
            f"{root}/FrontDoor/Api/Resource",
            "AwsSolutions-APIG2",
            "the one method's validator requires its path parameter; the body is passed through to the "
            "engine, which validates it (a request model here would duplicate each engine's schema)",
        ),
        Suppression(method, "AwsSolutions-COG4", f"callers are AWS principals, not Cognito users: {iam}"),
        *[
            Suppression(
                stage, rule, f"no WAF web ACL: {iam}; request bodies are prompts a WAF rule set cannot judge"
            )
            for rule in (
                "AwsSolutions-APIG3",
                "NIST.800.53.R5-APIGWAssociatedWithWAF",
                "PCI.DSS.321-APIGWAssociatedWithWAF",
            )
        ],
        *each_pack(
            stage,
            "APIGWCacheEnabledAndEncrypted",
            "a streamed integration (responseTransferMode STREAM) cannot use the stage cache, and LLM "
            "answers to the same request are not reusable",
        ),
        *[
            Suppression(
                stage,
                rule,
                "execution logs need the account-wide API Gateway CloudWatch role; the stage's access log "
                "records every request (caller, status, integration latency and error), KMS-encrypted",
            )
            for rule in (
                "AwsSolutions-APIG6",
                "HIPAA.Security-APIGWExecutionLoggingEnabled",
                "NIST.800.53.R5-APIGWExecutionLoggingEnabled",
                "PCI.DSS.321-APIGWExecutionLoggingEnabled",
            )
        ],
        *each_pack(
            stage,
            "APIGWSSLEnabled",
            "a backend client certificate applies to HTTP integrations over the internet; this one is "
            "private, through the VPC link to an internal ALB that admits only the link's security group",
        ),
    ]


def model_access_suppressions(stack: Stack, sources: Sequence[str]) -> list[Suppression]:
    """The endpoint pods' role reads objects under each configured prefix (none: no policy, nothing)."""
    if not sources:
        return []
    objects = tuple(
        f"Resource::arn:<AWS::Partition>:s3:::{prefix.bucket}/{prefix.key}*"
        for prefix in parse_prefixes(sources)
    )
    return [
        Suppression(
            f"/{stack.stack_name}/ModelAccess/RolePolicy/Resource",
            "AwsSolutions-IAM5",
            "model files under each prefix named in cdk.json gco.model_sources are not known before a "
            "deploy; the role reads (s3:GetObject) under those prefixes only",
            objects,
        )
    ]
