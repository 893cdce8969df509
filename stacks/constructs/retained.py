"""Names of the resources a stack keeps after `cdk destroy` (log groups, buckets), made unique per
stack creation so that a redeploy after a destroy creates new ones instead of failing on the old.

CloudFormation gives every stack creation a new stack id
(`arn:aws:cloudformation:<region>:<account>:stack/<name>/<uuid>`); the first group of its UUID
(8 hex characters) is the suffix. It stays the same for the stack's life (updates keep the id), so
nothing is renamed on an ordinary deploy. docs/deploy.md ("Teardown and redeploy") lists what is
kept and how to remove it for good.
"""

from __future__ import annotations

from aws_cdk import Fn, Stack
from constructs import Construct


def creation_id(scope: Construct) -> str:
    """A token: 8 hex characters unique to this creation of the scope's stack."""
    uuid = Fn.select(2, Fn.split("/", Stack.of(scope).stack_id))
    return Fn.select(0, Fn.split("-", uuid))


def retained_name(scope: Construct, name: str) -> str:
    """`name` with the stack creation's suffix: `/aws/lambda/gco-reconciler-us-east-1-sweep-1a2b3c4d`."""
    return f"{name}-{creation_id(scope)}"
