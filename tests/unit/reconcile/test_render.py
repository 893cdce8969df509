"""Golden tests of rendered objects for every spec feature, each validated against the real
Kubernetes OpenAPI schemas (kubernetes-validate, strict) or, for KEDA, the CRD's schema subset.

Regenerate the golden files with GCO_UPDATE_GOLDEN=1 after an intended change, and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from gco.endpoints.record import DEFAULT_NAMESPACE
from gco.reconcile.access import reconciler_grant
from gco.reconcile.objects import (
    ENDPOINT_LABEL,
    GENERATION_ANNOTATION,
    HASH_ANNOTATION,
    KINDS,
    LIFECYCLE_ANNOTATION,
    ObjectRef,
    content_hash,
    kind_of,
    selector,
)
from gco.reconcile.render import desired_replicas, render
from gco.reconcile.render_scaling import uses_keda
from gco.reconcile.settings import RenderSettings
from tests.unit.reconcile.keda_schema import SCALED_OBJECT_SCHEMA
from tests.unit.reconcile.records import DIGEST_IMAGE, EAST, GEN_EAST, LIFECYCLE, WEST, make_record

GOLDEN = Path(__file__).parent / "golden"
K8S_VERSION = "1.30"

FEATURES: dict[str, dict[str, Any]] = {
    "basic": {},
    "tgi_model_source": {
        "framework": "tgi",
        "port": 8080,
        "model_source": "s3://models-bucket/llama",
        "model_revision": "0123456789abcdef0123456789abcdef01234567",
        "gpu_count": 2,
        "env": {"HF_HUB_OFFLINE": "1"},
        "resources": {"requests": {"cpu": "4", "memory": "32Gi"}, "limits": {"memory": "48Gi"}},
    },
    "sglang_spot_tolerations": {
        "framework": "sglang",
        "image": DIGEST_IMAGE,
        "require_digest": True,
        "capacity_type": "spot",
        "gpu_type": "a10g",
        "gpu_count": 4,
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"}],
        "node_selector": {"team": "ml"},
        "command": ["python3", "-m", "sglang.launch_server"],
        "extra_args": ["--mem-fraction-static", "0.85"],
    },
    "hpa_cpu_memory": {
        "autoscaling": {
            "enabled": True,
            "min_replicas": 2,
            "max_replicas": 6,
            "metrics": [{"type": "cpu", "target": 70}, {"type": "memory", "target": 80}],
        }
    },
    "keda_gpu_queue": {
        "autoscaling": {
            "enabled": True,
            "min_replicas": 0,
            "max_replicas": 4,
            "metrics": [
                {"type": "gpu", "target": 75},
                {"type": "gpu_memory", "target": 85.5},
                {"type": "queue_depth", "target": 8},
            ],
        }
    },
    "canary": {"replicas": 3, "canary": {"image": "vllm/vllm-openai:v0.6.4", "weight": 25, "replicas": 1}},
    "mooncake_disaggregated_rdma": {
        "mooncake": {
            "mode": "disaggregated",
            "prefill_replicas": 2,
            "decode_replicas": 3,
            "transfer_protocol": "rdma",
            "proxy_image": "ghcr.io/kvcache-ai/mooncake-proxy:0.3",
            "autoscaling": {
                "decode": {
                    "enabled": True,
                    "min_replicas": 1,
                    "max_replicas": 8,
                    "metrics": [{"type": "queue_depth", "target": 4}],
                }
            },
        }
    },
    "mooncake_store": {"mooncake": {"mode": "store", "store_global_segment_size": "8Gi"}},
    "mooncake_both": {
        "mooncake": {"mode": "both", "proxy_image": "ghcr.io/kvcache-ai/mooncake-proxy:0.3"},
        "accelerator": "neuron",
    },
}


def validate(obj: dict[str, Any]) -> None:
    if obj["kind"] == "ScaledObject":
        jsonschema.validate(obj, SCALED_OBJECT_SCHEMA)
    else:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def rendered(feature: str, **fields: Any) -> list[dict[str, Any]]:
    return render(make_record(FEATURES[feature], **fields), EAST)


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_rendered_objects_match_golden_and_schema(feature: str) -> None:
    objects = rendered(feature)
    for obj in objects:
        validate(obj)
    path = GOLDEN / f"{feature}.json"
    text = json.dumps(objects, indent=2, sort_keys=True) + "\n"
    if os.environ.get("GCO_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text)
    assert text == path.read_text(), f"rendering of {feature} changed; GCO_UPDATE_GOLDEN=1 to accept"


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_stopped_renders_zero_replicas_without_autoscalers(feature: str) -> None:
    objects = rendered(feature, desired_state="stopped")
    for obj in objects:
        validate(obj)
    kinds = {obj["kind"] for obj in objects}
    assert not kinds & {"HorizontalPodAutoscaler", "ScaledObject", "PodDisruptionBudget"}
    assert all(obj["spec"]["replicas"] == 0 for obj in objects if obj["kind"] == "Deployment")


@pytest.mark.parametrize("feature", sorted(FEATURES))
def test_every_rendered_object_lies_where_the_reconciler_lists_endpoint_objects(feature: str) -> None:
    grant = reconciler_grant([DEFAULT_NAMESPACE, "team-a"])
    scopes = {(namespace, kind.kind) for namespace, kind in grant.object_scopes(KINDS)}
    for namespace in (DEFAULT_NAMESPACE, "team-a"):
        for obj in rendered(feature, namespace=namespace):
            assert (obj["metadata"]["namespace"], obj["kind"]) in scopes, ObjectRef.of(obj)


def test_every_object_carries_fencing_labels_and_is_deterministic() -> None:
    first, second = rendered("canary"), rendered("canary")
    assert first == second
    names = [ObjectRef.of(obj).key for obj in first]
    assert len(names) == len(set(names))
    for obj in first:
        meta = obj["metadata"]
        assert meta["labels"][ENDPOINT_LABEL] == "llama"
        assert meta["labels"]["gco.dev/lifecycle"] == LIFECYCLE[:32]
        assert meta["labels"]["gco.dev/region-generation"] == GEN_EAST[:32]
        assert meta["annotations"][LIFECYCLE_ANNOTATION] == LIFECYCLE
        assert meta["annotations"][GENERATION_ANNOTATION] == GEN_EAST
        unsealed = json.loads(json.dumps(obj))
        digest = unsealed["metadata"]["annotations"].pop(HASH_ANNOTATION)
        assert digest == content_hash(unsealed)
        assert kind_of(obj).kind == obj["kind"]


def test_region_generation_differs_per_region() -> None:
    record = make_record()
    east, west = render(record, EAST), render(record, WEST)
    assert east[0]["metadata"]["labels"]["gco.dev/region"] == EAST
    digests = [objects[0]["metadata"]["annotations"][HASH_ANNOTATION] for objects in (east, west)]
    assert digests[0] != digests[1]


def test_gpu_pods_get_resources_toleration_and_probes() -> None:
    deployment = rendered("tgi_model_source")[0]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/health"
    assert pod["initContainers"][0]["args"][3] == "s3://models-bucket/llama"
    # The sync's Region is given: the GPU nodes' IMDS answers no pod (stacks/constructs/node_storage.py).
    sync_env = {item["name"]: item["value"] for item in pod["initContainers"][0]["env"]}
    assert sync_env == {"AWS_DEFAULT_REGION": EAST, "AWS_REGION": EAST}
    env = {item["name"]: item["value"] for item in container["env"]}
    assert (env["MODEL_ID"], env["PORT"], env["NUM_SHARD"]) == ("/models", "8080", "2")


def test_cpu_only_endpoint_has_no_gpu_toleration() -> None:
    pod = rendered("basic")[0]["spec"]["template"]["spec"]
    assert "tolerations" in pod
    objects = render(make_record({"gpu_count": 0, "health_check_path": "/ready"}), EAST)
    pod = objects[0]["spec"]["template"]["spec"]
    assert "tolerations" not in pod
    assert "nvidia.com/gpu" not in pod["containers"][0]["resources"].get("limits", {})
    assert pod["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/ready"


def test_autoscaled_deployment_leaves_replicas_to_the_autoscaler() -> None:
    objects = rendered("hpa_cpu_memory")
    deployment = next(obj for obj in objects if obj["kind"] == "Deployment")
    assert desired_replicas(deployment) is None
    hpa = next(obj for obj in objects if obj["kind"] == "HorizontalPodAutoscaler")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6)
    keda = next(obj for obj in rendered("keda_gpu_queue") if obj["kind"] == "ScaledObject")
    assert keda["spec"]["minReplicaCount"] == 0
    assert [trigger["name"] for trigger in keda["spec"]["triggers"]] == ["gpu", "gpu-memory", "queue-depth"]
    assert keda["spec"]["triggers"][1]["metadata"]["threshold"] == "85.5"


def test_route_sends_the_path_to_the_shared_proxy_with_canary_weight() -> None:
    route = next(obj for obj in rendered("canary") if obj["kind"] == "Ingress")
    assert route["metadata"]["namespace"] == "gco-system"
    path = route["spec"]["rules"][0]["http"]["paths"][0]
    assert path["path"] == "/inference/llama"
    assert path["backend"]["service"]["name"] == "inference-proxy"
    annotations = route["metadata"]["annotations"]
    assert annotations["gco.dev/canary-weight"] == "25"
    assert annotations["gco.dev/canary-upstream"] == "http://llama--canary.gco-inference.svc:8000"


def test_mooncake_roles() -> None:
    names = {obj["metadata"]["name"] for obj in rendered("mooncake_both") if obj["kind"] == "Deployment"}
    assert names == {"llama--store", "llama--prefill", "llama--decode", "llama--proxy"}
    objects = rendered("mooncake_disaggregated_rdma")
    by_name = {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == "Deployment"}
    prefill = by_name["llama--prefill"]
    container = prefill["spec"]["template"]["spec"]["containers"][0]
    assert prefill["spec"]["replicas"] == 2
    assert container["resources"]["limits"]["vpc.amazonaws.com/efa"] == "1"
    args = container["args"]
    assert '"kv_role": "kv_producer"' in args[args.index("--kv-transfer-config") + 1]
    neuron = next(obj for obj in rendered("mooncake_both") if obj["metadata"]["name"] == "llama--decode")
    limits = neuron["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "aws.amazon.com/neuron" in limits


def test_nothing_renders_for_non_targets_deleted_and_legacy_records() -> None:
    assert render(make_record(target_regions=[WEST]), EAST) == []
    assert render(make_record(desired_state="deleted"), EAST) == []
    assert render(make_record(lifecycle_id=None), EAST) == []


def test_settings_and_helpers() -> None:
    settings = RenderSettings(ingress_class="nginx", gpu_taint_key="gpu")
    objects = render(make_record(), EAST, settings)
    assert objects[-1]["spec"]["ingressClassName"] == "nginx"
    assert objects[0]["spec"]["template"]["spec"]["tolerations"][0]["key"] == "gpu"
    assert selector({"b": "2", "a": "1"}) == "a=1,b=2"
    assert not uses_keda(make_record().spec.autoscaling)
    with pytest.raises(KeyError):
        kind_of({"apiVersion": "v1", "kind": "Pod"})
