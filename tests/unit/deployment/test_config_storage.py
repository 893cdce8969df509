"""The GPU nodes' model storage settings: `gpu_nodes.model_disk_gib` is the root volume of the
instance types without instance store (p3), checked where it would size nothing."""

from __future__ import annotations

import pytest

from gco.deployment.config import ConfigError, parse_config

GROUP = {"min_size": 0, "max_size": 2, "desired_size": 0}


def test_the_model_disk_sizes_the_root_volume_of_types_without_instance_store() -> None:
    config = parse_config({"gpu_nodes": {**GROUP, "instance_types": ["p3.8xlarge"], "model_disk_gib": 800}})
    assert config.gpu_nodes.model_root_gib == 800
    assert config.gpu_nodes.disk_size_gib == 100  # the instance store groups' root volume is unchanged
    plain = parse_config({"gpu_nodes": {**GROUP, "instance_types": ["p3.8xlarge"], "disk_size_gib": 300}})
    assert plain.gpu_nodes.model_root_gib == 300  # unset: the root volume as configured


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            {"gpu_nodes": {**GROUP, "instance_types": ["g6e.xlarge", "p4d.24xlarge"], "model_disk_gib": 800}},
            "gco.gpu_nodes: model_disk_gib sizes the root volume of instance types without instance store "
            "(p3); every one of g6e.xlarge, p4d.24xlarge has instance store",
        ),
        (
            {"gpu_nodes": {**GROUP, "instance_types": ["p3.2xlarge"], "model_disk_gib": 10}},
            "gco.gpu_nodes.model_disk_gib: Input should be greater than or equal to 20",
        ),
        (
            {"system_nodes": {**GROUP, "instance_types": ["m7i.large"], "model_disk_gib": 800}},
            "gco: system_nodes.model_disk_gib applies to GPU node groups only",
        ),
    ],
)
def test_a_model_disk_that_sizes_nothing_or_is_out_of_range_is_refused(
    raw: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(raw)
    assert str(caught.value).startswith(message)
