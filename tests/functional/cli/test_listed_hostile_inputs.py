"""Inputs that once ended in a traceback or were taken silently: each is now one line naming what
is wrong, exit 2, and the table exactly as it was; secrets in URLs never reach a message. And a
property: no input to any command, however hostile, ends in a traceback."""

from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gco.cli import main
from gco.endpoints import EndpointStore
from gco.inference.invoke import INVOKE_CA_BUNDLE_ENV, INVOKE_URLS_ENV
from gco.local.moto.motoserver import MotoServer
from tests.conftest import TABLE

IMAGE = "vllm/vllm-openai:v0.6.3"
HUGE = "1" * 5000  # past int()'s 4,300-digit limit
DEEP = "[" * 5000 + "]" * 5000


class Run:
    """`gco` in-process against the test table; returns (status, stderr)."""

    def __init__(self, server: MotoServer, store: EndpointStore, capsys: pytest.CaptureFixture[str]) -> None:
        self.server, self.store, self.capsys = server, store, capsys

    def __call__(self, *args: str) -> tuple[int, str]:
        self.capsys.readouterr()
        status = main([*args, "--endpoint-url", self.server.url, "--table", TABLE])
        return status, self.capsys.readouterr().err

    def items(self) -> list[dict[str, Any]]:
        return self.store.client.scan(TableName=self.store.table_name, ConsistentRead=True)["Items"]  # type: ignore[no-any-return]

    def refused(self, field: str, *args: str) -> str:
        before = self.items()
        status, err = self(*args)
        assert status == 2, err
        assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
        assert field in err, err
        assert self.items() == before
        return err


