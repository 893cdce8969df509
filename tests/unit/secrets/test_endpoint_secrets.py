"""Secrets for endpoint pods: the spec's `secret_env`, the allowed list, the rendered references, the
Kubernetes Secret and the grant that lets the reconciler write it (by name only)."""

from __future__ import annotations

import base64
import json

import pytest

from gco.endpoints.errors import InvalidSpecError
from gco.endpoints.spec import SecretEnvRef, parse_spec
from gco.reconcile.access import RECONCILER_GRANT, RUNNER_GRANT
from gco.reconcile.environment import ReconcilerEnvironment
from gco.reconcile.render import render
from gco.reconcile.settings import RenderSettings
from gco.secrets.endpoint_secrets import (
    SOURCES_ANNOTATION,
    SecretReadError,
    SecretValue,
    check_secret_env,
    env_value,
    iam_resources,
    parse_allowed,
    render_secret,
    secret_name,
    sources_digest,
)
from stacks.config import ConfigError, parse_config
from tests.unit.reconcile.records import EAST, make_record

ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/hf-AbCdEf"
VALUE = "hf_not-a-real-token-1234"


def spec_with(secret_env: object, **extra: object) -> dict[str, object]:
    return {"image": "vllm/vllm-openai:v0.6.3", "secret_env": secret_env, **extra}


def test_a_spec_names_secrets_by_name_or_arn_with_an_optional_json_key() -> None:
    spec = parse_spec(
        spec_with({"HF_TOKEN": {"secret_id": "team/hf", "json_key": "token"}, "API_KEY": {"secret_id": ARN}})
    )
    assert spec.secret_env["HF_TOKEN"] == SecretEnvRef(secret_id="team/hf", json_key="token")
    assert spec.secret_env["API_KEY"].json_key is None


@pytest.mark.parametrize(
    ("secret_env", "extra", "field"),
    [
        ({"HF_TOKEN": {"secret_id": "has space"}}, {}, "spec.secret_env.HF_TOKEN.secret_id"),
        ({"HF_TOKEN": {"secret_id": "a", "value": VALUE}}, {}, "spec.secret_env.HF_TOKEN.value"),
        ({"HF_TOKEN": {"secret_id": "a", "json_key": ""}}, {}, "spec.secret_env.HF_TOKEN.json_key"),
        ({"1BAD": {"secret_id": "a"}}, {}, "spec.secret_env"),
        ({"HF_TOKEN": {"secret_id": "a"}}, {"env": {"HF_TOKEN": "x"}}, "spec.secret_env.HF_TOKEN"),
        ({"HF_TOKEN": "team/hf"}, {}, "spec.secret_env.HF_TOKEN"),
    ],
)
def test_a_bad_secret_reference_is_refused_naming_its_field(
    secret_env: object, extra: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidSpecError) as raised:
        parse_spec(spec_with(secret_env, **extra))
    assert raised.value.field == field


def test_a_partial_secret_arn_is_refused_naming_the_field_in_a_spec_and_in_the_config() -> None:
    """Without its six-character suffix an ARN matches no IAM resource: refused, as such, where given."""
    partial = ARN.removesuffix("-AbCdEf")
    with pytest.raises(InvalidSpecError) as raised:
        parse_spec(spec_with({"HF_TOKEN": {"secret_id": partial}}))
    assert raised.value.field == "spec.secret_env.HF_TOKEN.secret_id"
    assert "partial secret ARN" in raised.value.message
    with pytest.raises(ValueError, match="partial secret ARN"):
        parse_allowed([partial])
    with pytest.raises(ConfigError, match=r"gco.endpoint_secrets.*partial secret ARN"):
        parse_config({"endpoint_secrets": ["team/hf", partial]})
    assert parse_spec(spec_with({"HF_TOKEN": {"secret_id": ARN}})).secret_env["HF_TOKEN"].secret_id == ARN


def test_a_secret_outside_the_allowed_list_is_refused_naming_the_list() -> None:
    secret_env = {"HF_TOKEN": SecretEnvRef(secret_id="other/secret")}
    with pytest.raises(InvalidSpecError) as raised:
        check_secret_env(secret_env, ("team/hf", ARN))
    assert raised.value.field == "secret_env.HF_TOKEN.secret_id"
    assert "team/hf" in raised.value.message and ARN in raised.value.message
    with pytest.raises(InvalidSpecError, match=r"gco\.endpoint_secrets is empty"):
        check_secret_env(secret_env, ())
    check_secret_env({"HF_TOKEN": SecretEnvRef(secret_id=ARN)}, ("team/hf", ARN))
    check_secret_env(secret_env, None)  # not known here: nothing refused


