"""Each input that got a misleading answer (issue 35, "Misleading") now gets the message or exit
code a user expects: one line naming the field, exit 2, nothing written."""

from __future__ import annotations

import threading
import time

import pytest
import yaml

from gco.cli import main
from gco.endpoints import observed_state
from gco.endpoints.record import EndpointRecord
from gco.endpoints.spec import spec_json_schema
from tests.functional.cli.test_hostile_input import Run, deploy, run
from tests.unit.endpoints.test_observed_state import status
from tests.unit.reconcile.records import EAST, make_record

__all__ = ["run"]  # the fixture, imported to be used here


def url_refusal(capsys: pytest.CaptureFixture[str], url: str) -> tuple[int, str]:
    capsys.readouterr()
    return main(["inference", "list", "--endpoint-url", url]), capsys.readouterr().err


def test_a_url_with_credentials_gets_its_own_message(capsys: pytest.CaptureFixture[str]) -> None:
    status_, err = url_refusal(capsys, "http://user:secret@127.0.0.1:9")
    assert status_ == 2 and "secret" not in err
    assert err == (
        "error: --endpoint-url: holds a user or password (http://***@...): AWS credentials come from "
        "the environment or a profile, never from the URL\n"
    )


def test_a_non_ascii_host_gets_its_own_message(capsys: pytest.CaptureFixture[str]) -> None:
    status_, err = url_refusal(capsys, "https://bücher.example")
    assert status_ == 2
    assert err == (
        "error: --endpoint-url: the host 'bücher.example' is not ASCII: write it in its IDNA form "
        "(xn--bcher-kva.example)\n"
    )
    status_, err = url_refusal(capsys, "ftp://127.0.0.1")
    assert (status_, err) == (2, "error: --endpoint-url: must be an http:// or https:// URL\n")


@pytest.mark.parametrize("namespace", ["kube-system", "gco-system", "default", "kube-public"])
def test_namespace_kube_system_is_refused_up_front_as_the_matrix_does(run: Run, namespace: str) -> None:
    err = run.refused("namespace: must be a namespace the reconciler is granted: gco-inference",
                      *deploy("--namespace", namespace))  # fmt: skip
    assert err.count("\n") == 1
    assert run.items() == []


@pytest.mark.parametrize("path", ["/../x", "/a/./b", "/%2e%2e/x", "/health/.."])
def test_health_check_path_with_a_dot_segment_is_refused(run: Run, path: str) -> None:
    run.refused("spec.health_check_path", *deploy("--health-check-path", path))
    assert run.items() == []


def test_schema_o_yaml_prints_yaml(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["inference", "schema", "-o", "yaml"]) == 0
    out = capsys.readouterr().out
    assert not out.lstrip().startswith("{")
    assert yaml.safe_load(out) == spec_json_schema()


def test_replicas_0_is_observed_stopped_not_pending() -> None:
    record: EndpointRecord = make_record({"replicas": 0}, target_regions=[EAST], region_status={
        EAST: status("running", 0, 0)})  # fmt: skip
    seen = observed_state.in_region(record, EAST)
    assert (seen.state, seen.reason) == ("stopped", observed_state.SCALED_TO_ZERO)
    assert observed_state.aggregate(record).state == "stopped"
    creating = make_record(
        {"replicas": 0}, target_regions=[EAST], region_status={EAST: status("creating", 0, 0)}
    )
    assert observed_state.in_region(creating, EAST).state == "stopped"
    one = make_record(target_regions=[EAST], region_status={EAST: status("creating", 0, 0)})
    assert observed_state.in_region(one, EAST).state == "pending"  # one replica asked: it is coming


def test_a_deploy_wait_racing_a_delete_ends_promptly_naming_the_delete(run: Run) -> None:
    """The delete lands while the deploy waits on a Region no reconciler serves: the wait ends at its
    next poll (not after its --timeout of an hour), naming the delete, exit 1."""

    def delete_soon() -> None:
        for _ in range(200):  # bounded: the record appears within a poll of the deploy
            if run.store.get("chat") is not None:
                break
            time.sleep(0.05)
        assert main(["inference", "delete", "chat", "--endpoint-url", run.server.url, "--table",
                     run.store.table_name]) == 0  # fmt: skip

    deleter = threading.Thread(target=delete_soon)
    deleter.start()
    status_, err = run(*deploy("--wait", "--timeout", "3600"))
    deleter.join(timeout=30)
    assert status_ == 1
    assert err.splitlines()[-1].startswith("error: chat was deleted at ") and err.endswith(
        " while waiting: it will not run\n"
    )
