"""A function's role as its template defines it, made in the moto server, and the credentials Lambda
would hand the function: the local stack's stand-in for IAM's part in running a function.

`role_documents` gathers every policy document the template attaches to a function's role: the
role's inline `Policies`, each `AWS::IAM::Policy` and `AWS::IAM::ManagedPolicy` whose `Roles` name it,
and the in-stack managed policies in its `ManagedPolicyArns` (AWS managed policies are attached by
ARN: moto ships their documents). `make_role` creates the role under its template name with those
documents, and `assume` returns the session credentials the function runs with. With moto's IAM
enforcement on (`MotoServer.enforce_iam`: after it every request must be signed by credentials moto
issued), a call whose action no document allows fails with `AccessDenied` naming the
action, as it would in AWS.

What moto's policy evaluation does not model (moto 5.2, `moto/iam/access_control.py`), and so what a
green local run does not prove:
- resources: moto authorizes most services' requests against the resource `*`, so a statement naming
  an ARN would never match; the local role's statements therefore allow their actions on `*`
  (`for_moto`), and a policy that names the wrong resource passes here;
- conditions: dropped for the same reason (moto evaluates only a few keys of trust policies);
- trust policies, permission boundaries, service control policies, resource policies (a queue's, a
  key's) and KMS grants: not evaluated; the role is assumed before enforcement is turned on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gco.local.assembly.reader import StackArtifact
from gco.local.assembly.resolve import ACCOUNT
from gco.local.assembly.template import LambdaFunction
from gco.local.errors import AssemblyError

ROLE_TYPE = "AWS::IAM::Role"
POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
SESSION_SECONDS = 3600
MAX_ROLE_NAME = 64  # IAM's limit on a role's name
_NOT_EVALUATED = ("Resource", "NotResource", "Condition")  # by moto: see the module's docstring


def role_id(function: LambdaFunction) -> str:
    """The logical id of the function's role (`Role: {"Fn::GetAtt": [id, "Arn"]}`).

    Raises:
        AssemblyError: the role is not a role of the function's stack.
    """
    role = function.role
    if isinstance(role, Mapping) and isinstance(role.get("Fn::GetAtt"), list):
        return str(role["Fn::GetAtt"][0])
    raise AssemblyError(f"{function.stack}/{function.logical_id}: its role is not one of its stack's")


def _names_role(roles: Any, logical_id: str) -> bool:
    return any(isinstance(item, Mapping) and item.get("Ref") == logical_id for item in roles or [])


def role_documents(stack: StackArtifact, logical_id: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(policy name -> document, AWS managed policy ARNs) of the role `logical_id` in `stack`.

    Raises:
        AssemblyError: the stack has no such role.
    """
    role = stack.resources(ROLE_TYPE).get(logical_id)
    if role is None:
        raise AssemblyError(f"{stack.name}: no role {logical_id}")
    properties = role.get("Properties", {})
    documents = {item["PolicyName"]: item["PolicyDocument"] for item in properties.get("Policies", [])}
    managed: list[str] = []
    for reference in properties.get("ManagedPolicyArns", []):
        if isinstance(reference, Mapping) and "Ref" in reference:
            policy = stack.resources("AWS::IAM::ManagedPolicy").get(str(reference["Ref"]))
            if policy is not None:
                documents[str(reference["Ref"])] = policy["Properties"]["PolicyDocument"]
                continue
        managed.append(_aws_managed_arn(reference))
    for kind in POLICY_TYPES:
        for policy_id, policy in stack.resources(kind).items():
            if _names_role(policy["Properties"].get("Roles"), logical_id):
                documents[policy_id] = policy["Properties"]["PolicyDocument"]
    return documents, managed


def _aws_managed_arn(reference: Any) -> str:
    """An AWS managed policy's ARN as CDK writes it (`arn:${Partition}:iam::aws:policy/Name`)."""
    if isinstance(reference, str):
        return reference
    parts = reference.get("Fn::Join", ["", []])[1]
    name = "".join(part for part in parts if isinstance(part, str)).split(":iam::aws:policy/", 1)[-1]
    return f"arn:aws:iam::aws:policy/{name}"


