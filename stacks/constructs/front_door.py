"""The Region's way in: API Gateway (REST API, IAM authorization, TLS, responses streamed) -> VPC link
-> internal ALB -> the shared proxy's pods.

- Callers reach `https://<api>.execute-api.<region>.amazonaws.com/<stage>/inference/<name>/...` over
  TLS (API Gateway's certificate) and must sign with SigV4 as a principal allowed `execute-api:Invoke`
  on the path (the `InvokePolicy` managed policy grants exactly that; attach it to callers).
- Why a REST API: an LLM answer must stream (server-sent events from the first token) and may run
  for minutes. An HTTP API buffers the whole response and ends its integration at 30 seconds; a REST
  API's `HTTP_PROXY` integration with `responseTransferMode: STREAM` sends the response on as it
  arrives, for up to 15 minutes, private integrations included
  (docs.aws.amazon.com/apigateway/latest/developerguide/response-transfer-mode.html). Its stream
  also ends after 5 minutes without a byte (Regional endpoints), far above any engine's time
  between two tokens. No cache, no content encoding and no response mapping (which STREAM rules
  out) are used.
- The integration is private: a VPC link V2 to the internal ALB (REST APIs reach an ALB through a
  VPC link V2: docs.aws.amazon.com/apigateway/latest/developerguide/set-up-private-integration.html).
  That hop stays inside the VPC: the ALB's security group admits only the VPC link's. It is plain
  HTTP because a private integration can only verify a certificate from a public CA for a name the
  deployer owns; with a custom domain, an ACM certificate on the listener closes it.
- The ALB sends HTTPS to the proxy's pods (IP targets, registered by the load balancer controller
  from the `TargetGroupBinding`), where `api-tls-proxy` terminates TLS and routes by path.
- Timeouts, one limit (`gco.front_door.GENERATION_TIMEOUT_S`, 15 minutes): the integration's timeout;
  the ALB's idle timeout; the proxy's read and send timeouts (`gco.reconcile.proxy.routes`). No hop behind
  the front door ends a generation it still allows; engines set no limit of their own (a request's
  `max_tokens` bounds it).
- Stack output `InvokeUrl`: the Region's base URL for `/inference/<name>`.
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_apigateway as restapi
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from gco.front_door import GENERATION_TIMEOUT_S, INVOKE_URL_OUTPUT
from gco.reconcile.proxy.routes import HEALTH_PATH, PROXY_PORT
from stacks.constructs.network import LOAD_BALANCER_SUBNETS
from stacks.constructs.retained import retained_name

INFERENCE_PREFIX = "/inference"
LISTENER_PORT = 80
STAGE = "v1"
ACCESS_LOG_FORMAT = (
    '{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",'
    '"caller":"$context.identity.userArn","time":"$context.requestTime","method":"$context.httpMethod",'
    '"path":"$context.path","status":"$context.status","latency":"$context.integration.latency",'
    '"error":"$context.integration.error"}'
)


# What the stage's deployment snapshots of the VPC link: a change here makes a new deployment.
LINK_PLACEMENT = {"connection": "VPC_LINK", "subnets": LOAD_BALANCER_SUBNETS}


def redeploy_with_link(api: restapi.RestApi) -> None:
    """Make `api`'s deployment depend on where the VPC link lives.

    A REST API stage serves a deployment, a snapshot of the methods' integrations with the VPC link's
    id; CDK names the deployment by a hash of the methods as written, which the property overrides
    that set the link are not part of. Moving the link to other subnets replaces it (CloudFormation:
    `AWS::ApiGatewayV2::VpcLink` `SubnetIds`, "Update requires: Replacement"), so without this the
    stage would keep serving a snapshot naming the deleted link."""
    deployment = api.latest_deployment
    if deployment is not None:
        deployment.add_to_logical_id(LINK_PLACEMENT)


class FrontDoor(Construct):
    """The internal ALB and its target group, the VPC link, the IAM-authorized streaming REST API and
    its outputs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        vpc: ec2.IVpc,
        pod_security_group: ec2.ISecurityGroup,
        key: kms.IKey,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        # Subnets of their own (stacks/constructs/network.py): the proxy's NetworkPolicy admits them.
        subnets = ec2.SubnetSelection(subnet_group_name=LOAD_BALANCER_SUBNETS)
        self.link_security_group = ec2.SecurityGroup(
            self,
            "VpcLinkSecurityGroup",
            security_group_name=f"{name}-vpc-link",
            vpc=vpc,
            description=f"{name}: API Gateway VPC link to the internal load balancer",
            allow_all_outbound=False,
        )
        self.alb_security_group = ec2.SecurityGroup(
            self,
            "AlbSecurityGroup",
            security_group_name=f"{name}-alb",
            vpc=vpc,
            description=f"{name}: internal load balancer, reached only through the VPC link",
            allow_all_outbound=False,
        )
        self.link_security_group.add_egress_rule(
            self.alb_security_group, ec2.Port.tcp(LISTENER_PORT), "VPC link to the load balancer"
        )
        self.alb_security_group.add_ingress_rule(
            self.link_security_group, ec2.Port.tcp(LISTENER_PORT), "from the API Gateway VPC link only"
        )
        self.alb_security_group.add_egress_rule(
            pod_security_group, ec2.Port.tcp(PROXY_PORT), "to the inference proxy's pods (TLS)"
        )
        pod_security_group.add_ingress_rule(
            self.alb_security_group, ec2.Port.tcp(PROXY_PORT), "front door load balancer to the proxy"
        )
        self.alb = elbv2.ApplicationLoadBalancer(
            self,
            "Alb",
            load_balancer_name=name,
            vpc=vpc,
            vpc_subnets=subnets,
            internet_facing=False,
            security_group=self.alb_security_group,
            drop_invalid_header_fields=True,
            idle_timeout=Duration.seconds(GENERATION_TIMEOUT_S),
        )
        self.target_group = elbv2.ApplicationTargetGroup(
            self,
            "ProxyTargets",
            target_group_name=name,
            vpc=vpc,
            target_type=elbv2.TargetType.IP,
            protocol=elbv2.ApplicationProtocol.HTTPS,
            port=PROXY_PORT,
            deregistration_delay=Duration.seconds(30),
            health_check=elbv2.HealthCheck(
                path=HEALTH_PATH, protocol=elbv2.Protocol.HTTPS, healthy_http_codes="200"
            ),
        )
        self.listener = self.alb.add_listener(
            "Listener",
            port=LISTENER_PORT,
            protocol=elbv2.ApplicationProtocol.HTTP,
            open=False,
            default_target_groups=[self.target_group],
        )
        self.vpc_link = apigw.VpcLink(
            self,
            "VpcLink",
            vpc_link_name=name,
            vpc=vpc,
            subnets=subnets,
            security_groups=[self.link_security_group],
        )
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            log_group_name=retained_name(self, f"/{name}/api-access"),
            retention=log_retention,
            encryption_key=key,
        )
        self.api = restapi.RestApi(
            self,
            "Api",
            rest_api_name=name,
            description="gco inference endpoints of this Region: SigV4 callers allowed execute-api:Invoke",
            endpoint_types=[restapi.EndpointType.REGIONAL],
            cloud_watch_role=False,
            deploy_options=restapi.StageOptions(
                stage_name=STAGE,
                access_log_destination=restapi.LogGroupLogDestination(self.access_logs),
                access_log_format=restapi.AccessLogFormat.custom(ACCESS_LOG_FORMAT),
                throttling_rate_limit=1000,
                throttling_burst_limit=2000,
                tracing_enabled=True,
            ),
        )
        self.method = self._proxy_method()
        invoke_arn = stack.format_arn(
            service="execute-api",
            resource=self.api.rest_api_id,
            resource_name=f"*/*{INFERENCE_PREFIX}/*",
        )
        self.invoke_policy = iam.ManagedPolicy(
            self,
            "InvokePolicy",
            managed_policy_name=f"{name}-invoke-{stack.region}",
            description="Invoke every gco inference endpoint of this Region through its front door",
            statements=[
                iam.PolicyStatement(
                    sid="InvokeInference", actions=["execute-api:Invoke"], resources=[invoke_arn]
                )
            ],
        )
        self.invoke_url = self.api.url_for_path(INFERENCE_PREFIX)
        CfnOutput(
            self,
            INVOKE_URL_OUTPUT,
            key=INVOKE_URL_OUTPUT,
            value=self.invoke_url,
            description="Base URL of this Region's inference endpoints: <InvokeUrl>/<name>/... (SigV4)",
            export_name=f"{name}-invoke-url",
        )
        CfnOutput(
            self,
            "InvokePolicyArn",
            key="InvokePolicyArn",
            value=self.invoke_policy.managed_policy_arn,
            description="Managed policy to attach to callers of this Region's inference endpoints",
        )

    def _proxy_method(self) -> restapi.Method:
        """`ANY /inference/{proxy+}`, IAM-authorized, to the ALB through the VPC link, streamed.

        The L2 `Integration` names only VPC links V1 (NLB); the private integration through a VPC link
        V2 to an ALB is written on the method itself: connection `VPC_LINK`, the link's id, and the
        load balancer as `integrationTarget` (CloudFormation `AWS::ApiGateway::Method` Integration).
        """
        integration = restapi.Integration(
            type=restapi.IntegrationType.HTTP_PROXY,
            integration_http_method="ANY",
            uri=f"http://{self.alb.load_balancer_dns_name}{INFERENCE_PREFIX}/{{proxy}}",
            options=restapi.IntegrationOptions(
                request_parameters={"integration.request.path.proxy": "method.request.path.proxy"},
                response_transfer_mode=restapi.ResponseTransferMode.STREAM,
                timeout=Duration.seconds(GENERATION_TIMEOUT_S),
            ),
        )
        resource = self.api.root.add_resource(INFERENCE_PREFIX.strip("/")).add_resource("{proxy+}")
        method = resource.add_method(
            "ANY",
            integration,
            authorization_type=restapi.AuthorizationType.IAM,
            request_parameters={"method.request.path.proxy": True},
            # The path under /inference is required; the body is the engine's to validate.
            request_validator_options=restapi.RequestValidatorOptions(validate_request_parameters=True),
        )
        cfn = method.node.default_child
        assert isinstance(cfn, restapi.CfnMethod)
        cfn.add_property_override("Integration.ConnectionType", "VPC_LINK")
        cfn.add_property_override("Integration.ConnectionId", self.vpc_link.vpc_link_id)
        cfn.add_property_override("Integration.IntegrationTarget", self.alb.load_balancer_arn)
        redeploy_with_link(self.api)
        return method
