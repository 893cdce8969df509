"""`gco inference` fed what a hostile user would type: every refusal is exit 2, one line naming
the field, and the table exactly as it was. Each case here wrote or crashed before the fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gco.cli import main
from gco.endpoints import EndpointStore
from gco.endpoints.names import ENDPOINT_NAME_MAX
from gco.endpoints.specfile import MAX_DEPTH, MAX_SPEC_FILE_BYTES
from gco.local.moto.motoserver import MotoServer
from tests.conftest import TABLE

IMAGE = "vllm/vllm-openai:v0.6.3"


class Run:
    """`gco` in-process against the test table; returns (status, stderr)."""

    def __init__(self, server: MotoServer, store: EndpointStore, capsys: pytest.CaptureFixture[str]) -> None:
        self.server, self.store, self.capsys = server, store, capsys

    def __call__(self, *args: str) -> tuple[int, str]:
        self.capsys.readouterr()
        table = () if "--table" in args else ("--table", TABLE)
        status = main([*args, "--endpoint-url", self.server.url, *table])
        return status, self.capsys.readouterr().err

    def items(self) -> list[dict[str, Any]]:
        return self.store.client.scan(TableName=self.store.table_name, ConsistentRead=True)["Items"]  # type: ignore[no-any-return]

    def refused(self, field: str, *args: str) -> str:
        before = self.items()
        status, err = self(*args)
        assert status == 2, err
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
        assert field in err, err
        assert self.items() == before
        return err


@pytest.fixture
def run(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Run:
    return Run(moto, store, capsys)


def deploy(*extra: str, name: str = "chat", region: str = "us-east-1") -> tuple[str, ...]:
    return ("inference", "deploy", name, "--image", IMAGE, "--region", region, *extra)


@pytest.mark.parametrize(
    ("field", "args"),
    [
        ("name", deploy(name="chat\n")),
        ("target_regions[0]", deploy(region="us-east-1\n")),
        ("namespace", deploy("--namespace", "gco\n")),
        ("labels.team", deploy("--label", "team=ml\n")),
        ("spec.image", ("inference", "deploy", "chat", "--region", "us-east-1", "--image", IMAGE + "\n")),
        ("spec.health_check_path", deploy("--health-check-path", "/health\n")),
        ("spec.model_id", deploy("--model-id", "meta/llama\x00")),
        ("spec.gpu_type", deploy("--gpu-type", "h100\n")),
        ("created_by", deploy("--created-by", "me\nINFO forged log line")),
        ("target_regions[0]", deploy(region="u" * 5005)),
        ("target_regions[0]", deploy(region="zz-nowhere-9")),
        ("'--port'", deploy("--port", "8000\n")),
        ("'--timeout'", deploy("--wait", "--timeout", "-5")),
        ("'--timeout'", deploy("--wait", "--timeout", "inf")),
        ("--label", deploy("--label", "a=1", "--label", "a=2")),
        ("--table", ("inference", "list", "--table", "t\n")),
    ],
)
def test_hostile_arguments_are_refused(run: Run, field: str, args: tuple[str, ...]) -> None:
    run.refused(field, *args)
    assert run.items() == []


def test_new_regions_only_on_request(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    run.refused("target_regions[0]", *deploy(region="us-newplace-3"))
    run.refused("fits no AWS partition", *deploy("--allow-new-regions", region="zz-nowhere-9"))
    status, err = run(*deploy("--allow-new-regions", region="us-newplace-3"))
    assert status == 0, err
    monkeypatch.setenv("GCO_ALLOW_NEW_REGIONS", "1")
    status, err = run(*deploy(name="other", region="ap-newplace-9"))
    assert status == 0, err


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_hostile_spec_files_are_refused(run: Run, tmp_path: Path) -> None:
    spec = ("inference", "deploy", "chat", "--region", "us-east-1", "--spec")
    cases = [
        ("duplicate key 'port'", write(tmp_path, "d.json", f'{{"image": "{IMAGE}", "port": 1, "port": 2}}')),
        ("duplicate key 'port' at line 3", write(tmp_path, "d.yaml", f"image: {IMAGE}\nport: 1\nport: 2\n")),
        ("duplicate key 'A'", write(tmp_path, "e.yaml", f"image: {IMAGE}\nenv:\n  A: x\n  A: y\n")),
        (f"nests deeper than {MAX_DEPTH}", write(tmp_path, "n.json", "[" * 100_000 + "]" * 100_000)),
        (f"nests deeper than {MAX_DEPTH}", write(tmp_path, "n.yaml", "a: " + "[" * 100_000 + "]" * 100_000)),
        ("anchors or aliases", write(tmp_path, "a.yaml", f"image: &i {IMAGE}\nmodel_id: *i\n")),
        (
            "spec.node_selector.zone",
            write(tmp_path, "s.json", json.dumps({"image": IMAGE, "node_selector": {"zone": "a\n"}})),
        ),
        (
            "spec.extra_args",
            write(tmp_path, "x.json", json.dumps({"image": IMAGE, "extra_args": ["-x"] * 20_000})),
        ),
        (
            f"larger than {MAX_SPEC_FILE_BYTES} bytes",
            write(tmp_path, "y.json", json.dumps({"image": IMAGE, "extra_args": ["-x"] * 200_000})),
        ),
        ("/dev/zero is a character device, not a regular file", "/dev/zero"),
        ("/dev/urandom is a character device", "/dev/urandom"),
    ]
    for expected, path in cases:
        run.refused(expected, *spec, path)
    assert run.items() == []


def test_a_spec_too_large_for_dynamodb_is_named(run: Run, tmp_path: Path) -> None:
    env = {f"VAR_{index}": "x" * 4000 for index in range(55)}
    path = write(tmp_path, "big.json", json.dumps({"image": IMAGE, "env": env}))
    run.refused(
        "spec.env: the spec would take",
        "inference",
        "deploy",
        "chat",
        "--region",
        "us-east-1",
        "--spec",
        path,
    )


@pytest.mark.parametrize(
    "args",
    [
        ("status", "Chat"),
        ("stop", "chat\n"),
        ("start", "x-"),
        ("scale", "a" * 100, "--replicas", "1"),
        ("update", "Chat", "--image", IMAGE),
        ("regions", "Chat"),
        ("delete", "chat\x00"),
    ],
)
def test_an_invalid_name_is_bad_input_everywhere(run: Run, args: tuple[str, ...]) -> None:
    run.refused("name: ", "inference", *args)


# -- property test: control characters and boundary lengths into every argument ----------------------

CONTROLS = ["\n", "\r", "\t", "\x00", "\x1b", "\x7f", "\x85", "\x9b"]
hostile = st.builds(
    lambda head, control, tail: head + control + tail,
    st.text(st.characters(codec="ascii", categories=["L", "N"]), max_size=12),
    st.sampled_from(CONTROLS),
    st.text(st.characters(codec="ascii", categories=["L", "N"]), max_size=12),
)
# (argv with {} where the hostile value goes, a piece of the field name the error must carry)
ARGUMENTS = [
    (deploy(name="{}"), "name"),
    (deploy(region="{}"), "target_regions[0]"),
    (deploy("--namespace", "{}"), "namespace"),
    (deploy("--label", "team={}"), "labels.team"),
    (deploy("--label", "{}=x"), "labels"),
    (deploy("--created-by", "{}"), "created_by"),
    (deploy("--image", "{}"), "spec.image"),
    (deploy("--gpu-type", "{}"), "spec.gpu_type"),
    (deploy("--model-id", "{}"), "spec.model_id"),
    (deploy("--model-revision", "{}"), "spec.model_revision"),
    (deploy("--model-source", "s3://bucket/{}"), "spec.model_source"),
    (deploy("--health-check-path", "/{}"), "spec.health_check_path"),
    (deploy("--env", "A={}"), "spec.env.A"),
    (deploy("--env", "{}=1"), "spec.env"),
    (deploy("--port", "{}"), "'--port'"),
    (deploy("--replicas", "{}"), "'--replicas'"),
    (deploy("--gpu-count", "{}"), "'--gpu-count'"),
    (deploy("--framework", "{}"), "'--framework'"),
    (deploy("--wait", "--timeout", "{}"), "'--timeout'"),
    (deploy("--spec", "/tmp/{}"), "--spec"),
    (("inference", "scale", "chat", "--replicas", "{}"), "'--replicas'"),
    (("inference", "regions", "chat", "--add", "{}"), "--add[0]"),
    (("inference", "regions", "chat", "--set", "{}"), "--set[0]"),
    (("inference", "delete", "chat", "--expected-lifecycle-id", "{}"), "expected_lifecycle_id"),
    (("inference", "delete", "chat", "--expected-owner-label", "team={}"), "expected_label"),
    (("inference", "list", "--region", "{}"), "target_region"),
    (("inference", "list", "--state", "{}"), "'--state'"),
    (("inference", "status", "{}"), "name"),
]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(argument=st.sampled_from(ARGUMENTS), value=hostile)
def test_control_characters_in_any_argument(
    run: Run, argument: tuple[tuple[str, ...], str], value: str
) -> None:
    template, field = argument
    run.refused(field, *(part.replace("{}", value) for part in template))


@pytest.mark.parametrize("control", ["\x00", "\x1b", "\u202e"])
def test_a_control_character_in_a_spec_path_is_refused_before_any_read(run: Run, control: str) -> None:
    """os.stat raises ValueError on a NUL byte; click lets it through as a traceback."""
    run.refused("--spec", *deploy("--spec", f"/tmp/{control}"))


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (("matrix", "validate", "/tmp/{}"), "SETTINGS"),
        (("matrix", "resume", "/tmp/{}"), "RUN_DIR"),
        (("matrix", "destroy", "/tmp/{}"), "RUN_DIR"),
        (("bench", "report", "/tmp/{}"), "EVIDENCE"),
        (("local", "status", "--state-dir", "/tmp/{}"), "--state-dir"),
    ],
)
def test_every_path_argument_refuses_a_nul_naming_itself(
    argv: tuple[str, ...], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([part.replace("{}", "\x00") for part in argv]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and field in err and "control" in err, err


# Each field one past its length limit (and at it, where the value is otherwise valid).
LENGTHS = [
    (deploy(name="a" * (ENDPOINT_NAME_MAX + 1)), "name", deploy(name="a" * ENDPOINT_NAME_MAX)),
    (deploy(region="us-east-" + "1" * 20), "target_regions[0]", None),
    # 63 characters are a namespace's syntax, but no namespace the reconciler is granted (refused too)
    (deploy("--namespace", "a" * 64), "namespace: 'aaaa", None),
    (deploy("--label", "team=" + "a" * 64), "labels.team", deploy("--label", "team=" + "a" * 63)),
    (deploy("--created-by", "a" * 257), "created_by", deploy("--created-by", "a" * 256)),
    (deploy("--model-id", "m" * 1025), "spec.model_id", deploy("--model-id", "m" * 1024)),
    (deploy("--env", "A=" + "x" * 4097), "spec.env.A", deploy("--env", "A=" + "x" * 4096)),
    (deploy("--image", "a" * 513), "spec.image", deploy("--image", "a" * 512)),
    (deploy("--port", "1" * 10), "'--port'", None),
]


@pytest.mark.parametrize(("args", "field", "at_limit"), LENGTHS)
def test_boundary_lengths(
    run: Run, args: tuple[str, ...], field: str, at_limit: tuple[str, ...] | None
) -> None:
    run.refused(field, *args)
    if at_limit is not None:
        status, err = run(*at_limit)
        assert status == 0, err
