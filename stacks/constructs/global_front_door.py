"""The Region's part of the one global address (`docs/global.md`): certificate, custom domains, the
global REST API with its bearer-key authorizer, the Route 53 health check and latency record.

- **Certificate**: ACM, in this Region (a Regional custom domain needs one of its own Region:
  "This certificate must be in the same Region as your API", API Gateway Developer Guide, "Set up a
  Regional custom domain name"), for `<domain>` and `<region>.<domain>`, validated by DNS in the
  configured zone (CloudFormation writes the validation records).
- **Custom domains** (Regional, TLS 1.2): `<domain>`, the name every caller uses, and
  `<region>.<domain>`, the Region's own name that other Regions' proxies forward to and the health
  check requests. Both map to the global API's stage; its `execute-api` name is turned off, so the
  authorizer is the only way in (SigV4 callers keep the Regional front door's `InvokeUrl`).
- **The global API**: `ANY /inference/{proxy+}` behind a Lambda REQUEST authorizer on the
  `Authorization` header, results never cached (TTL 0: "If it equals 0, authorization caching is
  disabled", CloudFormation `AWS::ApiGateway::Authorizer` `AuthorizerResultTtlInSeconds`), then the
  front door's integration unchanged (streamed, 15 minutes, VPC link to the internal ALB), plus the
  header `X-Gco-Serve-Region` from the authorizer's context, which the proxy acts on. `GET
  /healthz` passes, without authorization, to the proxy's health location (the health check's
  path: it proves the API, VPC link, ALB and proxy pods answer; `docs/global.md` says why not a mock).
- **Route 53**: an alias record `<region>.<domain>` to this Region's own domain; an HTTPS health
  check of `https://<region>.<domain>/healthz` (SNI on); and this Region's latency alias record for
  `<domain>`, with that health check. Each Region's stack owns only its own records, so no Region is
  needed to deploy, or to answer for, another.
- **Authorizer function**: the bundle's `authorizer.handler` in the private subnets; its role may
  `dynamodb:GetItem` on this Region's replicas of the keys and endpoint tables and `kms:Decrypt` with
  this Region's table key (via DynamoDB only), nothing else but its own log group, ENIs and X-Ray.
- **Alarms** (`stacks/constructs/authorizer_alarms.py`): `<name>-authorizer-Failures` on any
  decision it could not make, from its log (a table unreadable: it answers 500 to every caller, and
  DNS would not notice, since the health check does not pass through it); `<name>-authorizer-Errors`
  on its calls that failed with no log line to say why, from Lambda's own `Errors` and `Throttles`
  less its 401s (an import error, a timeout or memory exhausted never reaches the log). The API's
  own 5xx are `<prefix>-<region>-GlobalApi5xx` (`stacks/constructs/dashboards.py`).
"""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_apigateway as restapi
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_route53 as route53
from aws_cdk import aws_route53_targets as targets
from aws_cdk import aws_sns as sns
from constructs import Construct

from gco.deployment.global_address import GlobalAddressConfig
from gco.env import TABLE_ENV
from gco.front_door import GENERATION_TIMEOUT_S, SERVE_REGION_HEADER
from gco.global_access.authorizer import (
    AUTHORIZATION_HEADER,
    REASON_CONTEXT,
    REGION_ORDER_ENV,
    SERVE_REGION_CONTEXT,
)
from gco.global_access.key_store import KEYS_TABLE_ENV
from gco.reconcile.proxy.routes import HEALTH_PATH
from stacks.bundling import ARCHITECTURE, BUNDLE_ENVIRONMENT, RUNTIME
from stacks.constructs.authorizer_alarms import authorizer_alarms
from stacks.constructs.front_door import (
    ACCESS_LOG_FORMAT,
    INFERENCE_PREFIX,
    STAGE,
    FrontDoor,
    redeploy_with_link,
)
from stacks.constructs.iam import managed_role, statement
from stacks.constructs.reconciler import ENI_ACTIONS, XRAY_ACTIONS, function_logs
from stacks.constructs.retained import retained_name

GLOBAL_URL_OUTPUT = "GlobalUrl"
HTTPS_PORT = 443
AUTHORIZER_TIMEOUT_S = 10  # two bounded reads of 2 s, two attempts each, and the cold start


