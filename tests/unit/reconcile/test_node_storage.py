"""Model storage sized for the model: the instance store table, the room a serving pod requests, and
the refusal of a model no GPU node of the Region can hold."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import moto
import pytest

from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.spec import parse_spec
from gco.reconcile import node_storage
from gco.reconcile.access import RECONCILER_GRANT
from gco.reconcile.nodes import INSTANCE_SIZES
from gco.reconcile.refusals import refusal
from gco.reconcile.render import render
from gco.reconcile.settings import RenderSettings
from tests.unit.reconcile.records import EAST, make_record

SOURCE = "s3://my-models/llama-70b/"


def serving_pod(spec: dict[str, Any]) -> dict[str, Any]:
    deployment = next(o for o in render(make_record(spec), EAST) if o["kind"] == "Deployment")
    pod: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return pod


def test_every_gpu_instance_type_has_its_instance_store_listed_or_is_known_to_have_none() -> None:
    assert set(node_storage.INSTANCE_STORE_GB) <= set(INSTANCE_SIZES)
    assert {"p3.2xlarge", "p3.8xlarge", "p3.16xlarge"} == node_storage.WITHOUT_INSTANCE_STORE
    assert node_storage.instance_store_gib("g6e.xlarge") == 232  # 250 GB
    assert node_storage.instance_store_gib("p5.48xlarge") == 28312  # 8 x 3800 GB
    assert node_storage.instance_store_gib("p3.2xlarge") == 0
    assert node_storage.node_storage_gib("p3.2xlarge", 500) == 500
    assert node_storage.node_storage_gib("p3.2xlarge", None) is None


def test_the_table_agrees_with_what_ec2_describe_instance_types_answers() -> None:
    """moto keeps EC2's DescribeInstanceTypes answers (`InstanceStorageInfo`) for every type it
    knows; each row here has the same disks and total, and a type moto lists without instance store
    is not in the table. (moto has no P3: see gco.reconcile.node_storage.)"""
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    answers: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    checked = 0
    for item in INSTANCE_SIZES:
        if item not in answers:
            continue
        storage = answers[item].get("InstanceStorageInfo")
        if storage is None:
            assert item not in node_storage.INSTANCE_STORE_GB
            continue
        disks = [(disk["Count"], disk["SizeInGB"]) for disk in storage["Disks"]]
        assert [node_storage.INSTANCE_STORE_DISKS[item]] == disks, item
        assert node_storage.INSTANCE_STORE_GB[item] == storage["TotalSizeInGB"], item
        checked += 1
    assert checked == len(node_storage.INSTANCE_STORE_GB)  # every row was checked


def test_the_deploy_guide_lists_every_type_as_the_table_does() -> None:
    guide = (Path(__file__).parents[3] / "docs" / "deploy.md").read_text(encoding="utf-8")
    for item in INSTANCE_SIZES:
        (row,) = [line for line in guide.splitlines() if line.startswith(f"| {item} |")]
        if item in node_storage.INSTANCE_STORE_DISKS:
            count, gb = node_storage.INSTANCE_STORE_DISKS[item]
            assert f"| {count} x {gb} GB NVMe SSD | {node_storage.instance_store_gib(item)} GiB |" in row
        else:
            assert "| none (EBS only) | root volume, `gpu_nodes.model_disk_gib` |" in row


def test_a_sized_model_gets_its_room_on_the_node_and_its_synced_directory_is_limited_to_it() -> None:
    pod = serving_pod({"model_source": SOURCE, "model_size_gib": 140})
    (container,) = pod["containers"]
    assert container["resources"]["requests"]["ephemeral-storage"] == "154Gi"  # 140 GiB + 10%
    (model,) = [v for v in pod["volumes"] if v["name"] == "model"]
    assert model == {"name": "model", "emptyDir": {"sizeLimit": "154Gi"}}
    hub = serving_pod({"model_size_gib": 16})  # a Hub model: the download cache in the writable layer
    assert hub["containers"][0]["resources"]["requests"]["ephemeral-storage"] == "18Gi"
    unsized = serving_pod({"model_source": SOURCE})
    assert "ephemeral-storage" not in unsized["containers"][0]["resources"].get("requests", {})
    assert [v for v in unsized["volumes"] if v["name"] == "model"] == [{"name": "model", "emptyDir": {}}]


def test_a_size_out_of_bounds_is_refused_naming_the_field() -> None:
    for size in (0, 100_001, "big"):
        with pytest.raises(InvalidSpecError) as raised:
            parse_spec({"image": "vllm/vllm-openai:v0.6.3", "model_size_gib": size})
        assert raised.value.field == "spec.model_size_gib"


def test_a_model_no_gpu_node_here_can_hold_is_refused_naming_the_sizes() -> None:
    settings = RenderSettings(gpu_instance_types=("g6e.xlarge", "g6e.2xlarge"), gpu_root_gib=100)
    big = make_record({"model_source": SOURCE, "model_size_gib": 500, "gpu_type": "L40S"})
    reason = refusal(big, EAST, RECONCILER_GRANT, settings)
    assert reason == (
        "model_size_gib: 500 GiB needs 550 GiB of node storage (with 10% headroom), more than any GPU node "
        "here offers (g6e.xlarge 232 GiB instance store, g6e.2xlarge 419 GiB instance store)"
    )
    fits = make_record({"model_source": SOURCE, "model_size_gib": 300})
    assert refusal(fits, EAST, RECONCILER_GRANT, settings) is None  # g6e.2xlarge holds 330 GiB
    four_gpus = make_record({"model_size_gib": 300, "gpu_count": 4})  # no type here has 4 GPUs: not refused
    assert refusal(four_gpus, EAST, RECONCILER_GRANT, settings) is None
    any_gpu = make_record({"model_source": SOURCE, "model_size_gib": 500})
    p3 = RenderSettings(gpu_instance_types=("p3.8xlarge",), gpu_root_gib=100)
    assert "p3.8xlarge 100 GiB root volume" in (refusal(any_gpu, EAST, RECONCILER_GRANT, p3) or "")
    unknown_root = RenderSettings(gpu_instance_types=("p3.8xlarge",))
    assert refusal(any_gpu, EAST, RECONCILER_GRANT, unknown_root) is None
    assert refusal(big, EAST, RECONCILER_GRANT, RenderSettings()) is None  # types not known here
