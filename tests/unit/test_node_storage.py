"""Model storage sized for the model: the instance store table, the room a serving pod requests, and
the refusal of a model no GPU node of the Region can hold."""

from __future__ import annotations

from typing import Any

import pytest

from gco import node_storage
from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.spec import parse_spec
from gco.nodes import INSTANCE_SIZES
from gco.reconcile.access import RECONCILER_GRANT
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
    assert node_storage.instance_store_gib("p5.48xlarge") == 28610  # 8 x 3840 GB
    assert node_storage.instance_store_gib("p3.2xlarge") == 0
    assert node_storage.node_storage_gib("p3.2xlarge", 500) == 500
    assert node_storage.node_storage_gib("p3.2xlarge", None) is None


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
