"""The deployment's one global address: `global_address` in the `gco` context of `cdk.json`.

Absent, a deployment has no global resources (each Region keeps only its IAM `InvokeUrl`). Present,
every Regional stack gets an ACM certificate, the API Gateway custom domains `<domain_name>` and
`<region>.<domain_name>`, the global REST API with its bearer-key authorizer, a Route 53 health
check and its latency record, and the global stack gets the keys table (`docs/global.md`).

The hosted zone is named by id and name, never looked up, so `cdk synth` needs no account: the
stacks build it with `aws_route53.HostedZone.from_hosted_zone_attributes`. `gco doctor` checks that the zone
exists, is public and holds the name (`gco.doctor.global_checks`).
"""

# No `from __future__ import annotations` in the modules of pydantic models (see gco/endpoints/record.py).

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gco.global_access.key_store import DEFAULT_KEYS_TABLE

# Route 53 hosted zone ids: "Z" and upper-case letters and digits (e.g. Z0123456789ABCDEFGHIJ).
HOSTED_ZONE_ID = re.compile(r"^Z[A-Z0-9]{1,32}$")
# A DNS name of lower-case labels (RFC 1035 2.3.1; API Gateway custom domain names are lower-case).
DNS_NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
# The longest Region name (`ap-southeast-4`, `us-gov-west-1`) plus the dot before the domain: a
# Regional name `<region>.<domain>` must still fit the 253 characters of a DNS name.
REGION_LABEL_ROOM = 15


class GlobalAddressConfig(BaseModel):
    """One DNS name for every caller, in a public hosted zone the deployer owns.

    Attributes:
        domain_name: the global name (`api.example.com`); each Region also answers at
            `<region>.<domain_name>`, the name another Region's proxy forwards to.
        hosted_zone_id, hosted_zone_name: the public Route 53 zone holding `domain_name`, where the
            certificates are validated and the records written.
        region_order: the Regions nearest-first for fallback, each one of `regions`; Regions left
            out come after, in `regions` order. Default: `regions` in config order.
        keys_table_name: the bearer keys' global table (partition key `key_id`).
        health_check_interval_s: Route 53's request interval, 10 or 30 seconds (fixed once created).
        health_check_failure_threshold: consecutive failed checks before a Region leaves DNS (1-10).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    domain_name: str = Field(max_length=253 - REGION_LABEL_ROOM)
    hosted_zone_id: str
    hosted_zone_name: str
    region_order: list[str] = Field(default_factory=list)
    keys_table_name: str = Field(default=DEFAULT_KEYS_TABLE, pattern=r"^[A-Za-z0-9_.-]{3,255}$")
    health_check_interval_s: int = 10
    health_check_failure_threshold: int = Field(default=3, ge=1, le=10)

    @field_validator("domain_name", "hosted_zone_name", mode="before")
    @classmethod
    def _dns_name(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.removesuffix(".")  # a zone's name as Route 53 prints it ends in a dot
            if not DNS_NAME.match(value):
                raise ValueError(f"{value!r} is not a lower-case DNS name (labels of a-z, 0-9 and -)")
        return value

    @field_validator("hosted_zone_id")
    @classmethod
    def _zone_id(cls, value: str) -> str:
        if not HOSTED_ZONE_ID.match(value):
            raise ValueError(f"{value!r} is not a Route 53 hosted zone id (Z followed by A-Z and 0-9)")
        return value

    @field_validator("health_check_interval_s")
    @classmethod
    def _interval(cls, value: int) -> int:
        # HealthCheckConfig.RequestInterval: "10 or 30" (Route 53 API Reference).
        if value not in (10, 30):
            raise ValueError("must be 10 or 30 (the request intervals Route 53 offers)")
        return value

    @model_validator(mode="after")
    def _in_zone(self) -> "GlobalAddressConfig":
        zone = self.hosted_zone_name
        if self.domain_name != zone and not self.domain_name.endswith(f".{zone}"):
            raise ValueError(f"domain_name {self.domain_name!r} is not in the hosted zone {zone!r}")
        if len(set(self.region_order)) != len(self.region_order):
            raise ValueError("region_order lists a Region twice")
        return self

    def regional_name(self, region: str) -> str:
        """`<region>.<domain_name>`: the Region's own name, where forwarded requests go."""
        return f"{region}.{self.domain_name}"

    def order(self, regions: list[str]) -> list[str]:
        """Every Region of the deployment, nearest-first: `region_order`, then the rest of `regions`."""
        return list(dict.fromkeys([*self.region_order, *regions]))
