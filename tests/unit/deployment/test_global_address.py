"""The deployment's global address: optional, checked whole, each bad value named by its key."""

from __future__ import annotations

from typing import Any

import pytest

from gco.deployment.config import ConfigError, parse_config
from gco.global_access.key_store import DEFAULT_KEYS_TABLE

REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
ADDRESS = {
    "domain_name": "api.example.com",
    "hosted_zone_id": "Z0123456789ABC",
    "hosted_zone_name": "example.com",
}


def _config(**address: Any) -> dict[str, Any]:
    return {"regions": REGIONS, "global_address": {**ADDRESS, **address}}


def test_absent_means_no_global_address() -> None:
    assert parse_config({"regions": REGIONS}).global_address is None


def test_defaults_and_the_order_of_the_regions() -> None:
    address = parse_config(_config(hosted_zone_name="example.com.")).global_address
    assert address is not None
    assert address.hosted_zone_name == "example.com"  # Route 53's trailing dot accepted and dropped
    assert address.keys_table_name == DEFAULT_KEYS_TABLE
    assert (address.health_check_interval_s, address.health_check_failure_threshold) == (10, 3)
    assert address.order(REGIONS) == REGIONS
    assert address.regional_name("us-west-2") == "us-west-2.api.example.com"
    nearest = parse_config(_config(region_order=["eu-west-1"])).global_address
    assert nearest is not None and nearest.order(REGIONS) == ["eu-west-1", "us-east-1", "us-west-2"]


def test_the_zone_apex_itself_may_be_the_address() -> None:
    address = parse_config(_config(domain_name="example.com")).global_address
    assert address is not None and address.domain_name == "example.com"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"domain_name": "Api.Example.com"},
            "gco.global_address.domain_name: 'Api.Example.com' is not a lower-case",
        ),
        (
            {"domain_name": "api.other.org"},
            "gco.global_address: domain_name 'api.other.org' is not in the hosted zone",
        ),
        ({"domain_name": "notexample.com"}, "is not in the hosted zone 'example.com'"),
        ({"hosted_zone_id": "/hostedzone/Z1"}, "gco.global_address.hosted_zone_id: '/hostedzone/Z1' is not"),
        (
            {"region_order": ["ap-south-1"]},
            "gco: global_address.region_order: 'ap-south-1' is not one of regions",
        ),
        ({"region_order": ["us-east-1", "us-east-1"]}, "region_order lists a Region twice"),
        ({"health_check_interval_s": 20}, "gco.global_address.health_check_interval_s: must be 10 or 30"),
        ({"health_check_failure_threshold": 11}, "gco.global_address.health_check_failure_threshold"),
        ({"extra": 1}, "gco.global_address.extra"),
    ],
)
def test_a_bad_value_is_named(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=None) as raised:
        parse_config(_config(**change))
    assert message in str(raised.value)


def test_every_region_needs_its_replica() -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({**_config(), "table_replicas": False})
    assert "global_address needs table_replicas: true" in str(raised.value)
    # one Region reads the home table itself
    assert parse_config({"regions": ["us-east-1"], "table_replicas": False, "global_address": ADDRESS})


def test_the_proxys_forwarding_is_the_stacks_not_the_config() -> None:
    forwarding = {"region": "us-east-1", "regions": ["us-east-1"], "domain": "api.example.com"}
    with pytest.raises(ConfigError) as raised:
        parse_config({**_config(), "proxy": {"forwarding": forwarding}})
    assert "proxy.forwarding is set by the stacks from global_address" in str(raised.value)