def test_the_allowed_list_is_checked_where_it_is_configured() -> None:
    assert parse_allowed(["team/hf", ARN, "team/hf"]) == ("team/hf", ARN)
    with pytest.raises(ValueError, match="'team hf'"):
        parse_allowed(["team hf"])
    with pytest.raises(ConfigError, match=r"gco.endpoint_secrets"):
        parse_config({"endpoint_secrets": ["not a secret"]})
    env = ReconcilerEnvironment(cluster_name="c", region=EAST, endpoint_secrets=("team/hf",)).to_env()
    assert env["GCO_ENDPOINT_SECRETS"] == "team/hf"
    assert ReconcilerEnvironment.from_env(env).endpoint_secrets == ("team/hf",)
    assert ReconcilerEnvironment.from_env({**env, "GCO_ENDPOINT_SECRETS": ""}).endpoint_secrets == ()


def test_the_iam_resources_are_exactly_the_listed_secrets() -> None:
    assert iam_resources(["team/hf", ARN], partition="aws", region=EAST, account="123456789012") == [
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:team/hf-??????",
        ARN,
    ]


def test_a_json_key_selects_one_value_and_a_missing_key_names_no_value() -> None:
    secret = SecretValue(json.dumps({"token": VALUE, "n": 3}), "v1")
    assert env_value(SecretEnvRef(secret_id="s", json_key="token"), secret) == VALUE
    assert env_value(SecretEnvRef(secret_id="s", json_key="n"), secret) == "3"
    assert env_value(SecretEnvRef(secret_id="s"), secret) == secret.value
    with pytest.raises(SecretReadError) as raised:
        env_value(SecretEnvRef(secret_id="s", json_key="missing"), secret)
    assert VALUE not in str(raised.value) and not raised.value.retryable
    assert VALUE not in repr(secret) and "v1" in repr(secret)


def test_the_pods_read_the_endpoints_secret_by_reference_and_the_value_is_rendered_nowhere() -> None:
    record = make_record({"secret_env": {"HF_TOKEN": {"secret_id": "team/hf"}}, "env": {"A": "1"}})
    objects = render(record, EAST, RenderSettings())
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "A", "value": "1"} in env
    assert {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "llama--secrets", "key": "HF_TOKEN"}},
    } in env
    # A secret's version changes nothing rendered: only the Secret itself carries values.
    assert render(record, EAST, RenderSettings()) == objects


def test_the_secret_holds_base64_values_and_its_annotation_only_a_digest_of_references() -> None:
    refs = {"HF_TOKEN": SecretEnvRef(secret_id="team/hf")}
    digest = sources_digest(refs, {"team/hf": "v1"})
    assert digest != sources_digest(refs, {"team/hf": "v2"})  # a rotation rewrites the Secret
    obj = render_secret(
        "llama", "gco-inference", {"HF_TOKEN": VALUE}, labels={"a": "b"}, annotations={"d": digest}
    )
    assert obj["metadata"]["name"] == secret_name("llama") == "llama--secrets"
    assert base64.b64decode(obj["data"]["HF_TOKEN"]).decode() == VALUE
    without_data = json.dumps({k: v for k, v in obj.items() if k != "data"})
    assert VALUE not in without_data and VALUE not in digest


def test_the_reconciler_may_write_secrets_by_name_only_and_the_runner_not_at_all() -> None:
    for verb in ("get", "create", "patch", "delete"):
        assert RECONCILER_GRANT.allows(verb, "", "secrets", "gco-inference", "llama--secrets")
    assert not RECONCILER_GRANT.allows("list", "", "secrets", "gco-inference", None)
    assert not RECONCILER_GRANT.allows("watch", "", "secrets", "gco-inference", None)
    assert not RECONCILER_GRANT.allows("get", "", "secrets", "gco-system", "x--secrets")
    assert not RECONCILER_GRANT.allows("get", "", "secrets", "kube-system", "x--secrets")
    for verb in ("get", "list"):
        assert not RUNNER_GRANT.allows(verb, "", "secrets", "gco-inference", "llama--secrets")
    roles = [o for o in RECONCILER_GRANT.rbac_objects() if o["kind"] == "Role"]
    inference = next(r for r in roles if r["metadata"]["namespace"] == "gco-inference")
    assert {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "patch", "delete"]} in (
        inference["rules"]
    )


def test_the_serving_pods_carry_the_digest_of_the_secret_versions_and_a_new_version_changes_them() -> None:
    record = make_record({"secret_env": {"HF_TOKEN": {"secret_id": "team/hf"}}})
    env = record.spec.secret_env

    def template(digest: str | None) -> dict[str, object]:
        deployment = next(o for o in render(record, EAST, secret_digest=digest) if o["kind"] == "Deployment")
        return dict(deployment["spec"]["template"]["metadata"]["annotations"])

    first, second = sources_digest(env, {"team/hf": "v1"}), sources_digest(env, {"team/hf": "v2"})
    assert template(first)[SOURCES_ANNOTATION] == first != second == template(second)[SOURCES_ANNOTATION]
    assert SOURCES_ANNOTATION not in template(None)
    plain = make_record({})
    deployment = next(o for o in render(plain, EAST, secret_digest=first) if o["kind"] == "Deployment")
    assert SOURCES_ANNOTATION not in deployment["spec"]["template"]["metadata"]["annotations"]
