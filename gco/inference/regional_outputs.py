"""Each Region's invoke URL, read from its Regional stack's outputs (CloudFormation `DescribeStacks`).

The stack (`stacks/constructs/front_door.py`) outputs `InvokeUrl`
(`gco.front_door.INVOKE_URL_OUTPUT`); endpoint `NAME` answers at `<InvokeUrl>/NAME`. A Region
whose stack or output is not found has no URL. On the local stack the Regions' proxies stand in for
the stacks' outputs (`endpoint_urls`: `gco local env` names them in `GCO_INVOKE_URLS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from gco.front_door import INVOKE_URL_OUTPUT, regional_stack_name


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


def endpoint_urls(
    name: str,
    regions: Iterable[str],
    local: Mapping[str, str],
    cloudformation: Callable[[str], Any],
    prefix: str | None = None,
) -> dict[str, str | None]:
    """Per Region, the URL endpoint `name` answers at, as `gco inference status` shows it.

    Parameters:
        local: Region -> base URL of the local stack's proxy (`gco.inference.invoke.local_bases`).
            Where it names any Region, the endpoint is on the local stack: a Region it names answers
            at `<base>/<name>`, one it does not name has no URL, and no CloudFormation call is made.
            Empty: the URLs are read from the Regional stacks' outputs (`invoke_urls`).
        cloudformation: a CloudFormation client for a Region (a factory, so tests can inject one).
    """
    if local:
        return {
            region: f"{local[region].rstrip('/')}/{name}" if region in local else None for region in regions
        }
    return invoke_urls(name, regions, cloudformation, prefix)
