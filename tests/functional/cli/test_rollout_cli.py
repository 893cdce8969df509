"""`gco inference rollout` against the moto server: bad input refused before anything is written, an
endpoint that cannot be rolled out refused, and the Step Functions start printing its execution."""

from __future__ import annotations

import json

import boto3
import pytest

from gco.endpoints import EndpointStore, canary, operations
from gco.local.moto.motoserver import MotoServer
from gco.rollout.execution import STATE_MACHINE_ENV, execution_name
from tests.functional.cli.test_inference_cli import IMAGE, Cli
from tests.unit.reconcile.records import EAST

NEXT = "vllm/vllm-openai:v0.6.4"


@pytest.fixture
def cli(store: EndpointStore, moto: MotoServer, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(moto, capsys)


@pytest.mark.parametrize(
    ("option", "value", "field"),
    [
        ("--block-requests", "3", "--block-requests"),
        ("--tolerance", "1.5", "--tolerance"),
        ("--max-blocks", "1", "--max-blocks"),
        ("--weight", "0", "--weight"),
    ],
)
def test_bad_options_exit_2_naming_the_field_and_write_nothing(
    cli: Cli,
    store: EndpointStore,
    option: str,
    value: str,
    field: str,
) -> None:
    store.create("smol", {"image": IMAGE}, [EAST])
    before = operations.fresh(store, "smol")
    _, err = cli("inference", "rollout", "smol", "--image", NEXT, option, value, code=2)
    assert err.startswith(f"error: {field}:") and len(err.strip().splitlines()) == 1
    assert operations.fresh(store, "smol") == before


@pytest.mark.parametrize("value", ["1", "3"])
def test_max_blocks_below_the_first_look_names_the_option_and_the_real_minimum(
    cli: Cli, store: EndpointStore, value: str
) -> None:
    """The rule's first look is after min_blocks (4) blocks: fewer is refused naming --max-blocks and 4,
    not an option that does not exist nor a minimum that is not the real one."""
    store.create("smol", {"image": IMAGE}, [EAST])
    _, err = cli("inference", "rollout", "smol", "--image", NEXT, "--max-blocks", value, code=2)
    assert err.strip() == (
        f"error: --max-blocks: max_blocks ({value}) must be at least min_blocks (4, the first look)"
    )


@pytest.mark.parametrize("run_dir", ["/dev/null", "/proc/version/sub"])
def test_an_unwritable_run_dir_is_refused_before_the_canary_is_set(
    cli: Cli, store: EndpointStore, run_dir: str
) -> None:
    """The evidence's folder is checked before anything is written: a rollout that could not keep its
    evidence exits 2 naming --run-dir, the record untouched (no canary, no traffic)."""
    store.create("smol", {"image": IMAGE}, [EAST])
    before = operations.fresh(store, "smol")
    _, err = cli("inference", "rollout", "smol", "--image", NEXT, "--run-dir", run_dir, code=2)
    assert "--run-dir" in err and len(err.strip().splitlines()) == 1
    assert operations.fresh(store, "smol") == before


def test_an_endpoint_with_a_canary_or_already_on_the_image_is_refused(cli: Cli, store: EndpointStore) -> None:
    store.create("smol", {"image": IMAGE}, [EAST])
    _, err = cli("inference", "rollout", "smol", "--image", IMAGE, code=2)
    assert "already runs" in err
    canary.set_canary(store, "smol", NEXT, 10)
    _, err = cli("inference", "rollout", "smol", "--image", NEXT, code=2)
    assert "already has a canary" in err
    _, err = cli("inference", "rollout", "absent", "--image", NEXT, code=1)
    assert "not found" in err


def test_via_step_functions_starts_one_execution_per_rollout(
    cli: Cli,
    store: EndpointStore,
    moto: MotoServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lifecycle = store.create("smol", {"image": IMAGE}, [EAST]).lifecycle_id or ""
    _, err = cli("inference", "rollout", "smol", "--image", NEXT, "--via-step-functions", code=2)
    assert STATE_MACHINE_ENV in err
    client = boto3.client("stepfunctions", region_name=EAST, endpoint_url=moto.url)
    machine = client.create_state_machine(
        name="gco-rollout",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
        roleArn="arn:aws:iam::123456789012:role/gco-rollout",
    )["stateMachineArn"]
    monkeypatch.setenv(STATE_MACHINE_ENV, machine)
    answer = cli.json("inference", "rollout", "smol", "--image", NEXT, "--regions-in-waves")
    assert answer["execution_arn"].endswith(execution_name("smol", lifecycle, NEXT))
    started = json.loads(client.describe_execution(executionArn=answer["execution_arn"])["input"])
    assert started["settings"]["waves"] is True and started["lifecycle_id"] == lifecycle
    assert (
        operations.fresh(store, "smol").spec.canary is None
    )  # the execution changes the record, not the CLI


def test_via_step_functions_hands_the_reason_to_the_execution(
    cli: Cli,
    store: EndpointStore,
    moto: MotoServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The state machine's step admits the canary (tests/functional/rollout/test_admission.py): the
    reason an operator gave for an unvalidated image travels in the execution's input."""
    store.create("smol", {"image": IMAGE}, [EAST])
    client = boto3.client("stepfunctions", region_name=EAST, endpoint_url=moto.url)
    machine = client.create_state_machine(
        name="gco-rollout",
        definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
        roleArn="arn:aws:iam::123456789012:role/gco-rollout",
    )["stateMachineArn"]
    monkeypatch.setenv(STATE_MACHINE_ENV, machine)
    reason = "hotfix, matrix tonight"
    answer = cli.json("inference", "rollout", "smol", "--image", NEXT, "--allow-unvalidated", reason)
    started = json.loads(client.describe_execution(executionArn=answer["execution_arn"])["input"])
    assert started["settings"]["allow_unvalidated"] == reason
