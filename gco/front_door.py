"""Where callers reach an endpoint: each Region's invoke URL, from its Regional stack's outputs.

The Regional stack (`stacks/front_door.py`) outputs `InvokeUrl`, the base URL of the Region's
IAM-authorized API; endpoint `NAME` answers at `<InvokeUrl>/NAME/...`. `gco inference status` reads
it from CloudFormation in each target Region (a Region whose stack is not there shows no URL).

`GENERATION_TIMEOUT_S` is the one limit of a request's time on the whole path: the front door's
integration timeout (API Gateway streams a response for at most 15 minutes), and the wait of every
hop behind it (the load balancer's idle timeout, the proxy's read and send timeouts, the local
stack's relays, `gco inference invoke`), so no hop cuts a generation the front door still allows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

INVOKE_URL_OUTPUT = "InvokeUrl"
# API Gateway's longest streamed response (docs.aws.amazon.com/apigateway/latest/developerguide/
# response-transfer-mode.html: "The maximum duration for response streaming is 15 minutes").
GENERATION_TIMEOUT_S = 900
PREFIX_ENV = "GCO_PREFIX"
DEFAULT_PREFIX = "gco"


def regional_stack_name(region: str, prefix: str | None = None) -> str:
    """`<prefix>-regional-<region>`, as `app.py` names the Regional stacks (prefix from GCO_PREFIX)."""
    return f"{prefix or os.environ.get(PREFIX_ENV) or DEFAULT_PREFIX}-regional-{region}"


def invoke_urls(
    name: str, regions: Iterable[str], cloudformation: Callable[[str], Any], prefix: str | None = None
) -> dict[str, str | None]:
    """Per Region, `<InvokeUrl>/<name>`, or None where the Regional stack or its output is not found.

    Parameters:
        cloudformation: a CloudFormation client for a Region (a factory, so tests can inject one).
    """
    found: dict[str, str | None] = {}
    for region in regions:
        try:
            stacks = cloudformation(region).describe_stacks(StackName=regional_stack_name(region, prefix))
        except (ClientError, BotoCoreError):
            found[region] = None  # not deployed there (or not reachable): nothing to name
            continue
        outputs = {
            output["OutputKey"]: output["OutputValue"]
            for stack in stacks.get("Stacks", [])
            for output in stack.get("Outputs", [])
        }
        base = outputs.get(INVOKE_URL_OUTPUT)
        found[region] = f"{base.rstrip('/')}/{name}" if base else None
    return found
