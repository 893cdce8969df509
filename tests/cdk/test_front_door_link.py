"""A REST API whose methods reach the front door's VPC link is deployed anew when the link moves:
the stage's deployment is named by a hash that the link's placement is part of."""

from __future__ import annotations

from aws_cdk import App, Stack
from aws_cdk import aws_apigateway as restapi
from aws_cdk.assertions import Template

from stacks.constructs.front_door import LINK_PLACEMENT, redeploy_with_link
from stacks.constructs.network import LOAD_BALANCER_SUBNETS


def deployment_id(redeploy: bool) -> str:
    stack = Stack(App(), "gco-link-test")
    api = restapi.RestApi(stack, "Api", cloud_watch_role=False)
    api.root.add_method("GET", restapi.MockIntegration())
    if redeploy:
        redeploy_with_link(api)
    (name,) = Template.from_stack(stack).find_resources("AWS::ApiGateway::Deployment")
    return name


def test_the_deployment_name_depends_on_where_the_link_lives() -> None:
    assert LINK_PLACEMENT["subnets"] == LOAD_BALANCER_SUBNETS
    assert deployment_id(redeploy=True) != deployment_id(redeploy=False)
    assert deployment_id(redeploy=True) == deployment_id(redeploy=True)  # stable between synths
