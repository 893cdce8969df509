"""`gco inference` against the moto server: the stable surface, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gco.cli import main
from gco.cli.wait import Progress, WaitTimeoutError, wait_for
from gco.endpoints import EndpointSpec, EndpointStore
from gco.local.moto.motoserver import MotoServer
from tests.conftest import TABLE

IMAGE = "vllm/vllm-openai:v0.6.3"


class Cli:
    """Runs `gco` in-process with the test table (or `table`) and endpoint, capturing output."""

    def __init__(self, server: MotoServer, capsys: pytest.CaptureFixture[str], table: str = TABLE) -> None:
        self.server = server
        self.capsys = capsys
        self.table = table

    def __call__(self, *args: str, code: int = 0) -> tuple[str, str]:
        self.capsys.readouterr()
        status = main([*args, "--endpoint-url", self.server.url, "--table", self.table])
        out, err = self.capsys.readouterr()
        assert status == code, (status, out, err)
        return out, err

    def json(self, *args: str) -> Any:
        out, _ = self(*args, "--output", "json")
        return json.loads(out)


@pytest.fixture
def cli(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto, capsys)


def table_items(store: EndpointStore) -> list[dict[str, Any]]:
    return store.client.scan(TableName=store.table_name, ConsistentRead=True)["Items"]  # type: ignore[no-any-return]


def test_deploy_status_list_surface(cli: Cli, tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text("image: tgi:1\nframework: tgi\nport: 8080\nreplicas: 4\n", encoding="utf-8")
    record = cli.json(
        "inference",
        "deploy",
        "chat",
        "--image",
        IMAGE,
        "--region",
        "us-east-1",
        "--region",
        "us-west-2",
        "--spec",
        str(spec_file),
        "--replicas",
        "2",
        "--label",
        "team=ml",
        "--env",
        "A=1",
    )
    assert record["spec"]["image"] == IMAGE  # the flag overrides the file
    assert record["spec"]["framework"] == "tgi" and record["spec"]["replicas"] == 2
    assert record["spec"]["env"] == {"A": "1"}
    assert record["labels"] == {"team": "ml"}
    assert record["target_regions"] == ["us-east-1", "us-west-2"]
    status = cli.json("inference", "status", "chat")
    assert status.pop("invoke_urls") == {"us-east-1": None, "us-west-2": None}  # no Regional stack here
    assert status == record
    listed = cli.json("inference", "list")
    assert [item["endpoint_name"] for item in listed] == ["chat"]
    assert cli.json("inference", "list", "--state", "stopped") == []
    assert cli.json("inference", "list", "--region", "eu-west-1") == []
    assert record["observed"]["state"] == "pending"
    assert record["observed"]["regions"]["us-west-2"] == {
        "state": "pending",
        "ready": 0,
        "desired": 2,  # not counted yet: the spec's replicas are what it will want
        "reason": None,
    }
    assert [item["endpoint_name"] for item in cli.json("inference", "list", "--state", "pending")] == ["chat"]
    assert cli.json("inference", "list", "--state", "running") == []
    out, _ = cli("inference", "list")
    assert out.splitlines()[0].split()[:4] == ["NAME", "DESIRED", "OBSERVED", "REGIONS"]
    out, _ = cli("inference", "status", "chat")
    assert "us-west-2  target  pending  pending" in out and "observed:      pending" in out


def test_json_spec_file_and_image_from_it(cli: Cli, tmp_path: Path) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({"image": IMAGE, "gpu_count": 2}), encoding="utf-8")
    record = cli.json("inference", "deploy", "chat", "--region", "us-east-1", "--spec", str(spec_file))
    assert record["spec"]["gpu_count"] == 2


def test_lifecycle_commands(cli: Cli, store: EndpointStore) -> None:
    cli("inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--region", "us-west-2")
    assert cli.json("inference", "scale", "chat", "--replicas", "3")["spec"]["replicas"] == 3
    assert cli.json("inference", "stop", "chat")["desired_state"] == "stopped"
    assert cli.json("inference", "stop", "chat")["desired_state"] == "stopped"  # idempotent
    assert cli.json("inference", "start", "chat")["desired_state"] == "running"
    started = table_items(store)
    assert cli.json("inference", "start", "chat")["desired_state"] == "running"  # idempotent, as stop
    assert table_items(store) == started  # no write
    updated = cli.json("inference", "update", "chat", "--image", "vllm/vllm-openai:v0.7.0", "--port", "9000")
    assert updated["spec"]["image"] == "vllm/vllm-openai:v0.7.0" and updated["spec"]["replicas"] == 3
    assert updated["desired_state"] == "deploying"
    same = cli.json("inference", "update", "chat", "--port", "9000")
    assert same["updated_at"] == updated["updated_at"]  # no change, no write
    moved = cli.json("inference", "regions", "chat", "--add", "eu-west-1", "--remove", "us-west-2")
    assert moved["target_regions"] == ["us-east-1", "eu-west-1"]
    assert moved["cleanup_regions"] == ["us-east-1", "us-west-2", "eu-west-1"]
    assert cli.json("inference", "regions", "chat") == moved
    replaced = cli.json("inference", "regions", "chat", "--set", "us-west-2")
    assert replaced["target_regions"] == ["us-west-2"]
    assert replaced["region_generations"]["us-west-2"] != moved["region_generations"]["us-west-2"]
    deleted = cli.json("inference", "delete", "chat")
    assert deleted["desired_state"] == "deleted"
    assert deleted["deletion_regions"] == ["us-east-1", "us-west-2", "eu-west-1"]
    _, err = cli("inference", "stop", "chat", code=1)
    assert "desired_state is deleted" in err


def test_update_with_whole_spec_file(cli: Cli, tmp_path: Path) -> None:
    cli("inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--replicas", "5")
    spec_file = tmp_path / "new.yaml"
    spec_file.write_text(f"image: {IMAGE}\nmodel_id: m\n", encoding="utf-8")
    record = cli.json("inference", "update", "chat", "--spec", str(spec_file))
    assert record["spec"]["replicas"] == 1 and record["spec"]["model_id"] == "m"


def test_delete_fences_for_automation(cli: Cli, store: EndpointStore) -> None:
    record = cli.json(
        "inference",
        "deploy",
        "chat",
        "--image",
        IMAGE,
        "--region",
        "us-east-1",
        "--label",
        "gco.dev/owner=run-7",
    )
    before = table_items(store)
    _, err = cli("inference", "delete", "chat", "--expected-lifecycle-id", "0" * 64, code=1)
    assert "refused: its lifecycle is" in err and len(err.strip().splitlines()) == 1
    _, err = cli("inference", "delete", "chat", "--expected-owner-label", "gco.dev/owner=run-8", code=1)
    assert "its label gco.dev/owner is 'run-7', not 'run-8'" in err
    assert table_items(store) == before
    deleted = cli.json(
        "inference",
        "delete",
        "chat",
        "--expected-lifecycle-id",
        record["lifecycle_id"],
        "--expected-owner-label",
        "gco.dev/owner=run-7",
    )
    assert deleted["desired_state"] == "deleted"


def test_delete_wait_until_purged(cli: Cli, store: EndpointStore, monkeypatch: pytest.MonkeyPatch) -> None:
    record = cli.json("inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1")
    polls = {"count": 0}
    original = store.get

    def get_and_ack(name: str, consistent_read: bool = True) -> Any:
        # Stands in for the Regional reconciler: acknowledges on the second poll, then purges.
        polls["count"] += 1
        current = original(name, consistent_read)
        if polls["count"] == 2 and current is not None and current.is_deleted:
            store.region_writes.update_region_status(
                name, "us-east-1", "deleted", expected_deletion_generation=current.deletion_generation
            )
            assert store.region_writes.purge(
                name,
                expected_lifecycle_id=record["lifecycle_id"],
                expected_deletion_generation=current.deletion_generation or "",
            )
        return current

    monkeypatch.setattr(EndpointStore, "connect", classmethod(lambda cls, **_: store))
    monkeypatch.setattr(store, "get", get_and_ack)
    monkeypatch.setattr("gco.cli.wait.pause", lambda _: None)
    result = cli.json("inference", "delete", "chat", "--wait", "--timeout", "30")
    assert result == {"endpoint_name": "chat", "lifecycle_id": record["lifecycle_id"], "purged": True}
    assert original("chat") is None


def test_deploy_wait_times_out_naming_pending_regions(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gco.cli.wait.pause", lambda _: None)
    _, err = cli(
        "inference",
        "deploy",
        "chat",
        "--image",
        IMAGE,
        "--region",
        "us-east-1",
        "--wait",
        "--timeout",
        "0",
        code=1,
    )
    assert "timed out after 0 s waiting for chat ready: us-east-1 pending" in err


def test_deploy_wait_reports_ready_and_errors(
    cli: Cli, store: EndpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(EndpointStore, "connect", classmethod(lambda cls, **_: store))
    calls = {"count": 0}

    def observe(_: float) -> None:  # the reconciler reports between polls
        calls["count"] += 1
        record = store.get("chat")
        assert record is not None
        store.region_writes.update_region_status(
            "chat",
            "us-east-1",
            "running",
            replicas_ready=1,
            replicas_desired=1,
            expected_lifecycle_id=record.lifecycle_id,
            expected_region_generation=record.region_generations["us-east-1"],
        )

    monkeypatch.setattr("gco.cli.wait.pause", observe)
    ready = cli.json(
        "inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--wait", "--timeout", "30"
    )
    assert ready["region_status"]["us-east-1"]["state"] == "running" and calls["count"] == 1

    def fail(_: float) -> None:
        record = store.get("bad")
        assert record is not None
        store.region_writes.update_region_status(
            "bad",
            "us-east-1",
            "error",
            error="ImagePullBackOff",
            expected_lifecycle_id=record.lifecycle_id,
            expected_region_generation=record.region_generations["us-east-1"],
        )

    monkeypatch.setattr("gco.cli.wait.pause", fail)
    args = (
        "inference",
        "deploy",
        "bad",
        "--image",
        IMAGE,
        "--region",
        "us-east-1",
        "--wait",
        "--timeout",
        "30",
    )
    _, err = cli(*args, code=1)
    assert err.strip().splitlines()[-1] == "error: us-east-1: ImagePullBackOff"


def test_wait_for_on_a_terminal_draws_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    states = iter([Progress(0, 2, False, "a", 0), Progress(2, 2, True, "", 7)])
    assert wait_for(lambda: next(states), what="x", timeout=10, sleep=lambda _: None) == 7
    assert "\r" in capsys.readouterr().err
    with pytest.raises(WaitTimeoutError):
        wait_for(lambda: Progress(0, 1, False, "b", 0), what="x", timeout=0, sleep=lambda _: None)


def test_schema_and_init_table(cli: Cli, dynamodb: Any) -> None:
    out, _ = cli("inference", "schema")
    assert json.loads(out)["properties"]["framework"]["enum"] == ["vllm", "tgi", "sglang"]
    created = json.loads(
        main_output(cli, "inference", "init-table", "--table", "fresh-table", "--output", "json")
    )
    assert created["created"] is True and created["stream_arn"]
    again = json.loads(
        main_output(cli, "inference", "init-table", "--table", "fresh-table", "--output", "json")
    )
    assert again["created"] is False
    out, _ = cli("inference", "init-table")
    assert "already exists" in out
    stream = dynamodb.describe_table(TableName="fresh-table")["Table"]["StreamSpecification"]
    assert stream == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}


def main_output(cli: Cli, *args: str) -> str:
    cli.capsys.readouterr()
    assert main([*args, "--endpoint-url", cli.server.url]) == 0
    return cli.capsys.readouterr().out


def test_init_table_refuses_a_table_of_another_shape(cli: Cli, dynamodb: Any) -> None:
    dynamodb.create_table(
        TableName="other",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
    )
    cli.capsys.readouterr()
    assert main(["inference", "init-table", "--table", "other", "--endpoint-url", cli.server.url]) == 1
    assert "key schema" in cli.capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["deploy", "Chat", "--image", IMAGE, "--region", "us-east-1"], "name"),
        (["deploy", "chat", "--image", IMAGE], "--region"),
        (["deploy", "chat", "--region", "us-east-1"], "--image"),
        (["deploy", "chat", "--image", IMAGE, "--region", "mars-1"], "target_regions[0]"),
        (["deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--port", "0"], "spec.port"),
        (["deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--port", "x"], "'--port'"),
        (["deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--framework", "x"], "'--framework'"),
        (["deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--label", "novalue"], "--label"),
        (["deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--namespace", "Bad"], "namespace"),
        (["deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--env", "1X=2"], "spec.env"),
        (
            ["deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--spec", "/nonexistent.yaml"],
            "--spec",
        ),
        (["scale", "chat", "--replicas", "-3"], "replicas"),
        (["update", "chat"], "--spec"),
        (["regions", "chat", "--add", "moon"], "--add[0]"),
        (["delete", "chat", "--expected-lifecycle-id", "xyz"], "expected_lifecycle_id"),
        (["delete", "chat", "--expected-owner-label", "nolabel"], "--expected-owner-label"),
        (["list", "--region", "moon"], "target_region"),
        (["status"], "'NAME'"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_field(
    cli: Cli, store: EndpointStore, args: list[str], field: str
) -> None:
    cli("inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1")
    before = table_items(store)
    _, err = cli("inference", *args, code=2)
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith("error: ") and field in err, err
    assert table_items(store) == before


def test_bad_spec_files(cli: Cli, store: EndpointStore, tmp_path: Path) -> None:
    for name, text, expected in [
        ("a.yaml", "image: [unclosed", "not valid YAML"),
        ("b.yaml", "- a list\n", "must hold a mapping"),
        ("c.json", "{", "not valid JSON"),
        ("d.yaml", "image: x:1\nbogus: 1\n", "spec.bogus: unknown field"),
    ]:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        _, err = cli("inference", "deploy", "chat", "--region", "us-east-1", "--spec", str(path), code=2)
        assert expected in err and len(err.strip().splitlines()) == 1
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00")
    _, err = cli("inference", "deploy", "chat", "--region", "us-east-1", "--spec", str(path), code=2)
    assert "cannot read" in err
    assert table_items(store) == []


def test_runtime_errors_exit_1(cli: Cli) -> None:
    for args in (
        ["status", "ghost"],
        ["stop", "ghost"],
        ["delete", "ghost"],
        ["scale", "ghost", "--replicas", "1"],
    ):
        _, err = cli("inference", *args, code=1)
        assert err.strip() == "error: endpoint 'ghost' not found"
    cli("inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1")
    _, err = cli("inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1", code=1)
    assert "already exists" in err


def test_unreachable_endpoint_is_a_runtime_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    from botocore.config import Config

    from gco import aws

    monkeypatch.setattr(
        aws,
        "CLIENT_CONFIG",
        Config(retries={"mode": "standard", "max_attempts": 1}, connect_timeout=1, read_timeout=1),
    )
    assert main(["inference", "list", "--endpoint-url", "http://127.0.0.1:9", "--table", "tbl"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: DynamoDB scan on tbl failed") and len(err.strip().splitlines()) == 1


def test_version_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert "gco, version" in capsys.readouterr().out
    assert main(["inference", "--help"]) == 0
    assert "deploy" in capsys.readouterr().out


# -- property test: malformed names, Region lists and values through the real CLI -------------------

bad_names = st.text(min_size=1, max_size=70).filter(
    lambda text: not text.startswith("-") and text.strip() == text and "\x00" not in text
)
bad_regions = st.text(min_size=1, max_size=20).filter(
    lambda text: not text.startswith("-") and "\x00" not in text
)
bad_numbers = st.one_of(
    st.integers(max_value=0), st.integers(min_value=65536), st.text(min_size=1, max_size=5)
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=bad_names, region=bad_regions, port=bad_numbers)
def test_malformed_cli_input_changes_nothing(
    cli: Cli, store: EndpointStore, name: str, region: str, port: Any
) -> None:
    before = table_items(store)
    cli.capsys.readouterr()
    status = main(
        [
            "inference",
            "deploy",
            name,
            "--image",
            IMAGE,
            "--region",
            region,
            "--port",
            str(port),
            "--endpoint-url",
            cli.server.url,
            "--table",
            TABLE,
        ]
    )
    err = cli.capsys.readouterr().err
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ")
    assert any(field in err for field in ("name", "target_regions", "--port", "spec.port")), err
    assert table_items(store) == before


def test_console_script_runs_as_a_process(store: EndpointStore, moto: MotoServer) -> None:
    command = [
        sys.executable,
        "-m",
        "gco.cli",
        "inference",
        "deploy",
        "chat",
        "--image",
        IMAGE,
        "--region",
        "us-east-1",
        "--endpoint-url",
        moto.url,
        "--table",
        TABLE,
        "--output",
        "json",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["endpoint_name"] == "chat"


spec_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(field=st.sampled_from(sorted(EndpointSpec.model_fields)), value=spec_values)
def test_malformed_spec_files_change_nothing(
    cli: Cli, store: EndpointStore, tmp_path: Path, field: str, value: Any
) -> None:
    spec_file = tmp_path / "spec.json"
    pinned = "vllm/vllm-openai@sha256:" + "a" * 64  # so require_digest alone moves no error elsewhere
    spec_file.write_text(json.dumps({"image": pinned, field: value}), encoding="utf-8")
    before = table_items(store)
    cli.capsys.readouterr()
    argv = [
        "inference",
        "deploy",
        "fuzz",
        "--region",
        "us-east-1",
        "--spec",
        str(spec_file),
        "--endpoint-url",
        cli.server.url,
        "--table",
        TABLE,
    ]
    status = main(argv)
    err = cli.capsys.readouterr().err
    if status == 0:  # a valid spec: remove the record so the next example starts clean
        store.client.delete_item(TableName=store.table_name, Key={"endpoint_name": {"S": "fuzz"}})
        return
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"error: spec.{field}"), err
    assert table_items(store) == before


def test_status_names_each_regions_invoke_url(cli: Cli, moto: MotoServer) -> None:
    """The Regional stack's InvokeUrl output, read from CloudFormation in each target Region."""
    from gco import aws

    cli.json(
        "inference", "deploy", "chat", "--image", IMAGE, "--region", "us-east-1", "--region", "us-west-2"
    )
    base = "https://abc123.execute-api.us-west-2.amazonaws.com/inference"
    template = {
        "Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}},
        "Outputs": {"InvokeUrl": {"Value": base}},
    }
    aws.client("cloudformation", region="us-west-2", endpoint_url=moto.url).create_stack(
        StackName="gco-regional-us-west-2", TemplateBody=json.dumps(template)
    )
    status = cli.json("inference", "status", "chat")
    assert status["invoke_urls"] == {"us-east-1": None, "us-west-2": f"{base}/chat"}
    out, _ = cli("inference", "status", "chat")
    assert f"invoke us-west-2: {base}/chat" in out
    assert "invoke us-east-1: (no Regional stack output found)" in out
