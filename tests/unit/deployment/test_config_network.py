"""The network and alarm settings of the deployment config: distinct Regional networks by default,
explicit networks checked for overlap, alarm subscriptions checked one by one."""

from __future__ import annotations

import pytest

from gco.deployment.config import ConfigError, parse_config

THREE = ["us-east-1", "us-west-2", "eu-west-1"]


def test_default_networks_are_distinct_per_region() -> None:
    config = parse_config({"regions": THREE})
    assert [config.vpc_cidr(r) for r in THREE] == ["10.64.0.0/16", "10.65.0.0/16", "10.66.0.0/16"]
    assert config.network.nat_per_zone is False and config.network.vpc_endpoints is True


def test_named_zones_are_kept_per_region() -> None:
    config = parse_config({"network": {"availability_zones": {"us-east-1": ["us-east-1c", "us-east-1e"]}}})
    assert config.network.availability_zones == {"us-east-1": ["us-east-1c", "us-east-1e"]}


def test_an_explicit_network_replaces_the_default_of_its_region() -> None:
    config = parse_config({"regions": THREE, "network": {"vpc_cidrs": {"eu-west-1": "172.20.0.0/16"}}})
    assert config.vpc_cidr("eu-west-1") == "172.20.0.0/16"
    assert config.vpc_cidr("us-west-2") == "10.65.0.0/16"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"regions": THREE, "network": {"vpc_cidrs": {"eu-west-1": "10.64.0.0/16"}}},
            "gco: network.vpc_cidrs: 10.64.0.0/16 and 10.64.0.0/16 overlap",
        ),
        (
            {"network": {"vpc_cidrs": {"ap-south-1": "10.90.0.0/16"}}},
            "gco: network.vpc_cidrs: 'ap-south-1' is not one of regions",
        ),
        (
            {"network": {"vpc_cidrs": {"us-east-1": "10.0.0.0/8"}}},
            "gco.network.vpc_cidrs: '10.0.0.0/8' must be",
        ),
        ({"network": {"base_cidr": "nonsense"}}, "gco.network.base_cidr: 'nonsense' is not an IPv4 network"),
        (  # an ALB needs at least a /27 per subnet
            {"network": {"load_balancer_subnet_mask": 28}},
            "gco.network.load_balancer_subnet_mask: Input should be less than or equal to 27",
        ),
        (
            {"network": {"availability_zones": {"us-east-1": ["us-east-1a"]}}},
            "gco.network.availability_zones: us-east-1: name 2 different zones",
        ),
        (
            {"network": {"availability_zones": {"us-east-1": ["us-east-1a", "us-west-2b"]}}},
            "gco.network.availability_zones: us-east-1: 'us-west-2b' is not an Availability Zone",
        ),
        (
            {"network": {"availability_zones": {"eu-west-1": ["eu-west-1a", "eu-west-1b"]}}},
            "gco: network.availability_zones: 'eu-west-1' is not one of regions",
        ),
        ({"alarms": {"emails": ["not-mail"]}}, "gco.alarms.emails: 'not-mail' is not an email address"),
        ({"alarms": {"topic_arns": ["arn:aws:sqs:us-east-1:1:q"]}}, "gco.alarms.topic_arns: 'arn:aws:sqs"),
        (
            {
                "system_nodes": {
                    "instance_types": ["m7i.large"],
                    "min_size": 2,
                    "max_size": 4,
                    "desired_size": 2,
                    "capacity_type": "both",
                }
            },
            "gco: system_nodes.capacity_type both applies to GPU node groups only",
        ),
    ],
)
def test_bad_network_and_alarm_values_are_refused(raw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert str(caught.value).startswith(message)


def test_a_base_too_small_for_the_regions_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"^gco: network.base_cidr 10.64.0.0/16 holds 1 /16 networks"):
        parse_config({"regions": THREE, "network": {"base_cidr": "10.64.0.0/16"}})


def test_a_prefix_whose_bucket_names_exceed_63_characters_is_refused() -> None:
    long_home = {"prefix": "abcdefghijklmnop", "home_region": "ap-southeast-2", "regions": ["ap-southeast-2"]}
    with pytest.raises(
        ConfigError, match=r"^gco: prefix 'abcdefghijklmnop' makes bucket names of 67 characters"
    ):
        parse_config(long_home)
    assert parse_config({**long_home, "prefix": "abcdefghijkl"}).prefix == "abcdefghijkl"


@pytest.mark.parametrize(
    "image",
    [
        "111122223333.dkr.ecr.us-east-1.amazonaws.com/gco-runner:latest",  # a tag, not a digest
        "docker.io/library/gco-runner@sha256:" + "a" * 64,  # not ECR: the role pulls from ECR only
    ],
)
def test_a_prebuilt_runner_image_must_be_an_ecr_image_pinned_by_digest(image: str) -> None:
    with pytest.raises(ConfigError, match=r"^gco.runner.image_uri: String should match pattern"):
        parse_config({"runner": {"image_uri": image}})


def test_runner_instance_types_in_order_without_repeats() -> None:
    config = parse_config({"runner": {"fallback_instance_types": ["g6.2xlarge", "g6e.xlarge", "g6.2xlarge"]}})
    assert config.runner.instance_types == ["g6e.xlarge", "g6.2xlarge"]
