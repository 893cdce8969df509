"""The deployment's validation policy: `off`, `warn` or `enforce`, and where the evidence is.

`cdk.json` (`gco.validation_policy`, `gco.deployment.config`) decides it; the global stack writes it,
with the evidence bucket's name, to the SSM parameter `/<prefix>/validation-policy` in the home
Region (a JSON String `{"policy": ..., "evidence_bucket": ...}`), and the CLI reads it there with
one `ssm:GetParameter`. Why a parameter, not the endpoint table: the table holds one item per
endpoint and every reader scans it as records (a settings item would be a record gco cannot read);
a parameter is read by name, versioned by SSM, and writable only by whom IAM lets (the stack). A
deployment without the parameter (one older than the policy) is `off`.

The local stack writes the same parameter into its moto server (`gco local up --validation-policy`),
and `gco local env` exports `GCO_VALIDATION_POLICY`. That variable can only make the policy
stricter than the parameter's, never weaker: an operator's shell cannot switch `enforce` off.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gco import aws
from gco.admission.errors import PolicyError
from gco.endpoints.admissions import POLICIES, Policy
from gco.env import EVIDENCE_BUCKET_ENV, VALIDATION_POLICY_ENV
from gco.front_door import DEFAULT_PREFIX, PREFIX_ENV

PARAMETER_LEAF = "validation-policy"
DEFAULT_POLICY: Policy = "off"


def parameter_name(prefix: str) -> str:
    """`/<prefix>/validation-policy`: the stack writes it, the CLI reads it."""
    return f"/{prefix}/{PARAMETER_LEAF}"


class PolicySetting(BaseModel):
    """The parameter's value."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    policy: Policy = DEFAULT_POLICY
    evidence_bucket: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")

    def to_parameter(self) -> str:
        return json.dumps(self.model_dump(exclude_none=True), sort_keys=True)


def parse_setting(text: str, where: str) -> PolicySetting:
    """The parameter's JSON value.

    Raises:
        PolicyError: not JSON, or not a policy of off, warn, enforce.
    """
    try:
        return PolicySetting.model_validate_json(text)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "value"
        raise PolicyError(f"{where}: {field}: {first['msg']}") from None


def check_policy(value: str, where: str) -> Policy:
    """`value` as a policy.

    Raises:
        PolicyError: not one of off, warn, enforce.
    """
    if value not in POLICIES:
        raise PolicyError(f"{where}: {value!r} is not one of {', '.join(POLICIES)}")
    return value  # type: ignore[return-value]


def stricter(first: Policy, second: Policy) -> Policy:
    """The stricter of two policies (off < warn < enforce)."""
    return first if POLICIES.index(first) >= POLICIES.index(second) else second


class SsmPolicySource:
    """The parameter in SSM; stand-in in tests: the moto server's SSM over HTTP."""

    def __init__(self, client: Any, prefix: str = DEFAULT_PREFIX) -> None:
        self.client = client
        self.name = parameter_name(prefix)

    def read(self) -> PolicySetting | None:
        """The setting, or None where no parameter exists (a deployment older than the policy).

        Raises:
            PolicyError: SSM refused or could not be reached, or the value is not a setting.
        """
        try:
            value = self.client.get_parameter(Name=self.name)["Parameter"]["Value"]
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ParameterNotFound":
                return None
            raise PolicyError(f"cannot read the validation policy {self.name}: {error}") from error
        except BotoCoreError as error:
            raise PolicyError(f"cannot read the validation policy {self.name}: {error}") from error
        return parse_setting(str(value), self.name)

    def write(self, setting: PolicySetting) -> None:
        """Write the parameter (the local stack's `up`; in AWS the global stack owns it).

        Raises:
            PolicyError: SSM refused or could not be reached.
        """
        try:
            self.client.put_parameter(
                Name=self.name, Value=setting.to_parameter(), Type="String", Overwrite=True
            )
        except (ClientError, BotoCoreError) as error:
            raise PolicyError(f"cannot write the validation policy {self.name}: {error}") from error


def effective(parameter: PolicySetting | None, environ: Mapping[str, str]) -> PolicySetting:
    """The policy in force: the parameter's, made stricter by `GCO_VALIDATION_POLICY`; the evidence
    bucket the parameter names, else `GCO_EVIDENCE_BUCKET`.

    Raises:
        PolicyError: `GCO_VALIDATION_POLICY` is not a policy.
    """
    setting = parameter or PolicySetting()
    policy = setting.policy
    if environ.get(VALIDATION_POLICY_ENV):
        policy = stricter(policy, check_policy(environ[VALIDATION_POLICY_ENV], VALIDATION_POLICY_ENV))
    bucket = setting.evidence_bucket or environ.get(EVIDENCE_BUCKET_ENV) or None
    return PolicySetting(policy=policy, evidence_bucket=bucket)


def read_policy(endpoint_url: str | None = None, environ: Mapping[str, str] | None = None) -> PolicySetting:
    """The policy in force for this deployment (prefix from `GCO_PREFIX`), read in the home Region.

    Raises:
        PolicyError: the parameter cannot be read or is malformed, or the variable is not a policy.
    """
    env = os.environ if environ is None else environ
    client = aws.client("ssm", region=aws.home_region(), endpoint_url=endpoint_url)
    source = SsmPolicySource(client, env.get(PREFIX_ENV) or DEFAULT_PREFIX)
    return effective(source.read(), env)
