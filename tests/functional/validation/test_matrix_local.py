"""The matrix on the local stack over real HTTP: a pass, each kind of failure, and what is left (nothing).

Every run ends with no record carrying the run's label and no object of its endpoints in any
Region, whatever failed; faults are injected explicitly (engine flags, a stuck HPA controller, an
edited proxy HPA, a store that refuses two deletes).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gco.endpoints import EndpointStore
from gco.endpoints.errors import StoreUnavailableError
from gco.endpoints.namespaces import SYSTEM_NAMESPACE
from gco.endpoints.record import EndpointRecord
from gco.evidence import LocalEvidenceStore
from gco.evidence.index import LocalEvidenceIndex
from gco.reconcile.objects import HPA
from gco.reconcile.proxy.render_proxy import PROXY_HPA
from gco.validation import OWNER_LABEL
from gco.validation.service import start
from tests.functional.validation.conftest import (
    StackFactory,
    assert_nothing_left,
    fake_table,
    first_failure,
    ports,
    run_matrix,
    steps,
    write_settings,
)
from tests.unit.reconcile.records import EAST
from tests.unit.validation.sample import SETTINGS


def test_a_full_pass_over_nginx_leaves_nothing(
    make_stack: StackFactory, store: EndpointStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack = make_stack(proxy="auto")
    if stack.ca_bundle is not None:
        monkeypatch.setenv("GCO_INVOKE_CA_BUNDLE", str(stack.ca_bundle))
    result = run_matrix(stack, store, tmp_path, run_id="a1")
    assert result.verdict == "pass", result.summary
    done = steps(tmp_path)
    names = [f"mx-a1-{f}-{r}" for f in ("vllm", "tgi") for r in ("baseline", "hpa")]
    for step in ("deploy", "ready", "health", "model_info", "request"):
        assert [s["endpoint"] for s in done if s["step"] == step] == names, step
    assert sorted(s["endpoint"] for s in done if s["step"] == "destroy") == sorted(names)  # concurrent
    assert [s["endpoint"] for s in done if s["step"] == "hpa"] == names[1::2]
    assert all(s["verdict"] == "pass" for s in done)
    assert [s["step"] for s in done][-6:] == [
        "proxy",
        "destroy",
        "destroy",
        "destroy",
        "destroy",
        "inventory",
    ]
    vllm_info = next(s for s in done if s["step"] == "model_info" and s["endpoint"] == names[0])
    assert vllm_info["data"]["launched_revision"] == SETTINGS["inference_runtimes"][0]["model_revision"]
    tgi_info = next(s for s in done if s["step"] == "model_info" and s["endpoint"] == names[2])
    assert tgi_info["data"]["served_revision"] == SETTINGS["inference_runtimes"][1]["model_revision"]
    hpa = next(s for s in done if s["step"] == "hpa")
    assert hpa["data"]["samples"][-2:] == [[2, 2], [2, 2]]
    record = LocalEvidenceStore(tmp_path / "run" / "evidence").get(result.evidence_id)
    assert (record.kind, record.claim_class, record.data["verdict"]) == ("matrix", "observed", "pass")
    assert record.identity["inference_runtimes"][0]["image"] == SETTINGS["inference_runtimes"][0]["image"]
    assert record.missing == [] and len(record.metrics) == len(done)
    builds = record.data["validated_builds"]  # each engine's build by digest, and the Region
    assert builds["region"] == SETTINGS["selected_region"]
    digests = [runtime["image"].rpartition("@")[2] for runtime in SETTINGS["inference_runtimes"]]
    assert [image["digest"] for image in builds["images"]] == digests
    index = LocalEvidenceIndex(tmp_path / "run" / "evidence")
    assert [index.find(builds["region"], digest) for digest in digests] == [result.evidence_id] * 2
    assert_nothing_left(stack, store, "a1")


@pytest.mark.parametrize(
    ("table_args", "endpoint", "step", "detail"),
    [
        (("tgi", ("{revision}", "f" * 40)), "mx-b1-tgi-baseline", "model_info", "serves revision 'ffff"),
        (("tgi",), "mx-b1-tgi-baseline", "request", "generated_text is not a non-empty string"),
    ],
    ids=["wrong-served-revision", "empty-generated-text"],
)
def test_a_wrong_answer_fails_its_step_and_everything_is_destroyed(
    make_stack: StackFactory,
    store: EndpointStore,
    tmp_path: Path,
    table_args: tuple[Any, ...],
    endpoint: str,
    step: str,
    detail: str,
) -> None:
    extra = ("--empty-output",) if step == "request" else ()
    stack = make_stack(table=fake_table(*table_args, extra=extra))
    result = run_matrix(stack, store, tmp_path, run_id="b1")
    assert result.verdict == "fail"
    failed = first_failure(tmp_path)
    assert (failed["step"], failed["endpoint"]) == (step, endpoint)
    assert detail in failed["detail"]
    assert result.failed_step == f"{step} {endpoint}"
    evidence = LocalEvidenceStore(tmp_path / "run" / "evidence").get(result.evidence_id)
    builds = evidence.data["validated_builds"]  # named by a failing run too, and indexed by none
    index = LocalEvidenceIndex(tmp_path / "run" / "evidence")
    assert index.find(builds["region"], builds["images"][0]["digest"]) is None
    assert (
        evidence.data["verdict"] == "fail"
        and "proxy" in evidence.missing
        and "hpa mx-b1-tgi-hpa" in evidence.missing
    )
    assert f"{step} {endpoint}" not in evidence.missing and "destroy mx-b1-tgi-hpa" not in evidence.missing
    assert [s["verdict"] for s in steps(tmp_path) if s["step"] == "destroy"] == ["pass"] * 4
    assert_nothing_left(stack, store, "b1")


@pytest.mark.slow
def test_an_hpa_stuck_at_one_fails(make_stack: StackFactory, store: EndpointStore, tmp_path: Path) -> None:
    stack = make_stack()
    stack.autoscalers[EAST].stuck = True
    result = run_matrix(stack, store, tmp_path, run_id="c1", hpa_timeout_seconds=3)
    assert result.verdict == "fail"
    failed = first_failure(tmp_path)
    assert (failed["step"], failed["endpoint"]) == ("hpa", "mx-c1-vllm-hpa")
    assert "current 1, ready 1 (want 2" in failed["detail"]
    assert_nothing_left(stack, store, "c1")


def test_a_proxy_hpa_that_is_not_container_resource_fails(
    make_stack: StackFactory, store: EndpointStore, tmp_path: Path
) -> None:
    stack = make_stack()
    api = stack.reconcilers.regions[EAST].api
    edited = api.get(HPA, SYSTEM_NAMESPACE, PROXY_HPA)
    assert edited is not None
    # Someone edits the proxy's HPA to a plain Resource metric (the pod's CPU, not the TLS container's).
    metric = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
    }
    api.apply_as(
        "kubectl-edit",
        {
            "apiVersion": edited["apiVersion"],
            "kind": edited["kind"],
            "metadata": {"name": PROXY_HPA, "namespace": SYSTEM_NAMESPACE},
            "spec": {"metrics": [metric]},
        },
    )
    result = run_matrix(stack, store, tmp_path, run_id="d1")
    assert result.verdict == "fail"
    failed = first_failure(tmp_path)
    assert (failed["step"], failed["endpoint"]) == ("proxy", None)
    assert "inference-proxy-hpa metric is 'Resource'" in failed["detail"]
    assert_nothing_left(stack, store, "d1")


class RefusesDeletes(EndpointStore):
    """The real store on the moto server, except that its first `failures` deletes of `name` fail
    as DynamoDB being unavailable does."""

    def __init__(self, store: EndpointStore, name: str, failures: int) -> None:
        super().__init__(store.client, store.table_name)
        self.name, self.failures = name, failures

    def update_desired_state(self, name: str, state: str, **fences: Any) -> EndpointRecord | None:
        if name == self.name and state == "deleted" and self.failures > 0:
            self.failures -= 1
            raise StoreUnavailableError("DynamoDB UpdateItem: ServiceUnavailable (injected)")
        return super().update_desired_state(name, state, **fences)


def test_a_destroy_failing_twice_then_passing(
    make_stack: StackFactory, store: EndpointStore, tmp_path: Path
) -> None:
    stack = make_stack()
    flaky = RefusesDeletes(store, "mx-e1-tgi-baseline", failures=2)
    path = write_settings(tmp_path / "settings.json", destroy_attempts=3)
    result = start(path, flaky, run_dir=tmp_path / "run", run_id="e1", **ports(stack))
    assert result.verdict == "pass", result.summary
    destroy = next(
        s for s in steps(tmp_path) if s["step"] == "destroy" and s["endpoint"] == "mx-e1-tgi-baseline"
    )
    assert (destroy["verdict"], destroy["attempts"]) == ("pass", 3)
    assert len(destroy["data"]["problems"]) == 2 and "injected" in destroy["data"]["problems"][0]
    assert_nothing_left(stack, store, "e1")


def test_a_record_of_the_same_name_without_the_label_is_left_untouched(
    make_stack: StackFactory, store: EndpointStore, tmp_path: Path
) -> None:
    stack = make_stack()
    spec = {
        "image": "vllm/vllm-openai:v0.6.3",
        "framework": "tgi",
        "port": 8080,
        "gpu_count": 0,
        "model_id": "m",
    }
    foreign = store.create("mx-f1-tgi-hpa", spec, [EAST], labels={"team": "other"})
    result = run_matrix(stack, store, tmp_path, run_id="f1")
    assert result.verdict == "fail"
    failed = first_failure(tmp_path)
    assert (failed["step"], failed["endpoint"]) == ("deploy", "mx-f1-tgi-hpa")
    assert "without the label gco-managed-inference-validation-owner=f1" in failed["detail"]
    destroyed = {s["endpoint"]: s["verdict"] for s in steps(tmp_path) if s["step"] == "destroy"}
    assert destroyed == {
        "mx-f1-vllm-baseline": "pass",
        "mx-f1-vllm-hpa": "pass",
        "mx-f1-tgi-baseline": "pass",
        "mx-f1-tgi-hpa": "skipped",
    }
    after = store.get("mx-f1-tgi-hpa", consistent_read=True)
    assert after is not None
    assert (after.lifecycle_id, after.desired_state, after.labels) == (
        foreign.lifecycle_id,
        "deploying",
        {"team": "other"},
    )
    assert OWNER_LABEL not in after.labels
    assert_nothing_left(stack, store, "f1")


def test_the_settings_file_is_read_as_yaml_too(tmp_path: Path) -> None:
    from gco.validation.service import identity_of

    as_json = write_settings(tmp_path / "s.json")
    as_yaml = tmp_path / "s.yaml"
    as_yaml.write_text(json.dumps(SETTINGS, indent=1), encoding="utf-8")  # JSON is YAML
    assert identity_of(as_json) == identity_of(as_yaml)