class GlobalFrontDoor(Construct):
    """This Region's certificate, custom domains, global API, authorizer, health check and records."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        address: GlobalAddressConfig,
        order: list[str],
        front_door: FrontDoor,
        vpc: ec2.IVpc,
        code: lambda_.Code,
        endpoints_table: str,
        table_key: kms.IKey,
        key: kms.IKey,
        log_retention: logs.RetentionDays,
        alarm_targets: list[sns.ITopic],
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        region = stack.region
        regional_name = address.regional_name(region)
        self.zone = route53.HostedZone.from_hosted_zone_attributes(
            self, "Zone", hosted_zone_id=address.hosted_zone_id, zone_name=address.hosted_zone_name
        )
        self.certificate = acm.Certificate(
            self,
            "Certificate",
            domain_name=address.domain_name,
            subject_alternative_names=[regional_name],
            validation=acm.CertificateValidation.from_dns(self.zone),
        )
        authorizer_name = f"{name}-authorizer"
        self.authorizer_function = self._authorizer(
            name=authorizer_name,
            address=address,
            order=order,
            vpc=vpc,
            code=code,
            endpoints_table=endpoints_table,
            table_key=table_key,
            key=key,
            log_retention=log_retention,
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
            description="gco's global address in this Region: bearer keys, one forwarding hop",
            endpoint_types=[restapi.EndpointType.REGIONAL],
            disable_execute_api_endpoint=True,
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
        self.authorizer = restapi.RequestAuthorizer(
            self,
            "Authorizer",
            authorizer_name=f"{name}-bearer",
            handler=self.authorizer_function,
            identity_sources=[restapi.IdentitySource.header(AUTHORIZATION_HEADER)],
            results_cache_ttl=Duration.seconds(0),
        )
        self._error_responses()
        self.method = self._inference_method(front_door)
        self.health_method = self._health_method(front_door)
        redeploy_with_link(self.api)  # its methods name the front door's VPC link too
        self.domains = {
            kind: restapi.DomainName(
                self,
                f"{kind}Domain",
                domain_name=domain,
                certificate=self.certificate,
                endpoint_type=restapi.EndpointType.REGIONAL,
                security_policy=restapi.SecurityPolicy.TLS_1_2,
                mapping=self.api,
            )
            for kind, domain in (("Global", address.domain_name), ("Regional", regional_name))
        }
        self.regional_record = route53.ARecord(
            self,
            "RegionalRecord",
            zone=self.zone,
            record_name=regional_name,
            target=route53.RecordTarget.from_alias(targets.ApiGatewayDomain(self.domains["Regional"])),
        )
        self.health_check = route53.HealthCheck(
            self,
            "HealthCheck",
            type=route53.HealthCheckType.HTTPS,
            fqdn=regional_name,
            port=HTTPS_PORT,
            resource_path=HEALTH_PATH,
            enable_sni=True,
            request_interval=Duration.seconds(address.health_check_interval_s),
            failure_threshold=address.health_check_failure_threshold,
        )
        self.health_check.node.add_dependency(self.regional_record)
        self.latency_record = route53.ARecord(
            self,
            "LatencyRecord",
            zone=self.zone,
            record_name=address.domain_name,
            target=route53.RecordTarget.from_alias(targets.ApiGatewayDomain(self.domains["Global"])),
            region=region,
            set_identifier=region,
            health_check=self.health_check,
        )
        self.alarms: list[cloudwatch.Alarm] = authorizer_alarms(
            self,
            name=authorizer_name,
            function=self.authorizer_function,
            log_group=self.authorizer_logs,
            alarm_targets=alarm_targets,
        )
        CfnOutput(
            self,
            GLOBAL_URL_OUTPUT,
            key=GLOBAL_URL_OUTPUT,
            value=f"https://{address.domain_name}{INFERENCE_PREFIX}",
            description="The deployment's one base URL: <GlobalUrl>/<name>/..., Authorization: Bearer <key>",
        )

    def _authorizer(
        self,
        *,
        name: str,
        address: GlobalAddressConfig,
        order: list[str],
        vpc: ec2.IVpc,
        code: lambda_.Code,
        endpoints_table: str,
        table_key: kms.IKey,
        key: kms.IKey,
        log_retention: logs.RetentionDays,
    ) -> lambda_.Function:
        stack = Stack.of(self)
        tables = [
            stack.format_arn(service="dynamodb", resource="table", resource_name=table)
            for table in (address.keys_table_name, endpoints_table)
        ]
        log_group = function_logs(self, "AuthorizerLogs", name=name, key=key, retention=log_retention)
        self.authorizer_logs = log_group
        self.security_group = ec2.SecurityGroup(
            self,
            "AuthorizerSecurityGroup",
            security_group_name=name,
            vpc=vpc,
            description=f"{name}: egress to DynamoDB (HTTPS) only",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(
            ec2.Peer.any_ipv4(), ec2.Port.tcp(HTTPS_PORT), "DynamoDB over HTTPS"
        )
        self.role, self.policy = managed_role(
            self,
            "AuthorizerRole",
            role_name=f"{name}-{stack.region}",
            service="lambda.amazonaws.com",
            description="gco global authorizer: read this Region's replicas of the keys and endpoint tables",
            statements=[
                statement("ReadOwnReplicas", ["dynamodb:GetItem"], tables),
                statement(
                    "TableKeyViaDynamoDB",
                    ["kms:Decrypt"],
                    [table_key.key_arn],
                    StringEquals={"kms:ViaService": f"dynamodb.{stack.region}.amazonaws.com"},
                ),
                statement("StackKey", ["kms:Decrypt"], [key.key_arn]),
                statement(
                    "OwnLogs", ["logs:CreateLogStream", "logs:PutLogEvents"], [log_group.log_group_arn]
                ),
                statement("PrivateSubnets", ENI_ACTIONS, ["*"]),
                statement("Tracing", XRAY_ACTIONS, ["*"]),
            ],
        )
        function = lambda_.Function(
            self,
            "AuthorizerFunction",
            function_name=name,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler="authorizer.handler",
            code=code,
            role=self.role.without_policy_updates(),
            memory_size=512,
            timeout=Duration.seconds(AUTHORIZER_TIMEOUT_S),
            environment={
                KEYS_TABLE_ENV: address.keys_table_name,
                TABLE_ENV: endpoints_table,
                REGION_ORDER_ENV: ",".join(order),
                **BUNDLE_ENVIRONMENT,
            },
            environment_encryption=key,
            tracing=lambda_.Tracing.ACTIVE,
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            security_groups=[self.security_group],
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
        )
        function.node.add_dependency(self.policy)
        return function

    def _error_responses(self) -> None:
        """401 and 403 in the OpenAI error shape, so an OpenAI SDK raises with a message that says why:
        the 403's is the authorizer's reason (`$context.authorizer.reason` of its Deny; "Gateway
        response types" and context variables, API Gateway Developer Guide)."""
        for kind, response_type, status, message, error_type in (
            (
                "Unauthorized",
                restapi.ResponseType.UNAUTHORIZED,
                "401",
                "a valid gco key is required: send Authorization: Bearer <key>",
                "invalid_api_key",
            ),
            (
                "AccessDenied",
                restapi.ResponseType.ACCESS_DENIED,
                "403",
                f"$context.authorizer.{REASON_CONTEXT}",
                "access_denied",
            ),
        ):
            body = f'{{"error": {{"message": "{message}", "type": "{error_type}", '
            self.api.add_gateway_response(
                kind,
                type=response_type,
                status_code=status,
                templates={"application/json": body + '"request_id": "$context.requestId"}}'},
            )

    def _integration(
        self, front_door: FrontDoor, path: str, parameters: dict[str, str]
    ) -> restapi.Integration:
        return restapi.Integration(
            type=restapi.IntegrationType.HTTP_PROXY,
            integration_http_method="ANY",
            uri=f"http://{front_door.alb.load_balancer_dns_name}{path}",
            options=restapi.IntegrationOptions(
                request_parameters=parameters,
                response_transfer_mode=restapi.ResponseTransferMode.STREAM,
                timeout=Duration.seconds(GENERATION_TIMEOUT_S),
            ),
        )

    @staticmethod
    def _private(method: restapi.Method, front_door: FrontDoor) -> restapi.Method:
        """The integration through the front door's VPC link V2 to its ALB (`FrontDoor._proxy_method`)."""
        cfn = method.node.default_child
        assert isinstance(cfn, restapi.CfnMethod)
        cfn.add_property_override("Integration.ConnectionType", "VPC_LINK")
        cfn.add_property_override("Integration.ConnectionId", front_door.vpc_link.vpc_link_id)
        cfn.add_property_override("Integration.IntegrationTarget", front_door.alb.load_balancer_arn)
        return method

    def _inference_method(self, front_door: FrontDoor) -> restapi.Method:
        """`ANY /inference/{proxy+}`: the authorizer, then the proxy with the serving Region."""
        serve_region = f"integration.request.header.{SERVE_REGION_HEADER}"
        integration = self._integration(
            front_door,
            f"{INFERENCE_PREFIX}/{{proxy}}",
            {
                "integration.request.path.proxy": "method.request.path.proxy",
                serve_region: f"context.authorizer.{SERVE_REGION_CONTEXT}",
            },
        )
        resource = self.api.root.add_resource(INFERENCE_PREFIX.strip("/")).add_resource("{proxy+}")
        method = resource.add_method(
            "ANY",
            integration,
            authorization_type=restapi.AuthorizationType.CUSTOM,
            authorizer=self.authorizer,
            request_parameters={"method.request.path.proxy": True},
            request_validator_options=restapi.RequestValidatorOptions(validate_request_parameters=True),
        )
        return self._private(method, front_door)

    def _health_method(self, front_door: FrontDoor) -> restapi.Method:
        """`GET /healthz`, unauthenticated, to the proxy's health location (Route 53 sends no key)."""
        resource = self.api.root.add_resource(HEALTH_PATH.strip("/"))
        method = resource.add_method(
            "GET",
            self._integration(front_door, HEALTH_PATH, {}),
            authorization_type=restapi.AuthorizationType.NONE,
        )
        return self._private(method, front_door)