@pytest.fixture
def run(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Run:
    store.create("chat", {"image": IMAGE}, ["us-east-1"])
    return Run(moto, store, capsys)


def invoke(*extra: str) -> tuple[str, ...]:
    return ("inference", "invoke", "chat", *extra)


@pytest.mark.parametrize(
    ("field", "args"),
    [
        ("--body", invoke("--body", '{"max_tokens": ' + HUGE + "}")),
        ("--body", invoke("--body", DEEP)),
        ("--body", invoke("--body", '{"temperature": NaN}')),
        ("--body", invoke("--body", '{"prompt": "a", "prompt": "b"}')),
        ("--path", invoke("--path", "/v1\r\nX-Injected: 1")),
        ("--path", invoke("--path", "/" + "a" * 70_000)),
        ("--path", invoke("--path", "/%2e%2e/other/v1/models")),
        ("--timeout", invoke("--timeout", "-1")),
        ("--timeout", invoke("--timeout", "nan")),
        ("--timeout", invoke("--timeout", "inf")),
        ("--region", invoke("--region", "us-east-1", "--region", "us-west-2")),
        ("--weight", ("inference", "canary", "chat", "--image", IMAGE, "--weight", " 30")),
        ("--weight", ("inference", "canary", "chat", "--image", IMAGE, "--weight", "007")),
        ("--replicas", ("inference", "scale", "chat", "--replicas", " 2")),
        ("--endpoint-url", ("inference", "list", "--endpoint-url", "http://[::1")),
        (
            "--allow-unvalidated",
            ("inference", "update", "chat", "--replicas", "2", "--allow-unvalidated", ""),
        ),
        (
            "--allow-unvalidated",
            (
                "inference",
                "regions",
                "chat",
                "--add",
                "us-west-2",
                "--allow-unvalidated",
                "ok\r\nX-Injected: 1",
            ),
        ),
        (
            "--allow-unvalidated",
            (
                "inference",
                "canary",
                "chat",
                "--image",
                IMAGE,
                "--weight",
                "5",
                "--allow-unvalidated",
                "x" * 257,
            ),
        ),
    ],
)
def test_listed_inputs_are_refused_in_one_line(run: Run, field: str, args: tuple[str, ...]) -> None:
    # `--endpoint-url` given twice: click keeps the last, which is the test's own, so put it last.
    if "--endpoint-url" in args:
        before = run.items()
        run.capsys.readouterr()
        status = main([*args[:-2], "--table", TABLE, *args[-2:]])
        err = run.capsys.readouterr().err
        assert (status, err.count("\n")) == (2, 1) and field in err, err
        assert run.items() == before
        return
    run.refused(field, *args)


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_huge_integer_in_a_spec_file_is_refused(run: Run, tmp_path: Path, suffix: str) -> None:
    spec = tmp_path / f"spec{suffix}"
    text = json.dumps({"image": IMAGE}).replace("}", f', "replicas": {HUGE}}}')
    spec.write_text(text if suffix == ".json" else f"image: {IMAGE}\nreplicas: {HUGE}\n")
    run.refused("--spec", "inference", "deploy", "big", "--region", "us-east-1", "--spec", str(spec))
    run.refused("--spec", "inference", "update", "chat", "--spec", str(spec))


def test_a_huge_integer_in_matrix_settings_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings_file = tmp_path / "settings.yaml"
    settings_file.write_text(f"endpoint_count: {HUGE}\n")
    assert main(["matrix", "validate", str(settings_file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "SETTINGS" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("variable", "value"),
    [("DYNAMODB_REGION", "us east"), ("REGION", "us-east-1\n"), ("DYNAMODB_REGION", "x" * 100)],
)
def test_a_bad_home_region_is_refused_naming_the_variable(
    run: Run, monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.delenv("DYNAMODB_REGION", raising=False)
    monkeypatch.setenv(variable, value)
    run.refused(variable, "inference", "list")


@pytest.mark.parametrize("bundle", ["/nonexistent/ca.pem", "NOT_A_CERT"])
def test_a_bad_ca_bundle_is_refused(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bundle: str
) -> None:
    if bundle == "NOT_A_CERT":
        path = tmp_path / "ca.pem"
        path.write_text("not a certificate\n")
        bundle = str(path)
    monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps({"us-east-1": "https://127.0.0.1:1/inference"}))
    monkeypatch.setenv(INVOKE_CA_BUNDLE_ENV, bundle)
    run.refused(INVOKE_CA_BUNDLE_ENV, *invoke())


@pytest.mark.parametrize(
    ("base", "code"),
    [("ftp://admin:s3cret-pw@127.0.0.1/inference", 2), ("http://admin:s3cret-pw@127.0.0.1:1/inference", 1)],
)
def test_a_password_in_an_invoke_url_is_never_printed(
    run: Run, store: EndpointStore, monkeypatch: pytest.MonkeyPatch, base: str, code: int
) -> None:
    record = store.get("chat")
    assert record is not None and record.lifecycle_id is not None
    generation = record.region_generations["us-east-1"]
    store.region_writes.update_region_status(
        "chat", "us-east-1", "running", replicas_ready=1, replicas_desired=1,
        expected_lifecycle_id=record.lifecycle_id, expected_region_generation=generation,
    )  # fmt: skip
    monkeypatch.setenv(INVOKE_URLS_ENV, json.dumps({"us-east-1": base}))
    status, err = run(*invoke())
    assert status == code and err.count("\n") == 1, err
    assert "s3cret-pw" not in err and "***@127.0.0.1" in err, err


COMMANDS: list[tuple[str, ...]] = [
    ("inference", "deploy", "{}", "--image", IMAGE, "--region", "us-east-1"),
    ("inference", "deploy", "x", "--image", "{}", "--region", "{}", "--replicas", "{}"),
    ("inference", "list", "--state", "{}", "--region", "{}"),
    ("inference", "status", "{}"),
    ("inference", "scale", "chat", "--replicas", "{}"),
    ("inference", "canary", "{}", "--image", "{}", "--weight", "{}", "--replicas", "{}"),
    ("inference", "invoke", "chat", "--body", "{}"),
    ("inference", "invoke", "chat", "--path", "{}", "--timeout", "{}"),
    ("inference", "invoke", "{}", "--region", "{}", "--prompt", "{}"),
    ("inference", "update", "chat", "--image", "{}", "--port", "{}", "--env", "{}"),
    ("inference", "regions", "chat", "--add", "{}"),
    ("inference", "regions", "chat", "--add", "us-west-2", "--allow-unvalidated", "{}"),
    ("inference", "deploy", "y", "--image", IMAGE, "--region", "us-east-1", "--allow-unvalidated", "{}"),
    ("inference", "delete", "{}", "--expected-lifecycle-id", "{}"),
    ("inference", "delete", "chat", "--expected-owner-label", "{}", "--timeout", "{}"),
    ("inference", "forget-region", "{}", "--region", "{}", "--silent-for", "{}", "--yes"),
    ("inference", "list", "-o", "{}", "--request-timeout", "{}"),
    ("matrix", "validate", "{}"),
    ("bench", "report", "{}"),
    ("bench", "schema", "{}"),
    ("local", "status", "--state-dir", "{}"),
    ("local", "env", "--state-dir", "{}"),
    ("local", "fail-region", "{}", "--unready", "{}", "--state-dir", "{}"),
    ("keys", "create", "{}", "--endpoint", "{}", "--keys-table", "{}"),
    ("keys", "revoke", "{}", "-o", "{}"),
]
hostile = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["", " 2", "007", "-1", "nan", "inf", "1e309", HUGE, DEEP, "{", "[]", '{"a":NaN}', "/..", "%2f"]
    ),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=8).map(lambda t: "/" + t),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(command=st.sampled_from(COMMANDS), values=st.lists(hostile, min_size=4, max_size=4))
def test_no_input_to_any_command_ends_in_a_traceback(
    run: Run, command: tuple[str, ...], values: list[str]
) -> None:
    filled, rest = [], iter(values)
    for part in command:
        filled.append(part.replace("{}", next(rest)) if "{}" in part else part)
    if filled[0] != "inference":  # these take no connection options
        run.capsys.readouterr()
        try:
            status = main(filled)
        except BaseException:
            pytest.fail(f"gco {filled!r} raised:\n{traceback.format_exc()}")
        err = run.capsys.readouterr().err
        assert status in (0, 1, 2) and "Traceback" not in err, (filled, status, err)
        return
    try:
        status, err = run(*filled)
    except BaseException:
        pytest.fail(f"gco {filled!r} raised:\n{traceback.format_exc()}")
    assert status in (0, 1, 2), (filled, status, err)
    assert "Traceback" not in err, (filled, err)
    if status == 2:
        assert err.count("\n") == 1 and err.startswith("error: "), (filled, err)


@pytest.mark.parametrize(
    ("field", "extra"),
    [
        ("--extra-body", ("--extra-body", '{"a": NaN}')),
        ("--extra-body", ("--extra-body", '{"a": ' + HUGE + "}")),
        ("--extra-body", ("--extra-body", DEEP)),
        ("--levels", ("--mode", "load", "--levels", " 1,nan")),
        ("--rates", ("--mode", "load", "--rates", "inf")),
        ("--max-tokens", ("--max-tokens", "007")),
        ("--timeout", ("--timeout", "nan")),
    ],
)
def test_bench_numbers_and_json_through_the_same_parsers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, extra: tuple[str, ...]
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "hi"}\n')
    args = ["bench", "serve", "--base-url", "http://127.0.0.1:9", "--prompts", str(prompts), *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and field in err and "Traceback" not in err, err


class BrokenOutput:
    """Standard output that fails as a full device (ENOSPC), a pipe whose reader left (EPIPE) or a
    closed descriptor (EBADF) fails: every non-empty write raises."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, number: int) -> None:
        self.number = number

    def write(self, text: str) -> int:
        if text:
            raise OSError(self.number, os.strerror(self.number))
        return 0

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


STREAMS: dict[str, Any] = {
    "working": "capsys",
    "closed before start": None,  # Python's sys.stdout when descriptor 1 was closed at exec
    "full": BrokenOutput(errno.ENOSPC),
    "broken pipe": BrokenOutput(errno.EPIPE),
    "bad descriptor": BrokenOutput(errno.EBADF),
}
hostile_pid: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from([1, 0, -1, 2**22 + 1, 2**63, "1", True, None, 1.5, [], {}]),
    st.integers(),
)
hostile_state = st.one_of(
    st.binary(max_size=64).map(lambda raw: raw.decode("latin-1")),
    st.builds(
        lambda pid, ticks, cut: json.dumps(
            {
                "endpoint_url": "http://127.0.0.1:9",
                "table": "t",
                "home_region": "us-east-1",
                "regions": ["us-east-1"],
                "evidence_bucket": "b",
                "parts": [{"kind": "moto", "pid": pid, "start_ticks": ticks, "url": "", "log": ""}],
                "invoke_urls": {},
            }
        )[:cut],
        hostile_pid,
        hostile_pid,
        st.sampled_from([None, 10, 100]),
    ),
)
hostile_run_dir = st.sampled_from(["/etc/passwd", "/etc/passwd/run", "/proc/self/run", "{tmp}/run", "{tmp}"])
OUTPUT_COMMANDS: list[tuple[str, ...]] = [
    ("inference", "list"),
    ("inference", "list", "-o", "json"),
    ("inference", "status", "chat"),
    ("local", "status", "--timeout", "0.1", "--state-dir", "{state}"),
    ("local", "env", "--state-dir", "{state}"),
    ("local", "down", "--state-dir", "{state}"),
    (
        "bench",
        "serve",
        "--base-url",
        "http://127.0.0.1:9",
        "--prompts",
        "{prompts}",
        "--warmup",
        "0",
        "--run-dir",
        "{run_dir}",
    ),
    ("bench", "schema", "manifest"),
    ("--help",),
]


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    command=st.sampled_from(OUTPUT_COMMANDS),
    stream=st.sampled_from(list(STREAMS)),
    state=hostile_state,
    run_dir=hostile_run_dir,
)
def test_no_output_stream_state_file_or_run_dir_ends_in_a_traceback(
    run: Run, command: tuple[str, ...], stream: str, state: str, run_dir: str
) -> None:
    """Whatever standard output is (working, closed, full, a broken pipe), whatever a state file
    holds and wherever a run directory points: exit 0, 1 or 2, never a traceback, and a failure is
    one line; a command whose output is lost never exits 0."""
    with tempfile.TemporaryDirectory(prefix="gco-hostile-") as scratch:
        tmp = Path(scratch)
        (tmp / "state").mkdir()
        (tmp / "state" / "stack.json").write_text(state, encoding="utf-8", errors="surrogateescape")
        (tmp / "prompts.jsonl").write_text('{"prompt": "hi"}\n', encoding="utf-8")
        values = {"state": str(tmp / "state"), "prompts": str(tmp / "prompts.jsonl")}
        values["run_dir"] = run_dir.replace("{tmp}", str(tmp / "runs"))
        filled = [part.format(**values) if "{" in part else part for part in command]
        if filled[0] == "inference":
            filled += ["--endpoint-url", run.server.url, "--table", TABLE]
        run.capsys.readouterr()
        real = sys.stdout
        if STREAMS[stream] != "capsys":
            sys.stdout = STREAMS[stream]
        try:
            status = main(filled)
        except BaseException:
            pytest.fail(f"gco {filled!r} raised:\n{traceback.format_exc()}")
        finally:
            sys.stdout = real
        err = run.capsys.readouterr().err
    assert status in (0, 1, 2) and "Traceback" not in err, (filled, stream, status, err)
    if status != 0:
        assert err.count("\n") == 1 and err.startswith("error: "), (filled, stream, err)
    if stream != "working":  # each of these commands prints on success: lost output is no success
        assert status != 0, (filled, stream, err)
