"""The Region's way in: API Gateway (HTTP API, IAM authorization, TLS) -> VPC link -> internal ALB ->
the shared proxy's pods.

- Callers reach `https://<api>.execute-api.<region>.amazonaws.com/inference/<name>/...` over TLS
  (API Gateway's certificate) and must sign with SigV4 as a principal allowed `execute-api:Invoke`
  on the route (the `InvokePolicy` managed policy grants exactly that; attach it to callers).
- API Gateway forwards through a VPC link to the internal ALB's listener. That hop stays inside the
  VPC: the ALB's security group admits only the VPC link's. It is plain HTTP because a private
  integration can only verify a certificate from a public CA for a name the deployer owns; with a
  custom domain, an ACM certificate on the listener and `secure_server_name` close it.
- The ALB sends HTTPS to the proxy's pods (IP targets, registered by the load balancer controller
  from the `TargetGroupBinding`), where `api-tls-proxy` terminates TLS and routes by path.
- Stack output `InvokeUrl`: the Region's base URL for `/inference/<name>`.
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_apigateway as restapi
from aws_cdk import aws_apigatewayv2 as apigw
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from gco.front_door import INVOKE_URL_OUTPUT
from gco.reconcile.routes import HEALTH_PATH, PROXY_PORT
from stacks.retained import retained_name

INFERENCE_PREFIX = "/inference"
LISTENER_PORT = 80
ACCESS_LOG_FORMAT = (
    '{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",'
    '"caller":"$context.identity.userArn","time":"$context.requestTime","method":"$context.httpMethod",'
    '"path":"$context.path","status":"$context.status","latency":"$context.integrationLatency",'
    '"error":"$context.integrationErrorMessage"}'
)


class FrontDoor(Construct):
    """The internal ALB and its target group, the VPC link, the IAM-authorized HTTP API and its outputs."""

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
        private = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS)
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
            vpc_subnets=private,
            internet_facing=False,
            security_group=self.alb_security_group,
            drop_invalid_header_fields=True,
            idle_timeout=Duration.seconds(600),
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
            subnets=private,
            security_groups=[self.link_security_group],
        )
        self.api = apigw.HttpApi(
            self,
            "Api",
            api_name=name,
            description="gco inference endpoints of this Region: SigV4 callers allowed execute-api:Invoke",
            create_default_stage=False,
        )
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            log_group_name=retained_name(self, f"/{name}/api-access"),
            retention=log_retention,
            encryption_key=key,
        )
        self.stage = apigw.HttpStage(
            self,
            "Stage",
            http_api=self.api,
            stage_name="$default",
            auto_deploy=True,
            access_log_settings=_AccessLogs(self.access_logs),
            throttle=apigw.ThrottleSettings(rate_limit=1000, burst_limit=2000),
        )
        integration = integrations.HttpAlbIntegration(
            "Proxy", self.listener, vpc_link=self.vpc_link, timeout=Duration.seconds(29)
        )
        iam_auth = authorizers.HttpIamAuthorizer()
        self.routes = [
            *self.api.add_routes(
                path=f"{INFERENCE_PREFIX}/{{proxy+}}",
                methods=[apigw.HttpMethod.ANY],
                integration=integration,
                authorizer=iam_auth,
            ),
        ]
        invoke_arn = stack.format_arn(
            service="execute-api",
            resource=self.api.api_id,
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
        self.invoke_url = f"{self.api.api_endpoint}{INFERENCE_PREFIX}"
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


@jsii.implements(apigw.IAccessLogSettings)
class _AccessLogs:
    """Access logs of the stage into one encrypted log group, one JSON line per request."""

    def __init__(self, group: logs.ILogGroup) -> None:
        self._destination = apigw.LogGroupLogDestination(group)

    @property
    def destination(self) -> apigw.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> restapi.AccessLogFormat:
        return restapi.AccessLogFormat.custom(ACCESS_LOG_FORMAT)
