"""`gco inference invoke|canary|promote|rollback` against local clusters: answers over real HTTP,
exit codes and one-line errors, and bad input changing nothing."""

from __future__ import annotations

import json

import pytest

from gco.endpoints import EndpointStore
from gco.engines.base import chat_answer_text
from gco.inference.invoke import INVOKE_CA_BUNDLE_ENV, INVOKE_URLS_ENV
from gco.local.moto.motoserver import MotoServer
from gco.local.region.cluster import LocalClusters
from tests.functional.cli.test_inference_cli import Cli
from tests.functional.local.conftest import eventually
from tests.functional.local.test_canary import CANARY_IMAGE
from tests.functional.local.test_engines import MODEL, SPEC, running
from tests.unit.reconcile.records import EAST, WEST


@pytest.fixture
def cli(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto, capsys, store.table_name)


@pytest.fixture
def local_cli(cli: Cli, clusters: LocalClusters, monkeypatch: pytest.MonkeyPatch) -> Cli:
    monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps(clusters.invoke_urls()))
    if clusters.ca_bundle is not None:
        monkeypatch.setenv(INVOKE_CA_BUNDLE_ENV, str(clusters.ca_bundle))
    return cli


def items(store: EndpointStore) -> list[dict[str, object]]:
    return store.client.scan(TableName=store.table_name, ConsistentRead=True)["Items"]  # type: ignore[no-any-return]


def test_invoke_in_two_regions_and_canary_commands(store: EndpointStore, local_cli: Cli) -> None:
    store.create("smol", SPEC, [EAST, WEST])
    _, err = local_cli("inference", "invoke", "smol", "--region", WEST, code=1)
    assert err.count("\n") == 1 and f"not running in {WEST}: its state is" in err
    for region in (EAST, WEST):
        eventually(lambda r=region: running(store, "smol", r, 1), f"running in {region}")  # type: ignore[misc]
        answer = local_cli.json("inference", "invoke", "smol", "--region", region, "--prompt", "hi")
        assert answer["region"] == region and answer["status"] == 200
        assert answer["body"]["model"] == MODEL and chat_answer_text(answer["body"])  # the default: chat
        assert answer["latency_ms"] > 0
    models = local_cli.json("inference", "invoke", "smol", "--path", "/v1/models", "--body", "{}")
    assert models["body"]["data"][0]["id"] == MODEL
    out, _ = local_cli("inference", "invoke", "smol", "--body", '{"prompt": "x", "max_tokens": 2}')
    assert out.startswith(f"{EAST} 200 ")

    record = local_cli.json("inference", "canary", "smol", "--image", CANARY_IMAGE, "--weight", "30")
    assert record["spec"]["canary"] == {"image": CANARY_IMAGE, "weight": 30, "replicas": 1}
    assert local_cli.json("inference", "rollback", "smol")["spec"].get("canary") is None
    _, err = local_cli("inference", "promote", "smol", code=1)
    assert err == "error: cannot promote endpoint 'smol': it has no canary\n"
    local_cli("inference", "canary", "smol", "--image", CANARY_IMAGE, "--weight", "10")
    assert local_cli.json("inference", "promote", "smol")["spec"]["image"] == CANARY_IMAGE


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("invoke", "ghost"), 1, "endpoint 'ghost' not found"),
        (("invoke", "smol", "--body", "{not json"), 2, "--body: the body is not valid JSON"),
        (("invoke", "smol", "--body", "[1]"), 2, "--body: must be a JSON object"),
        (("invoke", "smol", "--prompt", "a", "--body", "{}"), 2, "--body: give --prompt or --body"),
        (("canary", "smol", "--image", CANARY_IMAGE, "--weight", "101"), 2, "canary.weight"),
        (("canary", "smol", "--image", CANARY_IMAGE, "--weight", "true"), 2, "'true' is not an integer"),
        (("canary", "ghost", "--image", CANARY_IMAGE, "--weight", "5"), 1, "endpoint 'ghost' not found"),
        (("rollback", "smol"), 1, "it has no canary"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    store: EndpointStore, cli: Cli, args: tuple[str, ...], code: int, message: str
) -> None:
    store.create("smol", SPEC, [EAST])
    before = items(store)
    _, err = cli("inference", *args, code=code)
    assert err.count("\n") == 1 and message in err, err
    assert items(store) == before
