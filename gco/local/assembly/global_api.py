"""The home Region's global API as synthesized, run by the local global address: its REQUEST authorizer
from its asset under its role (`DeployedFunction`), called as API Gateway calls it (`AuthorizerGate`),
a refusal answered with the API's own gateway responses (`GlobalApiGate`).

What it stands in for and what it does not: gco.local.assembly.apigateway.
"""

from __future__ import annotations

from gco.front_door import regional_stack_name
from gco.global_access.key_store import KEYS_TABLE_ENV
from gco.local.assembly.apigateway import (
    AuthorizerGate,
    GlobalApiGate,
    gateway_responses,
    request_authorizers,
)
from gco.local.assembly.deployed import DeployedApp, DeployedFunction
from gco.local.assembly.resolve import Resolver
from gco.local.assembly.template import functions
from gco.local.errors import AssemblyError


def global_api(app: DeployedApp, home: str) -> tuple[GlobalApiGate, DeployedFunction]:
    """The gate of the home Region's global API and its authorizer's function (close it when done).

    Raises:
        AssemblyError: the assembly has no Regional stack for `home`, or not one REQUEST authorizer.
    """
    stack = app.assembly.stack(regional_stack_name(home))
    found = list(request_authorizers(stack).values())
    if len(found) != 1:
        raise AssemblyError(f"{stack.name}: {len(found)} REQUEST authorizers, the global API has one")
    function = functions(stack)[found[0].function]
    authorizer = DeployedFunction(app, stack, function, home, Resolver(region=home, stack=stack.name))
    gate = GlobalApiGate(AuthorizerGate(found[0], authorizer.invoke), gateway_responses(stack), region=home)
    return gate, authorizer


def keys_table(authorizer: DeployedFunction) -> str:
    """The keys table the authorizer reads (its environment's `GCO_KEYS_TABLE_NAME`).

    Raises:
        AssemblyError: its environment names none.
    """
    name = authorizer.environment.get(KEYS_TABLE_ENV)
    if not name:
        raise AssemblyError(f"{authorizer.name}: its environment names no {KEYS_TABLE_ENV}")
    return name