def for_moto(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document as moto can evaluate it: each statement's actions on `*`, without conditions
    (the module's docstring says why)."""
    statements = document.get("Statement", [])
    statements = statements if isinstance(statements, list) else [statements]
    kept = []
    for statement in statements:
        item = {
            key: value
            for key, value in statement.items()
            if key not in ("Resource", "NotResource", "Condition")
        }
        kept.append({**item, "Resource": "*"})
    return {"Version": "2012-10-17", "Statement": kept}


def role_name(stack: StackArtifact, logical_id: str) -> str:
    """The role's name: its template's `RoleName`, else one made as CloudFormation makes a physical
    name (`<stack>-<logical id>`, within IAM's 64 characters; CloudFormation appends a random suffix),
    so the same role of two Regions' stacks gets two names, as in AWS."""
    name = stack.resources(ROLE_TYPE).get(logical_id, {}).get("Properties", {}).get("RoleName")
    return name if isinstance(name, str) else f"{stack.name}-{logical_id}"[:MAX_ROLE_NAME]


def role_arns(stack: StackArtifact) -> dict[tuple[str, str], str]:
    """`Fn::GetAtt [role, Arn]` of every role of the stack, as `make_role` names it in moto (for the
    resolver: access entries, trust policies and environments name roles by their ARN)."""
    return {
        (logical_id, "Arn"): f"arn:aws:iam::{ACCOUNT}:role/{role_name(stack, logical_id)}"
        for logical_id in stack.resources(ROLE_TYPE)
    }


def trust_for_moto(document: Mapping[str, Any], services: Mapping[str, str]) -> dict[str, Any]:
    """The trust policy with each service principal in `services` (e.g. `lambda.amazonaws.com`) also
    trusted as the IAM user standing in for that service (its ARN): moto evaluates a trust policy's
    `AWS` principals only, and the service itself cannot sign a request here. A statement that does not
    trust the service stays as it is, so a role Lambda could not assume cannot be assumed here either."""
    statements = document.get("Statement", [])
    kept = []
    for statement in statements if isinstance(statements, list) else [statements]:
        principal = dict(statement.get("Principal") or {})
        named = principal.get("Service", [])
        stand_ins = [services[s] for s in (named if isinstance(named, list) else [named]) if s in services]
        if stand_ins:
            principal["AWS"] = stand_ins
        kept.append({**statement, "Principal": principal} if principal else dict(statement))
    return {**document, "Statement": kept}


def make_role(
    iam: Any, stack: StackArtifact, function: LambdaFunction, services: Mapping[str, str] | None = None
) -> str:
    """Create the function's role in moto with every document its template attaches (again: the
    documents replace what a role of that name had), trusting the `services` stand-ins
    (`trust_for_moto`); its ARN.

    Raises:
        AssemblyError: the function's role is not in its stack.
    """
    logical_id = role_id(function)
    properties = stack.resources(ROLE_TYPE)[logical_id].get("Properties", {})
    name = role_name(stack, logical_id)
    trust = json.dumps(trust_for_moto(properties.get("AssumeRolePolicyDocument", {}), services or {}))
    try:
        arn = str(iam.create_role(RoleName=name, AssumeRolePolicyDocument=trust)["Role"]["Arn"])
    except iam.exceptions.EntityAlreadyExistsException:  # a second function of the role, or a restart
        arn = str(iam.get_role(RoleName=name)["Role"]["Arn"])
    documents, managed = role_documents(stack, logical_id)
    for policy_name, document in documents.items():
        iam.put_role_policy(
            RoleName=name, PolicyName=policy_name, PolicyDocument=json.dumps(for_moto(document))
        )
    for policy_arn in managed:
        iam.attach_role_policy(RoleName=name, PolicyArn=policy_arn)
    return arn


def assume(sts: Any, role_arn: str, session: str) -> dict[str, str]:
    """The session credentials of the role, as Lambda hands them to the function's environment."""
    credentials = sts.assume_role(RoleArn=role_arn, RoleSessionName=session, DurationSeconds=SESSION_SECONDS)[
        "Credentials"
    ]
    return {
        "AWS_ACCESS_KEY_ID": credentials["AccessKeyId"],
        "AWS_SECRET_ACCESS_KEY": credentials["SecretAccessKey"],
        "AWS_SESSION_TOKEN": credentials["SessionToken"],
    }
