"""The URLs `gco inference status` shows: from the Regional stacks' outputs (CloudFormation on the
moto server), or from the local stack's proxies without any CloudFormation call."""

from __future__ import annotations

import json
from typing import Any

from gco import aws
from gco.inference.regional_outputs import endpoint_urls
from gco.local.moto.motoserver import MotoServer

BASE = "https://abc123.execute-api.us-west-2.amazonaws.com/inference"


def cloudformation(moto: MotoServer) -> Any:
    return lambda region: aws.client("cloudformation", region=region, endpoint_url=moto.url)


def test_a_region_with_its_stack_output_has_a_url_and_one_without_has_none(moto: MotoServer) -> None:
    template = {
        "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {"InvokeUrl": {"Value": BASE + "/"}},
    }
    aws.client("cloudformation", region="us-west-2", endpoint_url=moto.url).create_stack(
        StackName="team-regional-us-west-2", TemplateBody=json.dumps(template)
    )
    urls = endpoint_urls("chat", ["us-east-1", "us-west-2"], {}, cloudformation(moto), prefix="team")
    assert urls == {"us-east-1": None, "us-west-2": f"{BASE}/chat"}
    # Under another prefix the stack is not found: no URL rather than an error.
    elsewhere = endpoint_urls("chat", ["us-west-2"], {}, cloudformation(moto), prefix="other")
    assert elsewhere == {"us-west-2": None}


def test_local_proxies_name_the_urls_and_no_stack_is_read() -> None:
    asked: list[str] = []

    def no_cloudformation(region: str) -> Any:
        asked.append(region)
        raise AssertionError("the local stack's URLs come from its proxies, not CloudFormation")

    local = {"us-east-1": "https://127.0.0.1:8443/"}
    urls = endpoint_urls("chat", ["us-east-1", "us-west-2"], local, no_cloudformation)
    assert urls == {"us-east-1": "https://127.0.0.1:8443/chat", "us-west-2": None}
    assert asked == []
