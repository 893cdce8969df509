"""`gco doctor` as a user runs it: options and cdk.json checked first (exit 2, one line), then the
report as lines or JSON, exit 1 exactly when a check failed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gco.cli import main
from tests.cdk.synth_cache import ROOT


def write_cdk_json(tmp_path: Path, gco: object) -> Path:
    path = tmp_path / "cdk.json"
    path.write_text(json.dumps({"app": "true", "context": {"gco": gco}}))
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--region", "Mars"], "error: --region: 'Mars' is not a Region name"),
        (["--cdk-json", "/nonexistent/cdk.json"], "error: --cdk-json: cannot read /nonexistent/cdk.json"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--offline", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err


def test_a_bad_config_names_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_cdk_json(tmp_path, {"kubernetes_version": "1.20"})
    assert main(["doctor", "--offline", "--cdk-json", str(path)]) == 2
    assert f"{path}: gco.kubernetes_version: '1.20' is not in the EKS calendar" in capsys.readouterr().err


def test_a_version_a_chart_does_not_document_is_refused_before_any_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_cdk_json(tmp_path, {"kubernetes_version": "1.36"})  # KEDA in every Region by default
    assert main(["doctor", "--offline", "--cdk-json", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(
        f"error: {path}: gco: kubernetes_version: 1.36 is outside the Kubernetes versions keda "
    )
    assert "\n" not in err


def test_offline_json_report_agrees_with_the_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["doctor", "--offline", "--cdk-json", str(ROOT / "cdk.json"), "--output", "json"])
    report = json.loads(capsys.readouterr().out)
    names = [check["name"] for check in report["checks"]]
    assert names == ["node", "cdk-cli", "docker", "kubernetes-version"]  # no account check offline
    assert all(check["fix"] for check in report["checks"] if check["status"] == "fail")
    assert status == (0 if report["ok"] else 1)
    assert report["ok"] == all(check["status"] != "fail" for check in report["checks"])
